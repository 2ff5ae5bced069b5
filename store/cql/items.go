package cql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// scanner reads a list's rows with one single-partition query, paged by
// the driver: at most sc.Limit rows, in pages of sc.Fetch rows, at most
// 5,000.
func (s *Store) scanner(l store.List) store.Scanner {
	return func(ctx context.Context, sc store.Scan, fn func(store.Row) bool) error {
		before := sc.Before
		if before == "" {
			before = keys.MaxItemKey
		}
		fetch := sc.Fetch
		if fetch <= 0 || fetch > sc.Limit {
			fetch = sc.Limit
		}
		stmt := s.stmt.scans[b2i(sc.Values)][b2i(sc.WriteTimes)]
		if sc.Ascending {
			stmt = s.stmt.scansAscending[b2i(sc.WriteTimes)]
		}
		page := min(fetch, 5000)
		// A scan that may read more than a page reads pages of longPage
		// rows, and each after the first in its turn (store.Turns):
		// fetched when the one before is read, none ahead, so that it is
		// the turns that bound what long scans ask of the database at
		// once, and a short list's count never waits.
		long := sc.Limit > page
		if long {
			page = min(page, longPage)
		}
		q := s.session.Query(stmt, l.Feature.Key(), l.EntityID, sc.From, before, sc.Limit).
			WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(page)
		if long {
			q = q.Prefetch(0)
		}
		turn := s.turns.Turn()
		defer turn.End()
		iter := s.iter(q)
		scanner := iter.Scanner()
		dest := make([]any, 1, 3)
		var row store.Row
		dest[0] = &row.Key
		if sc.Values {
			dest = append(dest, &row.Value)
		}
		if sc.WriteTimes {
			dest = append(dest, &row.WriteTime)
		}
		n := 0
		defer func() { s.rows.Read(ctx, n, sc.Values) }()
		for {
			if long && n > 0 && n%page == 0 {
				if err := turn.Next(ctx); err != nil {
					_ = iter.Close()
					return err
				}
			}
			if !scanner.Next() {
				break
			}
			row = store.Row{}
			if err := scanner.Scan(dest...); err != nil {
				_ = iter.Close()
				return classify("reading list items", err)
			}
			n++
			if !fn(row) {
				break
			}
		}
		return classify("reading list items", scanner.Err())
	}
}

// longPage is the page of a scan that may read more than one.
const longPage = 1000

// fetcher reads rows of a list by key, with their values: one
// single-partition query.
func (s *Store) fetcher(l store.List) store.Fetcher {
	return func(ctx context.Context, ks []string, fn func(store.Row) bool) error {
		iter := s.iter(s.session.Query(s.stmt.fetchItems, l.Feature.Key(), l.EntityID, ks).
			WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true))
		scanner := iter.Scanner()
		n := 0
		defer func() { s.rows.Read(ctx, n, true) }()
		for scanner.Next() {
			var row store.Row
			if err := scanner.Scan(&row.Key, &row.Value); err != nil {
				_ = iter.Close()
				return classify("reading list items", err)
			}
			n++
			if !fn(row) {
				break
			}
		}
		return classify("reading list items", scanner.Err())
	}
}

// source is how the reads of a list reach its rows.
func (s *Store) source(l store.List) store.Source {
	return store.Source{Scan: s.scanner(l), Fetch: s.fetcher(l)}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Items reads one page of a list.
func (s *Store) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	return store.ReadPage(ctx, l, r, s.source(l))
}

// Since reads the items of a list from a key on, oldest first: one
// single-partition query in the reverse of the clustering order.
func (s *Store) Since(ctx context.Context, l store.List, from string, limit int) (store.SincePage, error) {
	return store.ReadSince(ctx, l, from, limit, s.scanner(l))
}

// Count counts a list's items in a window, reading keys only.
func (s *Store) Count(ctx context.Context, l store.List, w store.Window, maxRows int) (int, error) {
	return store.CountItems(ctx, l, w, maxRows, s.scanner(l))
}

// Histogram counts a list's items in each bucket of a window, reading
// keys only.
func (s *Store) Histogram(ctx context.Context, l store.List, b store.Buckets, maxRows int) ([]int, error) {
	return store.HistogramItems(ctx, l, b, maxRows, s.scanner(l))
}

// Find finds the newest item holding each value.
func (s *Store) Find(ctx context.Context, l store.List, values [][]byte, minTimestamp int64, maxRows int) ([]string, error) {
	return store.FindItems(ctx, l, values, minTimestamp, maxRows, s.source(l))
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
	boundary := ""
	if store.ShouldTrim(l.Feature, len(writes)) {
		// A trim is optional: a list past its cap reads right (reads rank),
		// and the next add trims it. One whose read fails leaves it.
		if top, err := store.NewestKeys(ctx, l, s.scanner(l)); err == nil {
			boundary = store.TrimBoundary(l.Feature, top, writes)
		}
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
	b.Entries = make([]gocql.BatchEntry, len(writes), len(writes)+2)
	for i, w := range writes {
		// The driver stamps each attempt with the time it is sent unless
		// the batch carries a timestamp; with the operation's own, a retry
		// re-sends the same rows at the same timestamp and changes nothing,
		// even after a later operation removed them.
		b.Entries[i] = gocql.BatchEntry{Stmt: s.stmt.insertItem, Args: []any{fk, l.EntityID, w.Key, w.Value, w.TTL}, Idempotent: true}
	}
	if boundary != "" {
		// At the batch's timestamp the range tombstone also covers the
		// batch's own rows below the boundary: they are past the cap.
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: s.stmt.deleteBelow, Args: []any{fk, l.EntityID, boundary}, Idempotent: true})
	}
	if err := s.write(ctx, b, l, writes); err != nil {
		return store.AddResult{}, err
	}
	return store.AddResult{Added: len(writes), Expired: expired}, nil
}

// write sends an add's batch, and for a live feature its record: one
// round trip either way. A small record goes in the same batch, made
// unlogged: the items' partition is still one mutation the server applies
// whole, and the record another, so the two are separate writes, as a
// logged batch would make them only through the batchlog, two more writes.
// A record may then be written for items that were not, as an add that
// fails may have been applied; the client's retry makes it true. A larger
// one is sent beside the batch, at once: a batch over two partitions past
// batch_size_warn_threshold (5 KiB by default) has each one logged by the
// server as a warning, and past batch_size_fail_threshold (50 KiB)
// refused. The record's write runs under this gateway's lease of the
// feed (lease.go), whatever the add's client does; while it runs, readers
// wait for it. The add answers by its deadline all the same (recorded).
func (s *Store) write(ctx context.Context, b *gocql.Batch, l store.List, writes []store.Write) error {
	if err := ctx.Err(); err != nil {
		return err // past its deadline, an add writes nothing, record included
	}
	if !l.Feature.Live {
		return classify("adding list items", s.session.ExecuteBatch(b))
	}
	rec, size, rctx, done, err := s.record(ctx, l, writes)
	if err != nil {
		return err
	}
	recorded := make(chan error, 1)
	if size <= s.sharedRecord {
		b.Type = gocql.UnloggedBatch
		b.Entries = append(b.Entries, rec)
		b.SetConsistency(s.feedWrite)
		go func() {
			defer done()
			recorded <- s.session.ExecuteBatch(b.WithContext(rctx))
		}()
		return s.recorded(ctx, recorded)
	}
	go func() {
		defer done()
		recorded <- s.session.Query(rec.Stmt, rec.Args...).WithContext(rctx).Consistency(s.feedWrite).Idempotent(true).Exec()
	}()
	if err := s.session.ExecuteBatch(b); err != nil {
		return classify("adding list items", err)
	}
	return s.recorded(ctx, recorded)
}

// recorded waits for the write of an add's record, and answers for the
// add by its deadline: a record (or the batch it went in) still being
// written then goes on under the lease, and the add fails as one whose
// statements timed out does, written or not, all of it. A client that
// hung up is answered once the write ends: nobody waits for it.
func (s *Store) recorded(ctx context.Context, recorded <-chan error) error {
	var err error
	select {
	case err = <-recorded:
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = <-recorded
			break
		}
		return classify("adding list items", ctx.Err())
	}
	if err != nil {
		return recordFailed(err)
	}
	return nil
}

// sharedRecordBytes bounds the record (store.ChangeBytes, which counts
// more than the server does) that goes in its add's batch: the items'
// rows and the record, each of about that size, stay under Cassandra's
// default batch_size_warn_threshold of 5 KiB.
const sharedRecordBytes = 2 << 10

// removeBatch bounds the item keys of one delete statement, and
// removeWorkers the statements of one removal at once.
const removeBatch, removeWorkers = 10, 16

// RemoveValues removes the items of a window holding any of the values
// (store.RemoveMatching): one key-only scan, then the values of the rows
// whose hash matches fetched and the rows holding the values deleted, ten
// keys per statement, sixteen statements at once, all at one client
// timestamp taken after the scan: later than the additions it found, and
// the same for every attempt of every statement.
func (s *Store) RemoveValues(ctx context.Context, l store.List, values [][]byte, w store.Window, maxRows int) (int, error) {
	ts := sync.OnceValue(writeTimestamp)
	return store.RemoveMatching(ctx, l, values, w, maxRows, s.source(l), removeBatch, removeWorkers, func(ctx context.Context, ks []string) error {
		err := s.session.Query(s.stmt.deleteItems, l.Feature.Key(), l.EntityID, ks).WithContext(ctx).
			Consistency(s.cfg.WriteConsistency).WithTimestamp(ts()).Idempotent(true).Exec()
		return classify("removing items by value", err)
	})
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

// Rows counts the live rows of a list's partition, shown or not (for
// tests).
func (s *Store) Rows(ctx context.Context, l store.List) (int, error) {
	var n int
	err := s.session.Query(s.stmt.countRows, l.Feature.Key(), l.EntityID).WithContext(ctx).
		Consistency(s.cfg.ReadConsistency).Scan(&n)
	return n, classify("counting a list's rows", err)
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
