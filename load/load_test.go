package load_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/load"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/values"
)

// backend is a store a load writes into, as the listgate command opens it.
type backend struct {
	name string
	open func(t testing.TB) store.Store
}

var backends = []backend{
	{"embedded", func(t testing.TB) store.Store {
		lim := store.DefaultLimits
		lim.MaxAddItems = 1000
		s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"cql", func(t testing.TB) store.Store {
		cfg := cqltest.Config(t)
		cfg.Limits.MaxAddItems = 1000
		return cqltest.Open(t, cfg)
	}},
}

// target is a StoreTarget on s, with the catalog a gateway keeps.
func target(t testing.TB, s store.Store) *load.StoreTarget {
	cat, err := features.New(context.Background(), s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &load.StoreTarget{Store: s, Catalog: cat, Retries: 3}
}

// entityType is a name of this test's own, on a keyspace tests share.
func entityType(t *testing.T) string {
	return fmt.Sprintf("load%d_%d", time.Now().UnixNano()%1e9, rand.IntN(1000))
}

func createFeature(t *testing.T, s store.Store, f store.Feature) *store.Feature {
	t.Helper()
	f.TTL = 30 * 24 * time.Hour
	if _, err := s.CreateFeature(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// want is an item a list must hold once loaded.
type want struct {
	entityID string
	ts       int64
	value    string // stored bytes
}

// writeRows writes n rows of STRING values over lists of f, with
// timestamps up to an hour old, to a file in format fm, and returns the
// items they make.
func writeRows(t *testing.T, fm dataio.Format, f *store.Feature, n, lists int) (string, []want) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rows."+string(fm))
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := dataio.NewWriter(fm, file)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	var items []want
	for i := range n {
		it := want{entityID: fmt.Sprintf("e%d", i%lists), ts: now - int64(rand.IntN(3600))*1e9 - int64(i), value: fmt.Sprintf("value %d, \"quoted\"\nline", i)}
		items = append(items, it)
		if err := w.Write(dataio.Row{EntityType: f.EntityType, EntityID: it.entityID, Feature: f.Name, Version: f.Version,
			Value: dataio.StoredValue(store.String, []byte(it.value)), Timestamp: it.ts, HasTimestamp: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file.Close()
	return path, items
}

// checkLists reads every list of the items back, and fails unless they
// hold exactly these items.
func checkLists(t *testing.T, s store.Store, f *store.Feature, items []want) {
	t.Helper()
	byList := map[string][]want{}
	for _, it := range items {
		byList[it.entityID] = append(byList[it.entityID], it)
	}
	for id, wants := range byList {
		var got []want
		r := store.Range{Limit: store.MaxLimit}
		for {
			p, err := s.Items(context.Background(), store.List{Feature: f, EntityID: id}, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				got = append(got, want{id, it.Timestamp, string(it.Value)})
			}
			if !p.HasMore {
				break
			}
			r.After = p.End
		}
		cmp := func(a, b want) int {
			if a.ts != b.ts {
				return int(a.ts - b.ts)
			}
			return strings.Compare(a.value, b.value)
		}
		slices.SortFunc(got, cmp)
		slices.SortFunc(wants, cmp)
		if !slices.Equal(got, wants) {
			t.Fatalf("list %s holds %d items, want exactly the %d of the input", id, len(got), len(wants))
		}
	}
}

// stopAfter writes through a target and stops the load (as a kill would,
// between two batches) once items are written.
type stopAfter struct {
	load.Target
	items  int64
	n      atomic.Int64
	cancel context.CancelFunc
}

func (s *stopAfter) Write(ctx context.Context, b load.Batch) ([]load.Refused, error) {
	r, err := s.Target.Write(ctx, b)
	for _, a := range b {
		if s.n.Add(int64(len(a.Items))) >= s.items {
			s.cancel()
		}
	}
	return r, err
}

// TestLoadResumes: a load stopped at 60% and run again, on each store and
// in each format, ends with exactly the rows of the input.
func TestLoadResumes(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			for _, fm := range []dataio.Format{dataio.NDJSON, dataio.CSV, dataio.Parquet} {
				t.Run(string(fm), func(t *testing.T) {
					f := createFeature(t, s, store.Feature{EntityType: entityType(t), Name: "history", ValueType: store.String})
					const n = 20_000
					path, items := writeRows(t, fm, f, n, 40)
					ck := filepath.Join(t.TempDir(), "ckpt")
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					stop := &stopAfter{Target: target(t, s), items: n * 6 / 10, cancel: cancel}
					cfg := load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(), MaxRowBytes: dataio.DefaultMaxRowBytes,
						Target: stop, Concurrency: 4, Checkpoint: ck, MaxErrors: 0, ChunkItems: 1000}
					first, err := load.Run(ctx, cfg)
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("the stopped load: %v", err)
					}
					if _, err := os.Stat(ck); err != nil {
						t.Fatalf("the stopped load left no checkpoint: %v", err)
					}
					cfg.Target = target(t, s)
					second, err := load.Run(context.Background(), cfg)
					if err != nil {
						t.Fatal(err)
					}
					if second.Skipped == 0 || second.Skipped+second.Rows != n || second.Bad != 0 {
						t.Errorf("the second run skipped %d rows and wrote %d, of %d (the first wrote %d)", second.Skipped, second.Rows, n, first.Rows)
					}
					if _, err := os.Stat(ck); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the checkpoint is left after the load ended: %v", err)
					}
					checkLists(t, s, f, items)
				})
			}
		})
	}
}

// TestLoadBadRows: rows that can never be written are reported by file and
// line with their reason, and written nowhere; the others are written.
func TestLoadBadRows(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			et := entityType(t)
			f := createFeature(t, s, store.Feature{EntityType: et, Name: "counts", ValueType: store.Int})
			ttl := int64(f.TTL / time.Second)
			now := time.Now()
			ts := func(d time.Duration) string { return now.Add(-d).UTC().Format(time.RFC3339Nano) }
			rows := []string{
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"counts","value":1,"timestamp":%q}`, et, ts(time.Minute)),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"countz","value":2,"timestamp":%q}`, et, ts(time.Minute)),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"counts","value":"two","timestamp":%q}`, et, ts(time.Minute)),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"counts","value":3,"timestamp":"last tuesday"}`, et),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"counts","value":4,"timestamp":%q}`, et, ts(31*24*time.Hour)),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"counts","value":5,"timestamp":%q,"ttlSeconds":60}`, et, ts(time.Minute)),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u1","feature":"counts","value":6}`, et),
				fmt.Sprintf(`{"entityType":%q,"entityId":"u2","feature":"counts","value":7,"timestamp":%q,"ttlSeconds":%d}`, et, ts(time.Second), ttl),
				`{"entityType":"Bad Type","entityId":"u1","feature":"counts","value":8}`,
			}
			path := filepath.Join(t.TempDir(), "rows.ndjson")
			if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var report bytes.Buffer
			cfg := load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(), MaxRowBytes: 1 << 10,
				Target: target(t, s), Concurrency: 2, MaxErrors: 10, Report: load.Report{W: &syncWriter{w: &report}}}
			sum, err := load.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Rows != 2 || sum.Bad != 7 {
				t.Errorf("%d rows written and %d bad, want 2 and 7", sum.Rows, sum.Bad)
			}
			bad := map[int64]string{}
			for _, line := range strings.Split(report.String(), "\n") {
				var r struct {
					File  string
					Line  int64
					Error string
				}
				if json.Unmarshal([]byte(line), &r) == nil && r.File != "" {
					if r.File != path {
						t.Errorf("a bad row of file %q", r.File)
					}
					bad[r.Line] = r.Error
				}
			}
			for line, reason := range map[int64]string{2: "not found", 3: "INT values", 4: "timestamp", 5: "expired",
				6: "ttlSeconds 60", 7: "no timestamp", 9: "entity type"} {
				if !strings.Contains(bad[line], reason) {
					t.Errorf("line %d reported as %q, want a reason with %q", line, bad[line], reason)
				}
			}
			if len(bad) != 7 {
				t.Errorf("bad rows reported: %v", bad)
			}
			checkLists(t, s, f, []want{{"u1", now.Add(-time.Minute).UnixNano(), "1"}, {"u2", now.Add(-time.Second).UnixNano(), "7"}})

			// Past --max-errors, the load stops.
			cfg.MaxErrors = 3
			cfg.Report = load.Report{}
			if _, err := load.Run(context.Background(), cfg); !errors.Is(err, load.ErrTooManyBadRows) {
				t.Errorf("past --max-errors: %v", err)
			}
		})
	}
}

// TestLoadValues: values of every type, as text (CSV) and as JSON (NDJSON),
// are stored as the gateway's adds store them.
func TestLoadValues(t *testing.T) {
	s := backends[0].open(t)
	et := entityType(t)
	cases := []struct {
		t          store.ValueType
		json, text string
	}{
		{store.Int, `9007199254740991`, `9007199254740991`},
		{store.Int, `"9007199254740993"`, `9007199254740993`},
		{store.Float, `0.1`, `0.1`},
		{store.Boolean, `true`, `true`},
		{store.Bytes, `"AAH/"`, `AAH/`},
		{store.JSON, `{"b":1,"a":[1.50,"x"]}`, `{"b":1,"a":[1.50,"x"]}`},
		{store.String, `"é\n"`, "é\n"},
	}
	var nd, csv strings.Builder
	csv.WriteString("entityType,entityId,feature,value,timestamp\n")
	ts := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	for i, c := range cases {
		name := fmt.Sprintf("f%d", i)
		createFeature(t, s, store.Feature{EntityType: et, Name: name, ValueType: c.t})
		fmt.Fprintf(&nd, `{"entityType":%q,"entityId":"json","feature":%q,"value":%s,"timestamp":%q}`+"\n", et, name, c.json, ts)
		fmt.Fprintf(&csv, "%s,text,%s,\"%s\",%s\n", et, name, strings.ReplaceAll(c.text, `"`, `""`), ts)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "rows.ndjson"), []byte(nd.String()), 0o600)
	os.WriteFile(filepath.Join(dir, "rows.csv"), []byte(csv.String()), 0o600)
	sum, err := load.Run(context.Background(), load.Config{Inputs: []string{filepath.Join(dir, "rows.ndjson"), filepath.Join(dir, "rows.csv")},
		Columns: dataio.DefaultColumns(), MaxRowBytes: 1 << 10, Target: target(t, s), Concurrency: 2})
	if err != nil || sum.Rows != int64(2*len(cases)) {
		t.Fatalf("%+v, %v", sum, err)
	}
	for i, c := range cases {
		f := &store.Feature{EntityType: et, Name: fmt.Sprintf("f%d", i), ValueType: c.t}
		in, _ := dataio.JSONValue([]byte(c.json)).Input(c.t)
		stored, err := values.Encode(c.t, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"json", "text"} {
			p, err := s.Items(context.Background(), store.List{Feature: f, EntityID: id}, store.Range{Limit: 10})
			if err != nil || len(p.Items) != 1 || !bytes.Equal(p.Items[0].Value, stored) {
				t.Errorf("%s value %s, loaded from %s: %+v, %v; want %q", c.t, c.json, id, p.Items, err, stored)
			}
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestLoadRecordsLiveAdds: a load straight into a store records the adds
// to a live feature in the change feed, as a gateway's adds are, so that
// subscriptions deliver the loaded items.
func TestLoadRecordsLiveAdds(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			f := createFeature(t, s, store.Feature{EntityType: entityType(t), Name: "live", ValueType: store.String, Live: true})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			head, err := store.AwaitHead(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			const n = 500
			path, _ := writeRows(t, dataio.NDJSON, f, n, 5)
			if _, err := load.Run(ctx, load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(),
				MaxRowBytes: dataio.DefaultMaxRowBytes, Target: target(t, s), Concurrency: 2}); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for after := head; len(seen) < n; {
				changes, next, err := s.ReadFeed(ctx, after, func(l store.ListID) bool { return l.Feature == f.Key() }, 1<<20)
				if err != nil {
					t.Fatalf("reading the feed, %d of %d items recorded: %v", len(seen), n, err)
				}
				for _, c := range changes {
					for _, it := range c.Items {
						seen[c.List.EntityID+" "+it.Key] = true
					}
				}
				if len(changes) == 0 {
					if err := s.WaitFeed(ctx, next); err != nil {
						t.Fatalf("waiting on the feed, %d of %d items recorded: %v", len(seen), n, err)
					}
				}
				after = next
			}
			if len(seen) != n {
				t.Errorf("the feed records %d items, the load wrote %d", len(seen), n)
			}
		})
	}
}

// A load that fails before any row (an input that is not of its format)
// leaves no checkpoint, and does not tell to run it again.
func TestLoadOfNothingLeavesNoCheckpoint(t *testing.T) {
	s := backends[0].open(t)
	dir := t.TempDir()
	path, ck := filepath.Join(dir, "rows.parquet"), filepath.Join(dir, "rows.checkpoint")
	if err := os.WriteFile(path, []byte("not parquet at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := load.Run(context.Background(), load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(),
		MaxRowBytes: dataio.DefaultMaxRowBytes, Target: target(t, s), Checkpoint: ck})
	if err == nil || !strings.Contains(err.Error(), "not a Parquet file") || strings.Contains(err.Error(), "run the same command again") {
		t.Fatalf("load of a file that is not Parquet: %v", err)
	}
	if _, err := os.Stat(ck); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("checkpoint after a load of nothing: %v", err)
	}
}
