package cql

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Items reads one page of a list with one single-partition query. It asks
// for one item more than the page holds, to learn whether more follow.
func (s *Store) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	if err := l.Validate(); err != nil {
		return store.Page{}, err
	}
	if err := r.Validate(); err != nil {
		return store.Page{}, err
	}
	lower, upper := "", keys.MaxItemKey
	if r.MinTimestamp > 0 {
		lower = keys.TimestampPrefix(r.MinTimestamp)
	}
	if r.After != "" {
		upper = r.After
	}
	iter := s.session.Query(s.stmt.selectItems, l.Feature.Key(), l.EntityID, lower, upper, r.Limit+1).
		WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(r.Limit + 1).Iter()
	page := store.Page{Items: make([]store.Item, 0, min(r.Limit, iter.NumRows()))}
	scanner := iter.Scanner()
	for scanner.Next() {
		if len(page.Items) == r.Limit {
			page.HasMore = true
			break
		}
		var it store.Item
		if err := scanner.Scan(&it.Key, &it.Value); err != nil {
			_ = iter.Close()
			return store.Page{}, classify("reading list items", err)
		}
		it.Timestamp = keys.ItemTimestamp(it.Key)
		page.Items = append(page.Items, it)
	}
	if err := scanner.Err(); err != nil {
		return store.Page{}, classify("reading list items", err)
	}
	return page, nil
}

// AddItems writes the items in one batch into the list's partition: the
// server applies all of them or none. Every attempt of the batch carries the
// operation's one client timestamp, so a retry is the same write.
func (s *Store) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	writes, expired, err := store.PrepareAdd(l, items, s.now(), s.cap, s.cfg.Limits)
	if err != nil {
		return store.AddResult{}, err
	}
	if len(writes) == 0 {
		return store.AddResult{Expired: expired}, nil
	}
	fk := l.Feature.Key()
	// Logged, though no safer for it: all entries are in one partition, one
	// mutation the server applies atomically either way, and both Cassandra
	// (5.0's BatchStatement uses the batchlog only when logged with more than
	// one mutation) and ScyllaDB (counted as "unlogged from logged") skip the
	// batchlog for it. Unlogged measured no faster (BenchmarkBatchType, the
	// two alternating, one Cassandra 5.0.8 node, medians of 5, logged vs
	// unlogged: 10 items 1.58/1.57 ms, 100 items 1.90/1.96 ms). Logged stays
	// atomic even if an entry ever reached a second partition; unlogged would
	// silently stop being so.
	b := s.session.Batch(s.batchType).WithContext(ctx).WithTimestamp(writeTimestamp())
	b.SetConsistency(s.cfg.WriteConsistency)
	b.Entries = make([]gocql.BatchEntry, len(writes))
	for i, w := range writes {
		// The driver stamps each attempt with the time it is sent unless
		// the batch carries a timestamp; with the operation's own, a retry
		// re-sends the same rows at the same timestamp and changes nothing,
		// even after a later operation removed them.
		b.Entries[i] = gocql.BatchEntry{Stmt: s.stmt.insertItem, Args: []any{fk, l.EntityID, w.Key, w.Value, w.TTL}, Idempotent: true}
	}
	if err := s.session.ExecuteBatch(b); err != nil {
		return store.AddResult{}, classify("adding list items", err)
	}
	return store.AddResult{Added: len(writes), Expired: expired}, nil
}

// removeBatch bounds the item keys of one delete statement.
const removeBatch = 10

// RemoveValue finds the items holding value, by key scan or by index, and
// deletes them, at most ten keys per statement, all at one client timestamp
// taken after the scan: later than the additions it found, and the same for
// every attempt of every statement.
func (s *Store) RemoveValue(ctx context.Context, l store.List, value []byte) (int, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	fk := l.Feature.Key()
	var found []string
	var iter *gocql.Iter
	if s.cfg.RemoveStrategy == RemoveByIndex {
		iter = s.session.Query(s.stmt.selectKeysByValue, fk, l.EntityID, value).WithContext(ctx).
			Consistency(s.cfg.ReadConsistency).Idempotent(true).Iter()
	} else {
		iter = s.session.Query(s.stmt.selectItemKeys, fk, l.EntityID).WithContext(ctx).
			Consistency(s.cfg.ReadConsistency).Idempotent(true).Iter()
	}
	hash := keys.ValueHash(value)
	var key string
	for iter.Scan(&key) {
		if keys.HasValueHash(key, hash) {
			found = append(found, key)
		}
	}
	if err := iter.Close(); err != nil {
		return 0, classify("finding items by value", err)
	}
	ts := writeTimestamp()
	for start := 0; start < len(found); start += removeBatch {
		chunk := found[start:min(start+removeBatch, len(found))]
		err := s.session.Query(s.stmt.deleteItems, fk, l.EntityID, chunk).WithContext(ctx).
			Consistency(s.cfg.WriteConsistency).WithTimestamp(ts).Idempotent(true).Exec()
		if err != nil {
			return start, classify(fmt.Sprintf("removing items by value (%d of %d removed)", start, len(found)), err)
		}
	}
	return len(found), nil
}

// RemoveAll deletes the list's partition, at one client timestamp for every
// attempt: a retry cannot delete items added after the first attempt.
func (s *Store) RemoveAll(ctx context.Context, l store.List) error {
	if err := l.Validate(); err != nil {
		return err
	}
	err := s.session.Query(s.stmt.deleteList, l.Feature.Key(), l.EntityID).WithContext(ctx).
		Consistency(s.cfg.WriteConsistency).WithTimestamp(writeTimestamp()).Idempotent(true).Exec()
	return classify("removing all list items", err)
}

// ItemTTL reads the TTL the server holds for an item (for tests).
func (s *Store) ItemTTL(ctx context.Context, l store.List, itemKey string) (time.Duration, error) {
	var ttl int
	err := s.session.Query(s.stmt.selectTTL, l.Feature.Key(), l.EntityID, itemKey).WithContext(ctx).
		Consistency(s.cfg.ReadConsistency).Scan(&ttl)
	if err == gocql.ErrNotFound {
		return 0, fmt.Errorf("item %s: %w", itemKey, errkind.NotFound)
	}
	if err != nil {
		return 0, classify("reading an item's TTL", err)
	}
	return time.Duration(ttl) * time.Second, nil
}

// lastTimestamp is the latest client timestamp this process handed out.
var lastTimestamp atomic.Int64

// writeTimestamp returns the client timestamp of one write operation, in
// microseconds: the wall clock, but always later than the one before it in
// this process, so that of two operations one after the other (an add after
// a removal, say) the later wins even within one microsecond. gocql would
// stamp each attempt with the time it is sent instead; lightweight
// transactions take none (the server uses its Paxos ballot).
func writeTimestamp() int64 {
	for {
		last := lastTimestamp.Load()
		ts := max(time.Now().UnixMicro(), last+1)
		if lastTimestamp.CompareAndSwap(last, ts) {
			return ts
		}
	}
}
