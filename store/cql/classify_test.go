package cql

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
)

// The server's "not enough replicas" and timeouts are UNAVAILABLE (another
// attempt may succeed), whatever wraps them; scylladb/gocql's typed errors
// carry their code as GetCode.
func TestServerErrorsAreUnavailable(t *testing.T) {
	unavailable := &gocql.RequestErrUnavailable{Consistency: gocql.LocalQuorum, Required: 2, Alive: 1}
	unavailable.ErrorFrame.Code = gocql.ErrCodeUnavailable
	writeTimeout := &gocql.RequestErrWriteTimeout{}
	writeTimeout.ErrorFrame.Code = gocql.ErrCodeWriteTimeout
	for name, err := range map[string]error{"unavailable": fmt.Errorf("batch: %w", unavailable), "write timeout": writeTimeout} {
		if got := classify("adding list items", err); !errors.Is(got, errkind.Unavailable) {
			t.Errorf("%s: %v is not errkind.Unavailable", name, got)
		}
		if got := errorType(err); got != map[string]string{"unavailable": "unavailable", "write timeout": "write_timeout"}[name] {
			t.Errorf("%s: errorType %q", name, got)
		}
	}
}
