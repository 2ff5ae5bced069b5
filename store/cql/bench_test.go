package cql_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
)

// Each benchmark runs one operation at a time against the real server, so
// ns/op is its latency.

// benchStore opens the test store with a feature capped at maxItems (0:
// none).
func benchStore(b *testing.B, maxItems int) (*cql.Store, *store.Feature) {
	b.Helper()
	s := cqltest.Open(b, cqltest.Config(b))
	f, err := s.CreateFeature(context.Background(), store.Feature{
		EntityType: fmt.Sprintf("bench%d", time.Now().UnixNano()%1e9), Name: "reading_history", ValueType: store.String, TTL: 24 * time.Hour, MaxItems: maxItems,
	})
	if err != nil {
		b.Fatal(err)
	}
	return s, &f
}

// fill writes n items with distinct values, then the value "target" at
// three timestamps.
func fill(b *testing.B, s store.Store, l store.List, n int) {
	b.Helper()
	now := time.Now()
	items := make([]store.NewItem, 0, 1000)
	for i := 0; i < n; i++ {
		items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: fmt.Appendf(nil, "story%07d", i)})
		if len(items) == cap(items) || i == n-1 {
			if _, err := s.AddItems(context.Background(), l, items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
	addTarget(b, s, l, now)
}

func addTarget(b *testing.B, s store.Store, l store.List, now time.Time) {
	b.Helper()
	var items []store.NewItem
	for i := range 3 {
		items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Hour).UnixNano(), Value: []byte("target")})
	}
	if _, err := s.AddItems(context.Background(), l, items); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkItems(b *testing.B) {
	s, f := benchStore(b, 0)
	l := store.List{Feature: f, EntityID: "u1"}
	fill(b, s, l, 1000)
	for _, limit := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				p, err := s.Items(ctx, l, store.Range{Limit: limit})
				if err != nil || len(p.Items) != limit {
					b.Fatalf("Items: %d items, %v", len(p.Items), err)
				}
			}
			b.ReportMetric(float64(limit*b.N)/b.Elapsed().Seconds(), "items/s")
		})
		b.Run(fmt.Sprintf("distinct/limit=%d", limit), func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				p, err := s.Items(ctx, l, store.Range{Limit: limit, Distinct: true, MaxScan: 10 * limit})
				if err != nil || len(p.Items) != limit {
					b.Fatalf("Items: %d items, %v", len(p.Items), err)
				}
			}
		})
	}
}

// BenchmarkSpeculativeRead reads 10 items through gocql's speculative
// path (a second execution armed, never sent) and through its plain one,
// alternating: the CPU a read's speculation costs the client when nothing
// is slow.
func BenchmarkSpeculativeRead(b *testing.B) {
	cfg := cqltest.Config(b)
	cfg.Speculation.Delay = time.Second // reached by no read: one node has no second host
	spec := cqltest.Open(b, cfg)
	spec.SetHostsUp(2)
	cfg.Speculation.Enabled = false
	plain := cqltest.Open(b, cfg)
	f, err := spec.CreateFeature(context.Background(), store.Feature{
		EntityType: fmt.Sprintf("bench%d", time.Now().UnixNano()%1e9), Name: "reading_history", ValueType: store.String, TTL: 24 * time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	fill(b, spec, l, 100)
	for _, run := range []struct {
		name string
		s    *cql.Store
	}{{"plain", plain}, {"speculative", spec}, {"plain", plain}, {"speculative", spec}} {
		b.Run(run.name, func(b *testing.B) {
			ctx := context.Background()
			began := processCPU()
			for b.Loop() {
				if p, err := run.s.Items(ctx, l, store.Range{Limit: 10}); err != nil || len(p.Items) != 10 {
					b.Fatalf("Items: %d items, %v", len(p.Items), err)
				}
			}
			b.ReportMetric(float64((processCPU()-began).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the CPU this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCount counts lists of 1,000 and 10,000 items, and a window of
// the last tenth of the larger; histogram24 counts the same lists in the
// 24 hourly buckets of the last day, in the same one read of their keys.
func BenchmarkCount(b *testing.B) {
	s, f := benchStore(b, 0)
	ctx := context.Background()
	for _, size := range []int{1000, 10000} {
		l := store.List{Feature: f, EntityID: fmt.Sprint("list", size)}
		fill(b, s, l, size)
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			for b.Loop() {
				if n, err := s.Count(ctx, l, store.Window{}, 100_000); err != nil || n != size+3 {
					b.Fatalf("Count = %d, %v", n, err)
				}
			}
		})
		b.Run(fmt.Sprintf("histogram24/size=%d", size), func(b *testing.B) {
			now := time.Now()
			day := store.Buckets{Window: store.Window{MinTimestamp: now.Add(-24*time.Hour + 1).UnixNano(), MaxTimestamp: now.UnixNano()}, Width: int64(time.Hour)}
			for b.Loop() {
				counts, err := s.Histogram(ctx, l, day, 100_000)
				sum := 0
				for _, c := range counts {
					sum += c
				}
				if err != nil || len(counts) != 24 || sum != size+3 {
					b.Fatalf("Histogram = %d buckets, %d items, %v", len(counts), sum, err)
				}
			}
		})
	}
}

// BenchmarkFind looks 1,000 values up in lists of 10, 1,000 and 10,000
// items: half of them present (the newest), half absent, so the whole list
// is read.
func BenchmarkFind(b *testing.B) {
	s, f := benchStore(b, 0)
	ctx := context.Background()
	values := make([][]byte, 1000)
	for i := range values {
		v := fmt.Sprintf("story%07d", i/2)
		if i%2 == 1 {
			v = fmt.Sprint("absent", i)
		}
		values[i] = []byte(v)
	}
	for _, size := range []int{10, 1000, 10000} {
		l := store.List{Feature: f, EntityID: fmt.Sprint("list", size)}
		fill(b, s, l, size)
		b.Run(fmt.Sprintf("values=1000/size=%d", size), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Find(ctx, l, values, 0, 100_000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAddItems adds to uncapped lists and to lists capped at 1,000,
// which their adds trim.
func BenchmarkAddItems(b *testing.B) {
	for _, maxItems := range []int{0, 1000} {
		s, f := benchStore(b, maxItems)
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("maxItems=%d/items=%d", maxItems, n), func(b *testing.B) {
				ctx := context.Background()
				items := make([]store.NewItem, n)
				i := 0
				for b.Loop() {
					now := time.Now().UnixNano()
					for j := range items {
						items[j] = store.NewItem{Timestamp: now, Value: fmt.Appendf(nil, "story%d", j)}
					}
					l := store.List{Feature: f, EntityID: fmt.Sprint("u", i%10)}
					if _, err := s.AddItems(ctx, l, items); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "items/s")
			})
		}
	}
}

// BenchmarkBatchType adds n items to one partition per batch, alternating a
// logged and an unlogged batch, to choose AddItems' batch type. Alternating
// in one loop pairs the two under the same server state, which separate
// sub-benchmarks (one after the other, the server warming up or others
// loading it meanwhile) do not. It reports each type's mean latency.
func BenchmarkBatchType(b *testing.B) {
	s, f := benchStore(b, 0)
	defer s.SetBatchType(gocql.LoggedBatch)
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			ctx := context.Background()
			items := make([]store.NewItem, n)
			types := [2]gocql.BatchType{gocql.LoggedBatch, gocql.UnloggedBatch}
			var took [2]time.Duration
			i := 0
			for b.Loop() {
				for step := range 2 {
					k := (i + step) % 2 // which type goes first alternates too
					now := time.Now().UnixNano()
					for j := range items {
						items[j] = store.NewItem{Timestamp: now, Value: fmt.Appendf(nil, "story%d", j)}
					}
					l := store.List{Feature: f, EntityID: fmt.Sprint("u", (2*i+k)%1000)}
					s.SetBatchType(types[k])
					start := time.Now()
					if _, err := s.AddItems(ctx, l, items); err != nil {
						b.Fatal(err)
					}
					took[k] += time.Since(start)
				}
				i++
			}
			b.ReportMetric(float64(took[0].Nanoseconds())/float64(i), "logged-ns/batch")
			b.ReportMetric(float64(took[1].Nanoseconds())/float64(i), "unlogged-ns/batch")
		})
	}
}

func BenchmarkRemoveValues(b *testing.B) {
	s, f := benchStore(b, 0)
	for _, size := range []int{10, 1000, 10000} {
		l := store.List{Feature: f, EntityID: fmt.Sprint("list", size)}
		fill(b, s, l, size)
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				n, err := s.RemoveValues(ctx, l, [][]byte{[]byte("target")}, store.Window{}, 100_000)
				if err != nil || n != 3 {
					b.Fatalf("RemoveValues = %d, %v", n, err)
				}
				b.StopTimer()
				addTarget(b, s, l, time.Now())
				b.StartTimer()
			}
		})
	}
}

func BenchmarkRemoveAll(b *testing.B) {
	s, f := benchStore(b, 0)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if err := s.RemoveAll(ctx, store.List{Feature: f, EntityID: fmt.Sprint("u", i)}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkCreateFeature(b *testing.B) {
	s, f := benchStore(b, 0)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		g := *f
		g.Version = fmt.Sprint("v", i)
		if _, err := s.CreateFeature(ctx, g); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLiveAdd compares the ways an add of 1 or 10 items can be
// written: to a feature that is not live (the items' batch alone), to a
// live one as AddItems writes it (the change record in the items' batch,
// unlogged), with the record sent beside the batch at once (as AddItems
// sends a large one), and with the record in the items' logged batch (over
// two partitions: through the batchlog). With LISTGATE_BENCH_DB_PID set to the
// Cassandra process's pid it also reports the database's CPU per add.
func BenchmarkLiveAdd(b *testing.B) {
	s, quiet := benchStore(b, 0)
	ctx := context.Background()
	live, err := s.SetFeatureLive(ctx, quiet.EntityType, quiet.Name, quiet.Version, true)
	if err != nil {
		b.Fatal(err)
	}
	var seq int
	items := func(n int) []store.NewItem {
		out := make([]store.NewItem, n)
		for i := range out {
			seq++
			out[i] = store.NewItem{Timestamp: time.Now().UnixNano(), Value: fmt.Appendf(nil, "v%d", seq)}
		}
		return out
	}
	ways := []struct {
		name string
		add  func(l store.List, n int) error
		f    *store.Feature
	}{
		{"not live", func(l store.List, n int) error { _, err := s.AddItems(ctx, l, items(n)); return err }, quiet},
		{"live, in the batch", func(l store.List, n int) error { _, err := s.AddItems(ctx, l, items(n)); return err }, &live},
		{"live, beside the batch", func(l store.List, n int) error {
			defer s.SetSharedRecordBytes(s.SetSharedRecordBytes(0))
			_, err := s.AddItems(ctx, l, items(n))
			return err
		}, &live},
		{"live, one logged batch", func(l store.List, n int) error { return s.AddInOneBatch(ctx, l, items(n)) }, &live},
	}
	for _, n := range []int{1, 10} {
		for _, w := range ways {
			b.Run(fmt.Sprintf("items=%d/%s", n, w.name), func(b *testing.B) {
				cpu0 := databaseCPU()
				i := 0
				for b.Loop() {
					i++
					if err := w.add(store.List{Feature: w.f, EntityID: fmt.Sprint("u", i%100)}, n); err != nil {
						b.Fatal(err)
					}
				}
				if cpu0 >= 0 {
					b.ReportMetric(float64(databaseCPU()-cpu0)/float64(b.N), "db-cpu-µs/op")
				}
			})
		}
	}
}

// databaseCPU is the CPU time, in µs, of the process LISTGATE_BENCH_DB_PID
// names; -1 without one.
func databaseCPU() int64 {
	pid := os.Getenv("LISTGATE_BENCH_DB_PID")
	if pid == "" {
		return -1
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return (utime + stime) * 1e6 / 100 // clock ticks of 10 ms
}
