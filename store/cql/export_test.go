package cql

import (
	"context"

	"github.com/gocql/gocql"
)

// OpenTuned opens a store whose driver settings tune may change: tests use
// it to watch and cut the store's connections.
func OpenTuned(ctx context.Context, cfg Config, tune func(*gocql.ClusterConfig)) (*Store, error) {
	return open(ctx, cfg, tune)
}

// SetBatchType changes how AddItems batches, for benchmarks.
func (s *Store) SetBatchType(t gocql.BatchType) { s.batchType = t }

// TakeTurns takes every turn of the long scans, until release.
func (s *Store) TakeTurns() (release func()) { return s.turns.Take() }
