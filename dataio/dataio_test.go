package dataio_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
)

// item is a stored value with its type, as a store holds it.
type item struct {
	t store.ValueType
	v []byte
}

// storedItems are values of every type, some that travel badly.
var storedItems = []item{
	{store.String, []byte("plain")},
	{store.String, []byte("")},
	{store.String, []byte("comma, \"quote\"\nnew line\ttab é 😀 \u2028")},
	{store.Int, []byte("42")},
	{store.Int, []byte("-9223372036854775808")},
	{store.Int, []byte("9007199254740993")},
	{store.Float, []byte("0.1")},
	{store.Float, []byte("1e+21")},
	{store.Float, []byte("-5e-324")},
	{store.Boolean, []byte("true")},
	{store.Boolean, []byte("false")},
	{store.Bytes, []byte{0, 1, 2, 0xff, '\n', ','}},
	{store.Bytes, []byte{}},
	{store.JSON, []byte(`{"a":[1,2.5,"x"],"b":{"c":null,"d":true}}`)},
	{store.JSON, []byte(`"a string"`)},
	{store.JSON, []byte(`12`)},
}

func rowsOf(now int64) []dataio.Row {
	rows := make([]dataio.Row, len(storedItems))
	for i, it := range storedItems {
		rows[i] = dataio.Row{EntityType: "user", EntityID: "u" + strings.Repeat("é", i%3) + string(rune('a'+i)),
			Feature: "f_" + strings.ToLower(string(it.t)), Version: []string{"", "2025/03/11", "v 2"}[i%3],
			Value: dataio.StoredValue(it.t, it.v), Timestamp: now + int64(i)*1_000_000_007, HasTimestamp: true,
			TTLSeconds: int64(86400 * (i + 1)), HasTTL: i%2 == 0}
	}
	return rows
}

// TestRoundTrip writes rows of stored values in each format and reads them
// back: every field equal, and every value, encoded with its feature's
// type as an add encodes it, the same stored bytes.
func TestRoundTrip(t *testing.T) {
	now := time.Now().UnixNano()
	for _, f := range []dataio.Format{dataio.NDJSON, dataio.CSV, dataio.Parquet} {
		t.Run(string(f), func(t *testing.T) {
			want := rowsOf(now)
			path := filepath.Join(t.TempDir(), "rows."+string(f))
			file, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := dataio.NewWriter(f, file)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range want {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			file.Close()
			got, pos := readAll(t, f, path, dataio.DefaultColumns())
			if len(got) != len(want) {
				t.Fatalf("read %d rows, wrote %d", len(got), len(want))
			}
			for i, g := range got {
				w := want[i]
				if g.EntityType != w.EntityType || g.EntityID != w.EntityID || g.Feature != w.Feature || g.Version != w.Version ||
					g.Timestamp != w.Timestamp || !g.HasTimestamp || g.HasTTL != w.HasTTL || g.TTLSeconds != w.TTLSeconds && w.HasTTL {
					t.Errorf("row %d: read %+v, wrote %+v", i, g, w)
				}
				it := storedItems[i]
				in, err := g.Value.Input(it.t)
				if err != nil {
					t.Fatalf("row %d: %v", i, err)
				}
				b, err := values.Encode(it.t, in)
				if err != nil {
					t.Fatalf("row %d: %v", i, err)
				}
				if !bytes.Equal(b, it.v) {
					t.Errorf("row %d (%s): read back %q, wrote %q", i, it.t, b, it.v)
				}
			}
			// Positions grow, and the last ends the file.
			for i := 1; i < len(pos); i++ {
				if pos[i].End <= pos[i-1].End || pos[i].Line <= pos[i-1].Line {
					t.Errorf("row %d at %+v, after %+v", i, pos[i], pos[i-1])
				}
			}
			if f != dataio.Parquet {
				fi, _ := os.Stat(path)
				if last := pos[len(pos)-1].End; last != fi.Size() {
					t.Errorf("the last row ends at %d, the file at %d", last, fi.Size())
				}
			}
		})
	}
}

func readAll(t *testing.T, f dataio.Format, path string, cols dataio.Columns) ([]dataio.Row, []dataio.Pos) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, err := dataio.NewReader(f, file, cols, dataio.DefaultMaxRowBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []dataio.Row
	var pos []dataio.Pos
	for {
		row, p, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, pos
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, row)
		pos = append(pos, p)
	}
}

type badRow struct {
	line   int64
	reason string
}

func readBad(t *testing.T, f dataio.Format, in string, cols dataio.Columns, maxRow int) (good []int64, bad []badRow) {
	t.Helper()
	r, err := dataio.NewReader(f, strings.NewReader(in), cols, maxRow)
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, p, err := r.Read()
		var re *dataio.RowError
		switch {
		case errors.Is(err, io.EOF):
			return good, bad
		case errors.As(err, &re):
			bad = append(bad, badRow{re.Pos.Line, re.Reason})
		case err != nil:
			t.Fatal(err)
		default:
			good = append(good, p.Line)
		}
	}
}

// TestNDJSONBadRows: a row that cannot be read is reported at its line,
// and the rows after it are read.
func TestNDJSONBadRows(t *testing.T) {
	in := `{"entityType":"user","entityId":"u1","feature":"f","value":"a","timestamp":"2024-08-29T16:44:05.43Z"}

{"entityType":"user","entityId":"u1","feature":"f","value":"a","timestamp":"yesterday"}
not json
{"entityType":"user","feature":"f","value":"a"}
{"entityType":"user","entityId":"u1","feature":"f","value":"` + strings.Repeat("x", 200) + `"}
{"entityType":"user","entityId":"u1","feature":"f","value":1,"ttlSeconds":1.5}
{"entityType":"user","entityId":7,"feature":"f","value":1}
{"entityType":"user","entityId":"u1","feature":"f","value":1,"version":null,"timestamp":null,"extra":[1]}
`
	good, bad := readBad(t, dataio.NDJSON, in, dataio.DefaultColumns(), 150)
	if want := []int64{1, 9}; !equal(good, want) {
		t.Errorf("good rows at lines %v, want %v", good, want)
	}
	wantBad := []badRow{{3, "timestamp"}, {4, "not a JSON object"}, {5, "no entityId"}, {6, "longer than 150 bytes"},
		{7, "ttlSeconds: must be a whole number"}, {8, "entityId: must be a string"}}
	checkBad(t, bad, wantBad)
}

// TestCSVBadRows: the same for CSV, and a missing column refuses the file.
func TestCSVBadRows(t *testing.T) {
	in := "user_id,entityType,feature,value,timestamp\n" +
		"u1,user,f,a,2024-08-29T16:44:05.43Z\n" +
		"u1,user,f,a,yesterday\n" +
		"u1,user,f\n" +
		"u1,user,f,\"two\nlines\",\n" +
		"u2,user,f,b,\n"
	cols := dataio.DefaultColumns()
	if _, err := dataio.NewReader(dataio.CSV, strings.NewReader(in), cols, 1<<10); err == nil || !strings.Contains(err.Error(), "no entityId column") {
		t.Fatalf("a file without entityId: %v", err)
	}
	if err := cols.Map("entityId=user_id"); err != nil {
		t.Fatal(err)
	}
	good, bad := readBad(t, dataio.CSV, in, cols, 1<<10)
	if want := []int64{2, 5, 7}; !equal(good, want) {
		t.Errorf("good rows at lines %v, want %v", good, want)
	}
	checkBad(t, bad, []badRow{{3, "timestamp"}, {4, "3 columns, where the header row has 5"}})
	if err := cols.Map("color=c"); err == nil {
		t.Error("a mapping of no field was taken")
	}
}

// TestTextValues: CSV and Parquet text is refused as a value of the wrong
// type with the reason values.Encode gives.
func TestTextValues(t *testing.T) {
	for _, c := range []struct {
		t    store.ValueType
		text string
		ok   bool
	}{
		{store.Int, "12", true}, {store.Int, "1.0", false}, {store.Int, "+1", false},
		{store.Float, "1.5", true}, {store.Float, "NaN", false}, {store.Float, "1e400", false},
		{store.Boolean, "true", true}, {store.Boolean, "True", false},
		{store.Bytes, "AAE=", true}, {store.Bytes, "AAE", false},
		{store.JSON, `{"a":1}`, true}, {store.JSON, `{"a":1} 2`, false}, {store.JSON, `null`, false},
	} {
		in, err := dataio.TextValue(c.text).Input(c.t)
		if err == nil {
			_, err = values.Encode(c.t, in)
		}
		if (err == nil) != c.ok {
			t.Errorf("%s %q: %v", c.t, c.text, err)
		}
	}
}

func checkBad(t *testing.T, got, want []badRow) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("bad rows %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i].line != want[i].line || !strings.Contains(got[i].reason, want[i].reason) {
			t.Errorf("bad row %+v, want line %d with %q", got[i], want[i].line, want[i].reason)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
