package cql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/storetest"
)

func TestConformance(t *testing.T) {
	cqltest.Hosts(t) // once here, not in every case of the suite
	storetest.RunWith(t, func(t *testing.T, now func() time.Time, opts storetest.Options) store.Store {
		cfg := cqltest.Config(t)
		cfg.Now = now
		if opts.FeedRetention > 0 {
			cfg.Feed.Retention = opts.FeedRetention
		}
		return cqltest.Open(t, cfg)
	})
}

// A feature stored before the live flag existed, its row without a value
// of the column, reads as live: an upgrade ends no subscription.
func TestFeatureOfAnEarlierReleaseIsLive(t *testing.T) {
	cfg := cqltest.Config(t)
	s := cqltest.Open(t, cfg)
	entityType := fmt.Sprintf("old%d", time.Now().UnixNano()%1e9)
	err := rawSession(t, cfg).Query("INSERT INTO "+cfg.Keyspace+".list_features (entity_type, name, version, value_type, ttl_seconds, description, created_at) VALUES (?, 'old', '', 'STRING', 3600, '', ?)",
		entityType, time.Now().Add(-time.Hour)).Exec()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := s.Features(context.Background(), entityType)
	if err != nil || len(fs) != 1 || !fs[0].Live || !fs[0].LiveSince.IsZero() {
		t.Fatalf("Features = %+v, %v; want one, live since its creation", fs, err)
	}
}
