package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/embedded"
)

// benchExportItems is how many items BenchmarkExport exports: lists of
// benchListItems items each.
const benchExportItems, benchListItems = 1_000_000, 1000

// fillForExport adds benchExportItems items to a new feature of s, in
// adds of one list's benchListItems items, writers at once.
func fillForExport(b *testing.B, s store.Store, writers int) {
	b.Helper()
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "reading_history", ValueType: store.String, TTL: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	var next atomic.Int64
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			items := make([]store.NewItem, benchListItems)
			for {
				list := next.Add(1) - 1
				if list >= benchExportItems/benchListItems {
					return
				}
				for i := range items {
					items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: fmt.Appendf(nil, "story%07d", i)}
				}
				if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: fmt.Sprintf("user%06d", list)}, items); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// exportRate runs listgate export with args b.N times, each to a file of
// its own, and reports items/s.
func exportRate(b *testing.B, args ...string) {
	out := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		path := filepath.Join(out, fmt.Sprintf("export%d.ndjson", i))
		var stderr strings.Builder
		if err := run(context.Background(), append(append([]string{"export"}, args...), "--out", path), noEnv, os.Stdout, &stderr); err != nil {
			b.Fatal(err)
		}
		if n := exportedItems(b, stderr.String()); n != benchExportItems {
			b.Fatalf("exported %d items, want %d", n, benchExportItems)
		}
		b.StopTimer()
		os.Remove(path)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchExportItems)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkExport measures listgate export of 1,000,000 items to NDJSON:
// from the embedded store; and from the Cassandra test node (with
// LISTGATE_INTEGRATION=1) beside a plain token-range scan of the same
// table, the same ranges as many at once, which only counts the rows.
//
//	LISTGATE_INTEGRATION=1 LISTGATE_TEST_CQL_HOSTS=127.0.0.1:9042 go test -run '^$' -bench BenchmarkExport -benchtime 3x .
func BenchmarkExport(b *testing.B) {
	b.Run("embedded", func(b *testing.B) {
		dir := b.TempDir()
		s, err := embedded.Open(embedded.Config{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		fillForExport(b, s, 2)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		exportRate(b, "--data-dir", dir)
	})
	if os.Getenv("LISTGATE_INTEGRATION") == "" {
		return
	}
	cfg := cqltest.Config(b) // a keyspace of this process's own: the bench's items alone
	s := cqltest.Open(b, cfg)
	fillForExport(b, s, 8)
	// Unmeasured: the first read after a million writes pays for the
	// node's flushes and compactions (3.6× slower, whichever read it is).
	if n := plainScan(b, cfg); n != benchExportItems {
		b.Fatalf("scanned %d rows, want %d", n, benchExportItems)
	}
	for range 3 { // alternating, so that neither has the node's caches to itself
		b.Run("cql", func(b *testing.B) {
			exportRate(b, "--cql-hosts", strings.Join(cfg.Hosts, ","), "--cql-keyspace", cfg.Keyspace)
		})
		b.Run("cql-plain-scan", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if n := plainScan(b, cfg); n != benchExportItems {
					b.Fatalf("scanned %d rows, want %d", n, benchExportItems)
				}
			}
			b.ReportMetric(float64(benchExportItems)*float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// plainScan reads every row of the keyspace's list_items as a plain gocql
// program would, by the ranges and parallelism of cql.DefaultExport, from
// a session of its own, and counts them.
func plainScan(b *testing.B, cfg cql.Config) int {
	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Keyspace = cfg.Keyspace
	cluster.Timeout = cfg.Timeout
	cluster.Consistency = gocql.LocalQuorum
	session, err := cluster.CreateSession()
	if err != nil {
		b.Fatal(err)
	}
	defer session.Close()
	ranges := make(chan [2]int64)
	go func() {
		defer close(ranges)
		n := cql.DefaultExport.Ranges
		step := ^uint64(0) / uint64(n)
		from := int64(-1 << 63)
		for i := range n {
			to := int64(uint64(from) + step)
			if i == n-1 {
				to = 1<<63 - 1
			}
			ranges <- [2]int64{from, to}
			from = to
		}
	}()
	var rows atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range cql.DefaultExport.Parallel {
		wg.Go(func() {
			for r := range ranges {
				iter := session.Query("SELECT feature_key, entity_id, item_key, value FROM list_items WHERE token(feature_key, entity_id) > ? AND token(feature_key, entity_id) <= ?", r[0], r[1]).
					PageSize(cql.DefaultExport.PageSize).Iter()
				var fk, id, key string
				var value []byte
				n := 0
				for iter.Scan(&fk, &id, &key, &value) {
					n++
				}
				if err := iter.Close(); err != nil {
					failed.Store(err)
				}
				rows.Add(int64(n))
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	return int(rows.Load())
}
