package load_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/load"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// The load's figures beside their baselines, measured in the same run:
// load into the embedded store beside the store's own batched writes of
// the same items (AddItems, 1,000 a batch, as many at once), and load
// into a cluster beside a plain gocql loader of the same rows: one that
// reads the file (encoding/json, a row at a time, 1,000 of a list to a
// batch), and the same writes of the items already in memory (unlogged
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
			b.Run("gateway", func(b *testing.B) {
				tgt := gatewayTarget(gateway(b, s))
				for b.Loop() {
					sum, err := load.Run(context.Background(), load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(),
						MaxRowBytes: dataio.DefaultMaxRowBytes, Target: tgt, Concurrency: benchConcurrency})
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
			insert := func(l store.List, its []store.NewItem) error {
				batch := session.Batch(gocql.UnloggedBatch)
				for _, it := range its {
					age := int(time.Since(time.Unix(0, it.Timestamp)) / time.Second)
					batch.Query("INSERT INTO list_items (feature_key, entity_id, item_key, value) VALUES (?, ?, ?, ?) USING TTL ?",
						l.Feature.Key(), l.EntityID, keys.ItemKey(it.Timestamp, it.Value), it.Value, ttl-age)
				}
				return session.ExecuteBatch(batch)
			}
			b.Run("gocql-file", func(b *testing.B) {
				for b.Loop() {
					plainLoad(b, f, path, insert)
				}
				b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
			})
			b.Run("gocql", func(b *testing.B) {
				for b.Loop() {
					writeBatches(b, f, items, insert)
				}
				b.ReportMetric(float64(benchItems*b.N)/b.Elapsed().Seconds(), "items/s")
			})
		})
	}
}

// plainLoad is a loader as a team would write it with encoding/json: it
// reads the file a row at a time, gathers each list's rows, and sends
// 1,000 of a list as one batch, benchConcurrency at once; no checks, no
// checkpoint, no progress.
func plainLoad(b *testing.B, f *store.Feature, path string, write func(store.List, []store.NewItem) error) {
	file, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer file.Close()
	jobs := make(chan func() error, benchConcurrency)
	var wg sync.WaitGroup
	var once sync.Once
	for range benchConcurrency {
		wg.Go(func() {
			for j := range jobs {
				if err := j(); err != nil {
					once.Do(func() { b.Error(err) })
				}
			}
		})
	}
	pending := map[string][]store.NewItem{}
	send := func(id string) {
		l, its := store.List{Feature: f, EntityID: id}, pending[id]
		delete(pending, id)
		jobs <- func() error { return write(l, its) }
	}
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		var row struct {
			EntityID  string    `json:"entityId"`
			Value     string    `json:"value"`
			Timestamp time.Time `json:"timestamp"`
		}
		if err := json.Unmarshal(lines.Bytes(), &row); err != nil {
			b.Fatal(err)
		}
		pending[row.EntityID] = append(pending[row.EntityID], store.NewItem{Timestamp: row.Timestamp.UnixNano(), Value: []byte(row.Value)})
		if len(pending[row.EntityID]) == 1000 {
			send(row.EntityID)
		}
	}
	if err := lines.Err(); err != nil {
		b.Fatal(err)
	}
	for id := range pending {
		send(id)
	}
	close(jobs)
	wg.Wait()
}

// gateway serves s as a gateway does, with its default limits, in this
// process.
func gateway(b testing.TB, s store.Store) *httptest.Server {
	log := slog.New(slog.DiscardHandler)
	catalog, err := features.New(context.Background(), s, log, nil)
	if err != nil {
		b.Fatal(err)
	}
	h, err := endpoint.New(endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: endpoint.DefaultLimits, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv
}

// gatewayTarget loads through srv, packed as listgate load packs by
// default.
func gatewayTarget(srv *httptest.Server) *load.GatewayTarget {
	return &load.GatewayTarget{URL: srv.URL + "/graphql", Client: srv.Client(), Retries: 3, Limit: load.Limits{
		ListItems: 1000, ListBytes: store.DefaultLimits.MaxAddBytes, BatchLists: endpoint.DefaultLimits.MaxBatchLists,
		BatchItems: 1000, BatchBytes: 900 << 10, ValueBytes: store.DefaultLimits.MaxValueBytes}}
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
