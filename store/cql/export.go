package cql

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
)

// An export reads the whole of list_items by token ranges, as Spark's
// Cassandra connector and DataStax's bulk loader read a table: the ring
// (Murmur3's tokens, -2^63 to 2^63-1) is split into ExportRanges equal
// ranges, read ExportParallel at a time, each one paged query
// `token(feature_key, entity_id) > ? AND token(…) <= ?`. A partition has
// one token, so a list's rows come whole from one range, together and in
// clustering order (newest first), as store.ExportRuns needs them; rows of
// features not asked for are read and dropped, as a table scan must.

// ExportConfig tunes a scan of the table.
type ExportConfig struct {
	// Ranges is how many token ranges the ring is split into: more than
	// Parallel, so that a range of more rows than the others ends while
	// others are read.
	Ranges int
	// Parallel is how many ranges are read at once.
	Parallel int
	// PageSize is the rows of one page of a range's query.
	PageSize int
}

// DefaultExport reads 64 ranges, 4 at a time, 1,000 rows a page: at most
// 4 ranges × 2 pages (the driver fetches the next page as the last quarter
// of one is read) × 1,000 rows held at once, and 4 runs waiting.
var DefaultExport = ExportConfig{Ranges: 64, Parallel: 4, PageSize: 1000}

// exportStatement reads a token range's rows; the write time only
// for a feature created again (store.Feature.ItemsSince).
func exportStatement(ks string, writeTimes bool) string {
	columns := "feature_key, entity_id, item_key, value, TTL(value)"
	if writeTimes {
		columns += ", WRITETIME(value)"
	}
	return "SELECT " + columns + " FROM " + ks + ".list_items WHERE token(feature_key, entity_id) > ? AND token(feature_key, entity_id) <= ?"
}

// tokenRange is the tokens above from, up to and with to.
type tokenRange struct{ from, to int64 }

// splitRing splits Murmur3's ring into n ranges of (nearly) equal width.
// No key has the token -2^63 (Murmur3Partitioner gives its keys' hashes
// of that value the token 2^63-1), so the first range starts above it.
func splitRing(n int) []tokenRange {
	n = max(n, 1)
	step := math.MaxUint64 / uint64(n)
	out := make([]tokenRange, n)
	from := int64(math.MinInt64)
	for i := range out {
		to := int64(uint64(from) + step)
		if i == n-1 {
			to = math.MaxInt64
		}
		out[i] = tokenRange{from, to}
		from = to
	}
	return out
}

// checkPartitioner refuses a cluster whose partitioner is not Murmur3's:
// splitRing knows only its tokens.
func (s *Store) checkPartitioner(ctx context.Context) error {
	var p string
	if err := s.session.Query("SELECT partitioner FROM system.local").WithContext(ctx).Scan(&p); err != nil {
		return classify("reading the cluster's partitioner", err)
	}
	if p != "org.apache.cassandra.dht.Murmur3Partitioner" {
		return fmt.Errorf("%w cluster: its partitioner is %s; an export reads token ranges of Murmur3Partitioner's alone", errkind.Invalid, p)
	}
	return nil
}

// Export reads every item of the lists of features (store.Exporter) by
// parallel token-range scans of the whole table. Runs come to fn in the
// order the ranges' readers gather them.
func (s *Store) Export(ctx context.Context, features []*store.Feature, fn func(store.ListItems) error) error {
	if len(features) == 0 {
		return nil
	}
	if err := s.checkPartitioner(ctx); err != nil {
		return err
	}
	cfg := s.cfg.Export
	if cfg == (ExportConfig{}) {
		cfg = DefaultExport
	}
	writeTimes := false
	for _, f := range features {
		writeTimes = writeTimes || f.ItemsSince != 0
	}
	stmt := exportStatement(s.cfg.Keyspace, writeTimes)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	ranges := make(chan tokenRange)
	g.Go(func() error {
		defer close(ranges)
		for _, r := range splitRing(cfg.Ranges) {
			select {
			case ranges <- r:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	// runs carries the readers' runs to fn, on this goroutine; it is
	// closed once every reader has ended.
	runs := make(chan store.ListItems, cfg.Parallel)
	var readers sync.WaitGroup
	for range max(cfg.Parallel, 1) {
		readers.Add(1)
		g.Go(func() error {
			defer readers.Done()
			for r := range ranges {
				if err := s.exportRange(gctx, stmt, writeTimes, cfg.PageSize, r, features, runs); err != nil {
					return err
				}
			}
			return nil
		})
	}
	go func() { readers.Wait(); close(runs) }()
	var fnErr error
	for run := range runs {
		if fnErr == nil {
			if fnErr = fn(run); fnErr != nil {
				cancel() // the readers end; their runs are drained unread
			}
		}
	}
	err := g.Wait()
	if fnErr != nil {
		return fnErr
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return classify("exporting list items", ctx.Err())
	}
	return err
}

// exportRange reads one token range, paged, and hands its runs to runs.
// It is one query, not speculated: a scan of many pages is not what a
// second host answering one read sooner helps.
func (s *Store) exportRange(ctx context.Context, stmt string, writeTimes bool, pageSize int, r tokenRange, features []*store.Feature, runs chan<- store.ListItems) error {
	gather := store.NewExportRuns(features, func(run store.ListItems) error {
		select {
		case runs <- run:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	iter := s.session.Query(stmt, r.from, r.to).WithContext(ctx).Consistency(s.cfg.ReadConsistency).
		Idempotent(true).PageSize(pageSize).Iter()
	scanner := iter.Scanner()
	now := s.now().Unix()
	var (
		fk, entityID string
		ttl          int
		row          store.Row
	)
	dest := []any{&fk, &entityID, &row.Key, &row.Value, &ttl}
	if writeTimes {
		dest = append(dest, &row.WriteTime)
	}
	n := 0
	defer func() { s.rows.Read(ctx, n, true) }()
	for scanner.Next() {
		row = store.Row{}
		if err := scanner.Scan(dest...); err != nil {
			_ = iter.Close()
			return classify("exporting list items", err)
		}
		n++
		var expiry int64
		if ttl > 0 {
			expiry = now + int64(ttl)
		}
		if err := gather.Row(fk, entityID, row, expiry); err != nil {
			_ = iter.Close()
			return err
		}
	}
	if err := scanner.Err(); err != nil {
		return classify("exporting list items", err)
	}
	return gather.Flush()
}
