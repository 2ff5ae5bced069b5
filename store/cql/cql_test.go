package cql_test

import (
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/storetest"
)

func TestConformance(t *testing.T) {
	cqltest.Hosts(t) // once here, not in every case of the suite
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		cfg := cqltest.Config(t)
		cfg.Now = now
		return cqltest.Open(t, cfg)
	})
}
