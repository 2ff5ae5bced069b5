package cql

import (
	"context"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/store"
)

// OpenTuned opens a store whose driver settings tune may change: tests use
// it to watch and cut the store's connections.
func OpenTuned(ctx context.Context, cfg Config, tune func(*gocql.ClusterConfig)) (*Store, error) {
	return open(ctx, cfg, tune)
}

// SetBatchType changes how AddItems batches, for benchmarks.
func (s *Store) SetBatchType(t gocql.BatchType) { s.batchType = t }

// SetSharedRecordBytes changes the bound of a record that goes in its
// add's batch, for benchmarks (0: none does), and returns the one before.
func (s *Store) SetSharedRecordBytes(n int) int {
	prev := s.sharedRecord
	s.sharedRecord = n
	return prev
}

// TakeTurns takes every turn of the long scans, until release.
func (s *Store) TakeTurns() (release func()) { return s.turns.Take() }

// AddInOneBatch adds as AddItems does to an uncapped live feature, but
// with the change record in the items' batch, logged: the alternative to
// sending the two at once, for BenchmarkLiveAdd.
func (s *Store) AddInOneBatch(ctx context.Context, l store.List, items []store.NewItem) error {
	writes, _, err := store.PrepareAdd(l, items, s.now(), s.cap, s.cfg.Limits)
	if err != nil {
		return err
	}
	b := s.session.Batch(gocql.LoggedBatch).WithContext(ctx).WithTimestamp(writeTimestamp())
	b.SetConsistency(s.cfg.WriteConsistency)
	fk := l.Feature.Key()
	for _, w := range writes {
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.stmt.insertItem, Args: []any{fk, l.EntityID, w.Key, w.Value, w.TTL}, Idempotent: true})
	}
	at := s.clock.Now()
	c := store.ChangeOf("", at, l, writes)
	keys := make([]string, len(c.Items))
	values := make([][]byte, len(c.Items))
	for i, it := range c.Items {
		keys[i], values[i] = it.Key, it.Value
	}
	b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.stmt.insertChange, Args: []any{bucketOf(at), s.shardOf(c.List), s.writer.timeUUID(ticks(at)), c.List.Feature, l.Feature.CreatedAt, c.List.EntityID, keys, values, store.ChangeBytes(c), int(s.cfg.Feed.Retention / time.Second)}, Idempotent: true})
	return s.session.ExecuteBatch(b)
}
