package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// exportFeatures are the features of exportFixture, of every value type,
// their entity types ending in suffix, with values as a client sends them.
func exportFixtureFeatures(suffix string) []struct {
	f      store.Feature
	values []any
} {
	user, story := "user"+suffix, "story"+suffix
	return []struct {
		f      store.Feature
		values []any
	}{
		{store.Feature{EntityType: user, Name: "reading_history", ValueType: store.String}, []any{"story1", "story 2, \"quoted\"\n", "é 😀"}},
		{store.Feature{EntityType: user, Name: "reading_history", Version: "2025/03/11", ValueType: store.Int}, []any{int64(42), "9007199254740993", "-9223372036854775808"}},
		{store.Feature{EntityType: story, Name: "blob", ValueType: store.Bytes}, []any{"AAEC/w==", ""}},
		{store.Feature{EntityType: story, Name: "doc", ValueType: store.JSON}, []any{map[string]any{"b": 1.5, "a": []any{true, nil}}, "text"}},
		{store.Feature{EntityType: story, Name: "score", ValueType: store.Float}, []any{0.1, 1e21}},
		{store.Feature{EntityType: user, Name: "recent", ValueType: store.Boolean, MaxItems: 2}, []any{true, false, true, false}},
	}
}

// exportFixture is an embedded store's folder holding lists of
// exportFixtureFeatures(""); want is, by feature, what a read of each list
// shows (entity id and item key).
func exportFixture(t *testing.T) (dir string, want map[string][]string) {
	t.Helper()
	dir = t.TempDir()
	s, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return dir, fillExportFixture(t, s, "")
}

func fillExportFixture(t *testing.T, s store.Store, suffix string) (want map[string][]string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	want = map[string][]string{}
	for _, tc := range exportFixtureFeatures(suffix) {
		tc.f.TTL = 24 * time.Hour
		f, err := s.CreateFeature(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		for e, entity := range []string{"u1", "u 2 ü"} {
			var items []store.NewItem
			for i, v := range tc.values {
				b, err := values.Encode(f.ValueType, v)
				if err != nil {
					t.Fatal(err)
				}
				items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(e*100+i) * time.Second).UnixNano(), Value: b})
			}
			l := store.List{Feature: &f, EntityID: entity}
			if _, err := s.AddItems(ctx, l, items); err != nil {
				t.Fatal(err)
			}
			page, err := s.Items(ctx, l, store.Range{Limit: store.MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				want[f.Key()] = append(want[f.Key()], entity+"\x00"+it.Key)
			}
		}
	}
	if n := len(want["user"+suffix+"#recent|"]); n != 4 {
		t.Fatalf("capped lists read %d items, want 2 each", n)
	}
	return want
}

// readExport reads the rows of an export back as load reads them: by
// feature key, each row's entity id and item key (its value encoded as
// an add encodes it).
func readExport(t *testing.T, path string, format dataio.Format, types map[string]store.ValueType) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := dataio.NewReader(format, f, dataio.DefaultColumns(), dataio.DefaultMaxRowBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[string][]string{}
	for {
		row, pos, err := r.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		fk := keys.FeatureKey(row.EntityType, row.Feature, row.Version)
		typ, ok := types[fk]
		if !ok || !row.HasTimestamp || !row.HasTTL || row.TTLSeconds != 86400 {
			t.Fatalf("line %d: %+v", pos.Line, row)
		}
		in, err := row.Value.Input(typ)
		if err != nil {
			t.Fatalf("line %d: %v", pos.Line, err)
		}
		b, err := values.Encode(typ, in)
		if err != nil {
			t.Fatalf("line %d: %v", pos.Line, err)
		}
		got[fk] = append(got[fk], row.EntityID+"\x00"+keys.ItemKey(row.Timestamp, b))
	}
	for _, ids := range got {
		slices.Sort(ids)
	}
	return got
}

// exportedItems reads the items an export's last JSON progress line
// (finished) counts.
func exportedItems(t testing.TB, stderr string) int64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last struct {
		Items    int64
		Features int
		Finished bool
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || !last.Finished {
		t.Fatalf("the last progress line is no summary: %v\n%s", err, stderr)
	}
	return last.Items
}

func sorted(m map[string][]string) map[string][]string {
	for _, ids := range m {
		slices.Sort(ids)
	}
	return m
}

// An export of the embedded store writes, in each format, a row for every
// item a read shows, which reads back as the same item; --feature writes
// one feature's alone; progress and a summary go to stderr.
func TestExportEmbedded(t *testing.T) {
	dir, want := exportFixture(t)
	want = sorted(want)
	types := map[string]store.ValueType{}
	for fk := range want {
		types[fk] = map[string]store.ValueType{"user#reading_history|": store.String, "user#reading_history|2025/03/11": store.Int,
			"story#blob|": store.Bytes, "story#doc|": store.JSON, "story#score|": store.Float, "user#recent|": store.Boolean}[fk]
	}
	out := t.TempDir()
	for _, ext := range []string{"ndjson", "csv", "parquet"} {
		t.Run(ext, func(t *testing.T) {
			path := filepath.Join(out, "all."+ext)
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), []string{"export", "--data-dir", dir, "--out", path}, noEnv, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			if got := readExport(t, path, dataio.Format(ext), types); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("exported %v\nwant %v", got, want)
			}
			if items := exportedItems(t, stderr.String()); items != 28 || stdout.Len() > 0 {
				t.Fatalf("exported %d items; stdout %q, stderr %q", items, stdout.String(), stderr.String())
			}
		})
	}
	// One feature, a version holding '/', to stdout.
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"export", "--data-dir", dir, "--feature", "user/reading_history@2025/03/11", "--progress", "bar"}, noEnv, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "listgate export: 6 items of 1 features in") {
		t.Fatalf("stderr %q", stderr.String())
	}
	path := filepath.Join(out, "one.ndjson")
	if err := os.WriteFile(path, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got := readExport(t, path, dataio.NDJSON, types)
	if len(got) != 1 || fmt.Sprint(got["user#reading_history|2025/03/11"]) != fmt.Sprint(want["user#reading_history|2025/03/11"]) {
		t.Fatalf("--feature exported %v", got)
	}
}

// Bad flags, and a feature that does not exist, are refused with a clear
// error, and no file is written.
func TestExportRefusals(t *testing.T) {
	dir, _ := exportFixture(t)
	out := filepath.Join(t.TempDir(), "out.ndjson")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", out}, "needs the store to read"},
		{[]string{"--data-dir", dir, "--cql-hosts", "127.0.0.1", "--out", out}, "not both"},
		{[]string{"--data-dir", dir, "--feature", "user", "--out", out}, "must be TYPE/NAME"},
		{[]string{"--data-dir", dir, "--feature", "User/x", "--out", out}, "entity type"},
		{[]string{"--data-dir", dir, "--feature", "user/nope", "--out", out}, "no such feature"},
		{[]string{"--data-dir", dir, "--feature", "user/reading_history@v9", "--out", out}, "no such feature"},
		{[]string{"--data-dir", dir, "--format", "xml", "--out", out}, "format"},
		{[]string{"--data-dir", dir, "--out", out + ".xml"}, "extension"},
		{[]string{"--data-dir", filepath.Join(dir, "missing"), "--out", out}, "--data-dir"},
	} {
		_, err := runArgs(t, noEnv, append([]string{"export"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want one saying %q", tc.args, err, tc.want)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(out))
	if err != nil || len(entries) != 0 {
		t.Fatalf("files written: %v, %v", entries, err)
	}
}

// listsOf reads every list of want's features and entities from s: by
// feature key, each item's entity id, key and value.
func listsOf(t *testing.T, s store.Store, want map[string][]string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	features, err := s.Features(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for i := range features {
		f := &features[i]
		entities := map[string]bool{}
		for _, id := range want[f.Key()] {
			entity, _, _ := strings.Cut(id, "\x00")
			entities[entity] = true
		}
		for entity := range entities {
			page, err := s.Items(ctx, store.List{Feature: f, EntityID: entity}, store.Range{Limit: store.MaxLimit})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				got[f.Key()] = append(got[f.Key()], fmt.Sprintf("%s\x00%s\x00%x", entity, it.Key, it.Value))
			}
		}
	}
	return sorted(got)
}

// listgate export --data-dir, piped into listgate load --cql-hosts, moves
// an embedded store's lists to a cluster: every item equal, key and value.
func TestExportPipedIntoLoadMovesEmbeddedToCassandra(t *testing.T) {
	cfg := cqltest.Config(t)
	cs := cqltest.Open(t, cfg)
	suffix := fmt.Sprintf("_x%d", time.Now().UnixNano()%1e9)
	dir := t.TempDir()
	es, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want := fillExportFixture(t, es, suffix)
	wantItems := listsOf(t, es, want)
	if err := es.Close(); err != nil {
		t.Fatal(err)
	}
	// The features come first: a load adds items to features that exist.
	ctx := context.Background()
	for _, tc := range exportFixtureFeatures(suffix) {
		tc.f.TTL = 24 * time.Hour
		if _, err := cs.CreateFeature(ctx, tc.f); err != nil {
			t.Fatal(err)
		}
	}

	var pipe, stderr, stdout bytes.Buffer
	if err := run(ctx, []string{"export", "--data-dir", dir}, noEnv, &pipe, &stderr); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr.String())
	}
	err = runLoadTo(ctx, []string{"--cql-hosts", strings.Join(cfg.Hosts, ","), "--cql-keyspace", cfg.Keyspace, "--format", "ndjson", "--progress", "none", "-"},
		noEnv, &stdout, &pipe, &stderr)
	if err != nil {
		t.Fatalf("load: %v\n%s", err, stderr.String())
	}
	got := listsOf(t, cs, want)
	if fmt.Sprint(got) != fmt.Sprint(wantItems) || len(got) != 6 {
		t.Fatalf("on Cassandra: %q\nin the embedded store: %q", got, wantItems)
	}
}
