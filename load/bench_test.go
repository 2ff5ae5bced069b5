package load_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/load"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// The load's figures beside their baselines, measured in the same run:
// load into the embedded store beside the store's own batched writes of
// the same items (AddItems, 1,000 a batch, as many at once), and load
// into a cluster beside a plain gocql loader of the same rows (unlogged
// single-partition batches, token-aware, as many at once). Each reports
// items/s; one iteration is one load of benchItems rows over benchLists
// lists.
const (
	benchItems       = 200_000
	benchLists       = 200
	benchConcurrency = 8
)

func BenchmarkLoad(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			f := createFeatureB(b, s)
			path, items := writeRowsB(b, f)
			b.Run("load", func(b *testing.B) {
				for b.Loop() {
					sum, err := load.Run(context.Background(), load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(),
						MaxRowBytes: dataio.DefaultMaxRowBytes, Target: target(b, s), Concurrency: benchConcurrency})
					if err != nil || sum.Rows != benchItems {
						b.Fatal(sum, err)
					}
				}
				b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
			})
			b.Run("store", func(b *testing.B) {
				for b.Loop() {
					writeBatches(b, f, items, func(l store.List, its []store.NewItem) error {
						_, err := s.AddItems(context.Background(), l, its)
						return err
					})
				}
				b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
			})
			if be.name != "cql" {
				return
			}
			b.Run("gocql", func(b *testing.B) {
				cfg := cqltest.Config(b)
				cluster := gocql.NewCluster(cfg.Hosts...)
				cluster.Keyspace = cfg.Keyspace
				cluster.Consistency = gocql.LocalQuorum
				cluster.Timeout = cfg.Timeout
				cluster.NumConns = 2
				cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
				session, err := cluster.CreateSession()
				if err != nil {
					b.Fatal(err)
				}
				defer session.Close()
				ttl := int(f.TTL / time.Second)
				for b.Loop() {
					writeBatches(b, f, items, func(l store.List, its []store.NewItem) error {
						batch := session.Batch(gocql.UnloggedBatch)
						for _, it := range its {
							age := int(time.Since(time.Unix(0, it.Timestamp)) / time.Second)
							batch.Query("INSERT INTO list_items (feature_key, entity_id, item_key, value) VALUES (?, ?, ?, ?) USING TTL ?",
								l.Feature.Key(), l.EntityID, keys.ItemKey(it.Timestamp, it.Value), it.Value, ttl-age)
						}
						return session.ExecuteBatch(batch)
					})
				}
				b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
			})
		})
	}
}

func createFeatureB(b *testing.B, s store.Store) *store.Feature {
	f := store.Feature{EntityType: fmt.Sprintf("bench%d", time.Now().UnixNano()%1e9), Name: "history", ValueType: store.String, TTL: 30 * 24 * time.Hour}
	if _, err := s.CreateFeature(context.Background(), f); err != nil {
		b.Fatal(err)
	}
	return &f
}

// writeRowsB writes the rows, each list's together, and returns them by list.
func writeRowsB(b *testing.B, f *store.Feature) (string, map[string][]store.NewItem) {
	path := filepath.Join(b.TempDir(), "rows.ndjson")
	file, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w, _ := dataio.NewWriter(dataio.NDJSON, file)
	items := map[string][]store.NewItem{}
	now := time.Now().UnixNano()
	for i := range benchItems {
		id := fmt.Sprintf("user%d", i*benchLists/benchItems)
		it := store.NewItem{Timestamp: now - int64(i)*1e6, Value: fmt.Appendf(nil, "story-%08d", i)}
		items[id] = append(items[id], it)
		w.Write(dataio.Row{EntityType: f.EntityType, EntityID: id, Feature: f.Name, Value: dataio.StoredValue(store.String, it.Value), Timestamp: it.Timestamp, HasTimestamp: true})
	}
	w.Close()
	file.Close()
	return path, items
}

// writeBatches writes every list's items in batches of 1,000, benchConcurrency at once.
func writeBatches(b *testing.B, f *store.Feature, items map[string][]store.NewItem, write func(store.List, []store.NewItem) error) {
	jobs := make(chan func() error)
	var wg sync.WaitGroup
	var once sync.Once
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := j(); err != nil {
					once.Do(func() { b.Error(err) })
				}
			}
		}()
	}
	for id, its := range items {
		for start := 0; start < len(its); start += 1000 {
			l, batch := store.List{Feature: f, EntityID: id}, its[start:min(start+1000, len(its))]
			jobs <- func() error { return write(l, batch) }
		}
	}
	close(jobs)
	wg.Wait()
}
