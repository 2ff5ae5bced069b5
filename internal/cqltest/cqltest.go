// Package cqltest connects tests to the real CQL server that the project's
// test command starts (scripts/test), or to any cluster named by
// LISTGATE_TEST_CQL_HOSTS. Tests that need it fail, never skip, when it is
// not there.
package cqltest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/store/cql"
)

// HostsEnv names the CQL hosts tests use, comma separated.
const HostsEnv = "LISTGATE_TEST_CQL_HOSTS"

var (
	mu        sync.Mutex
	keyspaces = map[cql.RemoveStrategy]string{} // one per strategy: an index changes what may be written
)

// Hosts returns the test cluster's hosts, failing the test if none is set.
func Hosts(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(HostsEnv)
	if v == "" {
		t.Fatalf("no CQL server for this test: run it through `make test` (which starts Apache Cassandra), or set %s=host:port", HostsEnv)
	}
	return strings.Split(v, ",")
}

// Config returns a store configuration for the test cluster, on a keyspace
// of this test process's own, created and migrated for the remove strategy
// on first use.
func Config(t testing.TB, strategy cql.RemoveStrategy) cql.Config {
	t.Helper()
	cfg := cql.DefaultConfig()
	cfg.Hosts = Hosts(t)
	cfg.Timeout = 10 * time.Second // a test node on a busy 2-core machine
	cfg.RemoveStrategy = strategy
	mu.Lock()
	defer mu.Unlock()
	if ks, ok := keyspaces[strategy]; ok {
		cfg.Keyspace = ks
		return cfg
	}
	cfg.Keyspace = fmt.Sprintf("listgate_test_%s_%d_%d", strategy, os.Getpid(), time.Now().Unix()%100000)
	if err := migrate(cfg); err != nil {
		t.Fatalf("setting up keyspace %s: %v", cfg.Keyspace, err)
	}
	keyspaces[strategy] = cfg.Keyspace
	return cfg
}

func migrate(cfg cql.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx, cql.DefaultSchema())
}

// Open opens a store on the test keyspace, closed when the test ends.
func Open(t testing.TB, cfg cql.Config) *cql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("opening the CQL store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
