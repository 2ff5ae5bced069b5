package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/listgate/listgate/store/keys"
)

// rows is a list in memory, newest first, whose scanner records the scans
// asked of it, and whose fetcher the keys it fetched.
type rows struct {
	rows    []Row
	scans   []Scan
	fetched []string
}

func (r *rows) src() Source { return Source{Scan: r.scan, Fetch: r.fetch} }

func (r *rows) fetch(_ context.Context, ks []string, fn func(Row) bool) error {
	r.fetched = append(r.fetched, ks...)
	for _, row := range r.rows {
		if slices.Contains(ks, row.Key) {
			row.WriteTime = 0
			if !fn(row) {
				break
			}
		}
	}
	return nil
}

func (r *rows) scan(_ context.Context, s Scan, fn func(Row) bool) error {
	r.scans = append(r.scans, s)
	n := 0
	for _, row := range r.rows {
		if row.Key < s.From || (s.Before != "" && row.Key >= s.Before) {
			continue
		}
		if n++; n > s.Limit {
			break
		}
		if !s.Values {
			row.Value = nil
		}
		if !s.WriteTimes {
			row.WriteTime = 0
		}
		if !fn(row) {
			break
		}
	}
	return nil
}

// list holds n items, v0 oldest, one second apart, written at µs 1000+i.
func list(n int) *rows {
	r := &rows{}
	for i := n - 1; i >= 0; i-- {
		v := fmt.Sprint("v", i)
		r.rows = append(r.rows, Row{Key: keys.ItemKey(int64(i+1)*int64(time.Second), []byte(v)), Value: []byte(v), WriteTime: int64(1000 + i)})
	}
	return r
}

var feature = Feature{EntityType: "user", Name: "f", ValueType: String, TTL: time.Hour}

// Counts, searches and removals read keys only, and the values of the
// rows whose hash matches; write times only for a feature created again;
// a plain page reads values in its one scan, and a page that may look at
// more rows than it shows (of a feature created again, say) reads keys,
// then the values of its items alone.
func TestReadsAskForWhatTheyUse(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		f          Feature
		writeTimes bool
	}{{"plain", feature, false}, {"created again", Feature{ItemsSince: 1}, true}} {
		f := feature
		f.ItemsSince = tc.f.ItemsSince
		l := List{Feature: &f, EntityID: "u1"}
		r := list(10)
		if _, err := ReadPage(ctx, l, Range{Limit: 3, MaxScan: 30}, r.src()); err != nil {
			t.Fatal(err)
		}
		fetchedByPage := len(r.fetched)
		if _, err := CountItems(ctx, l, Window{}, 100, r.scan); err != nil {
			t.Fatal(err)
		}
		if _, err := FindItems(ctx, l, [][]byte{[]byte("v1")}, 0, 100, r.src()); err != nil {
			t.Fatal(err)
		}
		if _, err := RemoveMatching(ctx, l, [][]byte{[]byte("v1")}, Window{}, 100, r.src(), 10, 1, func(context.Context, []string) error { return nil }); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{f.ItemsSince == 0, false, false, false} {
			if r.scans[i].Values != want || r.scans[i].WriteTimes != tc.writeTimes {
				t.Errorf("%s: scan %d = %+v, want values %v, write times %v", tc.name, i, r.scans[i], want, tc.writeTimes)
			}
		}
		if want := map[bool]int{true: 0, false: 3}[f.ItemsSince == 0]; fetchedByPage != want {
			t.Errorf("%s: the page fetched %d values, want %d", tc.name, fetchedByPage, want)
		}
		if got := r.fetched[fetchedByPage:]; len(got) != 2 || got[0] != keys.ItemKey(2*int64(time.Second), []byte("v1")) {
			t.Errorf("%s: the search and the removal fetched %v, want v1's key each", tc.name, got)
		}
	}
}

// A page reads Limit+1 rows from its region; on a capped list, a page
// below the newest item reads from the newest item, to rank the rows.
func TestPageScans(t *testing.T) {
	ctx := context.Background()
	r := list(10)
	l := List{Feature: &feature, EntityID: "u1"}
	after := r.rows[2].Key
	p, err := ReadPage(ctx, l, Range{Limit: 3, After: after}, r.src())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.scans[0]; s.Before != after || s.Limit != 4 {
		t.Errorf("scan %+v: want rows below the cursor, limit 3+1", s)
	}
	if got := values(p); !slices.Equal(got, []string{"v6", "v5", "v4"}) || !p.HasMore || p.End != p.Items[2].Key {
		t.Errorf("page %v hasMore %v end %s", got, p.HasMore, p.End)
	}
	capped := feature
	capped.MaxItems = 5
	l.Feature = &capped
	p, err = ReadPage(ctx, l, Range{Limit: 3, After: after}, r.src())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.scans[1]; s.Before != "" || s.Values {
		t.Errorf("scan %+v: a capped page below the newest item must read keys from the newest", s)
	}
	if len(r.fetched) != 2 {
		t.Errorf("the capped page fetched the values of %v, want its 2 items'", r.fetched)
	}
	if got := values(p); !slices.Equal(got, []string{"v6", "v5"}) || p.HasMore {
		t.Errorf("capped page %v hasMore %v: want the two items left within the cap", got, p.HasMore)
	}
}

// Rows written before ItemsSince are never shown, counted or found, and do
// not count towards the cap.
func TestRowsOfADeletedFeature(t *testing.T) {
	ctx := context.Background()
	r := list(10)
	f := feature
	f.ItemsSince = 1005 // v0–v4 were written before
	f.MaxItems = 3
	l := List{Feature: &f, EntityID: "u1"}
	p, err := ReadPage(ctx, l, Range{Limit: 10, MaxScan: 20}, r.src())
	if err != nil {
		t.Fatal(err)
	}
	if got := values(p); !slices.Equal(got, []string{"v9", "v8", "v7"}) {
		t.Errorf("page %v", got)
	}
	f.MaxItems = 0
	if n, err := CountItems(ctx, l, Window{}, 100, r.scan); err != nil || n != 5 {
		t.Errorf("count = %d, %v; want 5", n, err)
	}
	found, err := FindItems(ctx, l, [][]byte{[]byte("v1"), []byte("v6")}, 0, 100, r.src())
	if err != nil || found[0] != "" || found[1] == "" {
		t.Errorf("found %v, %v", found, err)
	}
	var deleted []string
	removed, err := RemoveMatching(ctx, l, [][]byte{[]byte("v1"), []byte("v6")}, Window{}, 100, r.src(), 10, 1, func(_ context.Context, ks []string) error {
		deleted = append(deleted, ks...)
		return nil
	})
	if err != nil || len(deleted) != 2 || removed != 1 {
		t.Errorf("deleted %v, removed %d, %v: both rows go, one was shown", deleted, removed, err)
	}
}

func TestTrimBoundary(t *testing.T) {
	f := feature
	f.MaxItems = 3
	key := func(ts int) string { return keys.ItemKey(int64(ts), []byte("v")) }
	top := []string{key(9), key(8), key(7)}
	for _, tc := range []struct {
		added []int
		want  string
	}{
		{nil, ""},
		{[]int{10}, key(8)},
		{[]int{1}, key(7)},
		{[]int{10, 11, 12, 13}, key(11)},
		{[]int{9}, ""}, // the same item again
	} {
		var writes []Write
		for _, ts := range tc.added {
			writes = append(writes, Write{Key: key(ts)})
		}
		if got := TrimBoundary(&f, top, writes); got != tc.want {
			t.Errorf("added %v: boundary %q, want %q", tc.added, got, tc.want)
		}
	}
	if ShouldTrim(&feature, 1000) {
		t.Error("an uncapped list is trimmed")
	}
	if !ShouldTrim(&f, TrimSlack(f.MaxItems)) {
		t.Error("an add of a slack's worth of items does not always trim")
	}
}

func values(p Page) []string {
	var out []string
	for _, it := range p.Items {
		out = append(out, string(it.Value))
	}
	return out
}

// Scans of a capped list from the newest row stop one row past the cap:
// the database need not read the rows below, shadowed by trims.
func TestCappedScansStopPastTheCap(t *testing.T) {
	ctx := context.Background()
	r := list(20)
	f := feature
	f.MaxItems = 5
	l := List{Feature: &f, EntityID: "u1"}
	if _, err := CountItems(ctx, l, Window{}, 1000, r.scan); err != nil {
		t.Fatal(err)
	}
	if _, err := NewestKeys(ctx, l, r.scan); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPage(ctx, l, Range{Limit: 3, After: r.rows[1].Key}, r.src()); err != nil {
		t.Fatal(err)
	}
	for i, s := range r.scans {
		if s.Limit != 6 {
			t.Errorf("scan %d reads %d rows, want 6", i, s.Limit)
		}
	}
}
