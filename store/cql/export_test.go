package cql

import (
	"context"
	"reflect"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
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

// ShiftClock moves the store's measure of the cluster's clock by d, as a
// new sample that moves the middle of the nodes' range would.
func (s *Store) ShiftClock(d time.Duration) {
	e := *s.clock.est.Load()
	e.offset += int64(d)
	s.clock.est.Store(&e)
}

// Settled is the feed's settled end, as a reader reads it now.
func (s *Store) Settled(ctx context.Context) (time.Time, error) {
	s.settledAt.Store(0) // not the one read last
	t, err := s.settled(ctx)
	return timeOf(t), err
}

// SetAuditAfter sets how long after its read a span is counted again.
func (s *Store) SetAuditAfter(d time.Duration) { s.audit.after = d }

// RecordAt is a record of the items of values (one, usually) at the time
// at, as a gateway would write it, with a random node.
func (s *Store) RecordAt(l store.List, at time.Time, values ...string) (stmt string, args []any) {
	w, err := newFeedWriter()
	if err != nil {
		panic(err)
	}
	tick := ticks(at)
	var ks []string
	var vs [][]byte
	size := 0
	for i, v := range values {
		key := keys.ItemKey(at.UnixNano()+int64(i), []byte(v))
		ks, vs = append(ks, key), append(vs, []byte(v))
		size += len(key) + len(v) + store.ItemOverhead
	}
	return s.stmt.insertChange, []any{bucketOf(timeOf(tick)), s.shardOf(l.ID()), w.timeUUID(tick), l.Feature.Key(), l.Feature.CreatedAt, l.EntityID,
		ks, vs, size, int(s.cfg.Feed.Retention / time.Second)}
}

// SetHostsUp sets how many hosts the store counts up: 2 on one node
// makes every read take gocql's speculative path, for benchmarks (with a
// delay no read reaches: a second execution would find no host).
func (s *Store) SetHostsUp(n int) { s.slow.up.Store(int32(n)) }

// SpeculativeDelay is how long a read begun now waits for its first host.
func (s *Store) SpeculativeDelay() time.Duration { return s.spec.Delay() }

// SetHeadsPerRead bounds the heads one read of the feed holds.
func (s *Store) SetHeadsPerRead(n int) { s.headsPerRead = n }

// BucketWidth is the time a feed partition covers.
const BucketWidth = bucketWidth

// HostPools says, of each host the driver knows, whether it counts it up
// and whether it holds a connection pool for it.
func (s *Store) HostPools() map[string][2]bool {
	hosts := map[string][2]bool{}
	for _, h := range s.session.GetHosts() {
		// A host without a pool has a nil *hostConnPool in a non-nil
		// interface.
		p := s.session.GetHostPoolByID(h.HostID())
		hosts[h.ConnectAddress().String()] = [2]bool{h.IsUp(), p != nil && !reflect.ValueOf(p).IsNil()}
	}
	return hosts
}
