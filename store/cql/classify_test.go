package cql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

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

// The driver's error for a cluster it cannot reach ends in line breaks;
// the store's, which a log line carries in a field, is one line, and still
// the driver's error underneath.
func TestDriverErrorsAreOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := DefaultConfig()
	cfg.Hosts, cfg.Timeout = []string{closed}, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err == nil {
		s.Close()
		t.Fatalf("Open of %s, where nothing listens, succeeded", closed)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, closed) || !errors.Is(err, errkind.Unavailable) {
		t.Fatalf("Open of %s: %q, want one line naming the host, Unavailable", closed, msg)
	}
	wrapped := fmt.Errorf("reading: %w\n", errors.New("x"))
	if got := classify("op", wrapped).Error(); got != "op: reading: x" || !errors.Is(classify("op", wrapped), errors.Unwrap(wrapped)) {
		t.Fatalf("classify of a line-broken error: %q", got)
	}
}
