package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// What every read means is written once, here: a backend only reads rows
// (a Source), and ReadPage, CountItems, FindItems and RemoveMatching
// decide which of them a caller sees. A row is visible when it was written
// under the feature as it is now (not before ItemsSince) and is among the
// newest MaxItems visible rows of its list. Values are read only for the
// rows a caller gets: a read that looks at more rows than it returns (a
// capped page below the newest item, a distinct page, a search, a removal)
// looks at keys first, then fetches the values of the rows it keeps.

// Row is a row of a list as a backend reads it.
type Row struct {
	Key       string
	Value     []byte // when the scan asks for values; the caller's to keep
	WriteTime int64  // µs since the epoch, when the scan asks for write times
}

// Scan selects rows of one list, newest first unless Ascending.
type Scan struct {
	From       string // the lowest key read, inclusive; "" reads to the oldest row
	Before     string // keys below this are read; "" reads from the newest row
	Limit      int    // most rows read; at least 1
	Fetch      int    // rows a backend fetches at a time; 0: Limit
	Values     bool   // read values
	WriteTimes bool   // read write times
	Ascending  bool   // oldest first
}

// Scanner reads the live rows of one list that a Scan selects, with one
// single-partition query, in the Scan's order, and calls fn with each until
// fn returns false. Expired rows are never read.
type Scanner func(ctx context.Context, s Scan, fn func(Row) bool) error

// Fetcher reads the live rows of one list whose keys are among keys
// (at most FetchBatch), with their values, in single-partition queries, and
// calls fn with each until fn returns false; keys no live row has are left
// out.
type Fetcher func(ctx context.Context, keys []string, fn func(Row) bool) error

// FetchBatch bounds the keys of one fetch.
const FetchBatch = 100

// Source is how the reads of one list reach a backend's rows.
type Source struct {
	Scan  Scanner
	Fetch Fetcher
}

// fetchValues reads the values of keys, FetchBatch at a time: by key, for
// the rows still there.
func (src Source) fetchValues(ctx context.Context, keys []string) (map[string][]byte, error) {
	values := make(map[string][]byte, len(keys))
	for start := 0; start < len(keys); start += FetchBatch {
		err := src.Fetch(ctx, keys[start:min(start+FetchBatch, len(keys))], func(row Row) bool {
			values[row.Key] = row.Value
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return values, nil
}

// ErrTooManyRows is the error of a count or a search that would look at
// more rows than it may.
var ErrTooManyRows = fmt.Errorf("%w: more rows to look at than allowed", errkind.Invalid)

// region is the part of a list a read asks for: keys from from (inclusive)
// up to before (exclusive; "" has no upper bound).
type region struct{ from, before string }

func regionOf(w Window, after string) region {
	var r region
	if w.MinTimestamp > 0 {
		r.from = keys.TimestampPrefix(w.MinTimestamp)
	}
	if w.MaxTimestamp > 0 && w.MaxTimestamp < math.MaxInt64 {
		r.before = keys.TimestampPrefix(w.MaxTimestamp + 1) // keys of timestamps up to MaxTimestamp sort below
	}
	if after != "" && (r.before == "" || after < r.before) {
		r.before = after
	}
	return r
}

// view follows one read down a list, newest first: which rows are visible,
// and the rank of each among the visible rows.
type view struct {
	f    *Feature
	rank int
}

// visible reports whether row is one the feature shows, counting its rank;
// end is true once the rows are past the cap, where nothing is visible.
func (v *view) visible(row Row) (ok, end bool) {
	if v.f.ItemsSince != 0 && row.WriteTime < v.f.ItemsSince {
		return false, false
	}
	v.rank++
	if v.f.MaxItems > 0 && v.rank > v.f.MaxItems {
		return false, true
	}
	return true, false
}

// scanFor is the scan of a region: from the region's upper bound, or, on a
// capped list, from the newest row, so that ranks are counted.
func (v *view) scanFor(r region) (s Scan, ranked bool) {
	s = Scan{From: r.from, Before: r.before, WriteTimes: v.f.ItemsSince != 0}
	if v.f.MaxItems > 0 && r.before != "" {
		s.Before = ""
		return s, true
	}
	return s, false
}

// rankLimit bounds a scan of a capped list from the newest row, which ends
// past the cap: every row it reads is visible (no feature created again),
// so MaxItems+1 rows reach past the cap, and the database need not read
// the rows below, shadowed by trims until compaction drops them.
func (v *view) rankLimit(s *Scan) {
	if v.f.MaxItems > 0 && v.f.ItemsSince == 0 && s.Before == "" {
		s.Limit = min(s.Limit, v.f.MaxItems+1)
		if s.Fetch > s.Limit {
			s.Fetch = s.Limit
		}
	}
}

// CapRows is the most rows a key-only read of a list of f looks at,
// whatever its window and bound: MaxItems+1 on a capped list never
// created again, whose scan starts at the newest row and stops past the
// cap (rankLimit); 0 when only the read's bound bounds it.
func CapRows(f *Feature) int {
	if f == nil || f.MaxItems == 0 || f.ItemsSince != 0 {
		return 0
	}
	return f.MaxItems + 1
}

// ReadPage reads one page of a list from src: the visible items of r's
// region, newest first, at most r.Limit of them, with Distinct only the
// newest item of each value. It looks at r.Limit+1 rows of the region, or
// up to r.MaxScan when rows may be left out; a page that stops there ends
// early, with HasMore, and End at the last row it looked at. On a capped
// list a page that does not start at the newest row reads from the newest
// row, to know each row's rank: at most MaxItems rows more. A page that
// may look at more rows than it shows (ranked, distinct, or of a feature
// created again) reads keys first and fetches the values of its items
// alone.
func ReadPage(ctx context.Context, l List, r Range, src Source) (Page, error) {
	if err := l.Validate(); err != nil {
		return Page{}, err
	}
	if err := r.Validate(); err != nil {
		return Page{}, err
	}
	p := &pageReader{view: view{f: l.Feature}, r: r, region: regionOf(Window{r.MinTimestamp, r.MaxTimestamp}, r.After)}
	s, ranked := p.scanFor(p.region)
	p.ranked = ranked
	keysFirst := ranked || r.Distinct || p.f.ItemsSince != 0
	s.Values = !keysFirst
	// A page looks at Limit+1 rows of its region: the last tells whether
	// more follow. One that may leave rows out looks at up to MaxScan,
	// and one row more tells whether more follow those.
	p.budget = r.Limit + 1
	s.Limit = p.budget
	if r.Distinct || p.f.ItemsSince != 0 {
		p.budget = max(r.MaxScan, p.budget)
		s.Limit = p.budget + 1
	}
	if ranked {
		// The rows above the page: at most MaxItems shown ones, and as
		// many rows of a deleted feature as the page may look at.
		s.Limit += p.f.MaxItems + p.budget
	}
	p.rankLimit(&s)
	if r.Distinct {
		p.seen = make(map[string]bool, min(r.Limit, 128))
	}
	if err := src.Scan(ctx, s, p.row); err != nil {
		return Page{}, err
	}
	page := p.page
	if p.rows == s.Limit && !page.HasMore && !p.ended {
		// A ranked page read all it may before it knew more: the rows
		// above it held rows of a deleted feature.
		if p.last == "" {
			return Page{}, fmt.Errorf("%w list of %s: more than %d rows written before the feature was created again lie above this page; they expire with their TTL", errkind.Invalid, l.Feature.Key(), p.budget)
		}
		page.HasMore = true
	}
	last := p.last
	switch {
	case page.HasMore && len(page.Items) < r.Limit:
		page.End = last
	case len(page.Items) > 0:
		page.End = page.Items[len(page.Items)-1].Key
	}
	if keysFirst && len(page.Items) > 0 {
		if err := p.fillValues(ctx, src, &page); err != nil {
			return Page{}, err
		}
	}
	return page, nil
}

// fillValues fetches the values of a page whose rows were looked at by
// key, leaving out any row removed since.
func (p *pageReader) fillValues(ctx context.Context, src Source, page *Page) error {
	ks := make([]string, len(page.Items))
	for i, it := range page.Items {
		ks[i] = it.Key
	}
	values, err := src.fetchValues(ctx, ks)
	if err != nil {
		return err
	}
	items := page.Items[:0]
	for _, it := range page.Items {
		if v, ok := values[it.Key]; ok {
			it.Value = v
			items = append(items, it)
		}
	}
	page.Items = items
	return nil
}

// pageReader builds a page from the rows of a scan.
type pageReader struct {
	view
	r      Range
	region region
	ranked bool
	budget int             // rows of the region the page may look at
	seen   map[string]bool // value hashes shown, when distinct
	page   Page
	rows   int    // rows read
	looked int    // rows of the region looked at
	last   string // key of the last row looked at
	ended  bool   // the rows passed the cap
}

func (p *pageReader) row(row Row) bool {
	p.rows++
	ok, end := p.visible(row)
	if end {
		p.ended = true
		return false
	}
	if p.ranked && row.Key >= p.region.before {
		return true // above the page: counted for its rank only
	}
	if p.looked == p.budget {
		p.page.HasMore = true // more rows follow the ones looked at
		return false
	}
	p.looked++
	if !ok {
		p.last = row.Key
		return true
	}
	if len(p.page.Items) == p.r.Limit {
		p.page.HasMore = true
		return false
	}
	p.last = row.Key
	if p.seen != nil {
		h := keys.HashOf(row.Key)
		if p.seen[h] {
			return true
		}
		p.seen[h] = true
	}
	p.page.Items = append(p.page.Items, Item{Key: row.Key, Timestamp: keys.ItemTimestamp(row.Key), Value: row.Value})
	return true
}

// CountItems counts the visible items of a list in a window with scan,
// reading keys only. ErrTooManyRows when that means looking at more than
// maxRows rows.
func CountItems(ctx context.Context, l List, w Window, maxRows int, scan Scanner) (int, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	if err := w.Validate(); err != nil {
		return 0, err
	}
	v := &view{f: l.Feature}
	rg := regionOf(w, "")
	n := 0
	err := v.scanKeys(ctx, rg, maxRows, scan, func(row Row, ranked bool) bool {
		if !ranked || row.Key < rg.before {
			n++
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// scanKeys calls fn, with scan, for each visible row of region, keys
// only, until fn returns false; ranked says whether the scan reads past
// the region for a cap's ranking. ErrTooManyRows when that means looking
// at more than maxRows rows.
func (v *view) scanKeys(ctx context.Context, rg region, maxRows int, scan Scanner, fn func(row Row, ranked bool) bool) error {
	s, ranked := v.scanFor(rg)
	s.Limit = maxRows + 1
	v.rankLimit(&s)
	looked := 0
	err := scan(ctx, s, func(row Row) bool {
		ok, end := v.visible(row)
		if end {
			return false
		}
		if looked++; looked > maxRows {
			return false
		}
		return !ok || fn(row, ranked)
	})
	if err == nil && looked > maxRows {
		err = ErrTooManyRows
	}
	return err
}

// FindItems finds, from src, the newest visible item at or after
// minTimestamp holding each of values: its key, or "". It looks at keys
// (the key carries the value's hash), and compares the values of the rows
// whose hash matches, so that two values with one MD5 are never taken for
// each other. It stops as soon as every value is found. ErrTooManyRows
// when that means looking at more than maxRows rows.
func FindItems(ctx context.Context, l List, values [][]byte, minTimestamp int64, maxRows int, src Source) ([]string, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := (Window{MinTimestamp: minTimestamp}).Validate(); err != nil {
		return nil, err
	}
	found := make([]string, len(values))
	want := make(map[string][]int, len(values)) // by hash, the values not yet found
	for i, v := range values {
		h := keys.ValueHash(v)
		want[h] = append(want[h], i)
	}
	rg := regionOf(Window{MinTimestamp: minTimestamp}, "")
	// The newest row of each hash, then, for a value whose newest row holds
	// another value of its hash, every row of that hash.
	for pass := 0; len(want) > 0 && pass < 2; pass++ {
		candidates := map[string][]string{}
		var order []string
		v := &view{f: l.Feature}
		err := v.scanKeys(ctx, rg, maxRows, src.Scan, func(row Row, _ bool) bool {
			h := keys.HashOf(row.Key)
			if _, ok := want[h]; !ok || (pass == 0 && len(candidates[h]) > 0) {
				return true
			}
			candidates[h] = append(candidates[h], row.Key)
			order = append(order, row.Key)
			return pass == 1 || len(candidates) < len(want)
		})
		if err != nil {
			return nil, err
		}
		stored, err := src.fetchValues(ctx, order)
		if err != nil {
			return nil, err
		}
		for h, idx := range want {
			left := idx[:0]
			for _, i := range idx {
				for _, k := range candidates[h] {
					if b, ok := stored[k]; ok && bytes.Equal(b, values[i]) {
						found[i] = k
						break
					}
				}
				if found[i] == "" && pass == 0 && len(candidates[h]) > 0 {
					left = append(left, i) // its hash's newest row holds another value
				}
			}
			if len(left) == 0 {
				delete(want, h)
			} else {
				want[h] = left
			}
		}
	}
	return found, nil
}

// Removal is what RemoveMatching did when it stopped before the end: it
// removed Removed of the Matched shown items whose hash matches the
// values', then Err.
type Removal struct {
	Removed, Matched int
	Err              error
}

func (r *Removal) Error() string {
	return fmt.Sprintf("removed %d of at most %d items holding the values, then: %v", r.Removed, r.Matched, r.Err)
}

func (r *Removal) Unwrap() error { return r.Err }

// RemoveMatching removes every row of w holding one of values, visible or
// not (rows past the cap and of a deleted feature go too), and returns how
// many of them were visible. It looks at the keys of w, no more than
// maxRows of them (ErrTooManyRows, and nothing is removed), then, at most
// workers at once, fetches the values of the rows whose hash matches and
// deletes, with del, batch keys at a time, those holding one of values.
// A removal cut short (its context ended, a delete failed) says what it
// removed in a *Removal.
func RemoveMatching(ctx context.Context, l List, values [][]byte, w Window, maxRows int, src Source, batch, workers int, del func(ctx context.Context, keys []string) error) (int, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	if err := w.Validate(); err != nil {
		return 0, err
	}
	want := make(map[string]bool, len(values))
	exact := make(map[string]bool, len(values))
	for _, v := range values {
		want[keys.ValueHash(v)] = true
		exact[string(v)] = true
	}
	type match struct {
		key     string
		visible bool
	}
	var matched []match
	v := &view{f: l.Feature}
	rg := regionOf(w, "")
	s, ranked := v.scanFor(rg)
	s.Limit = maxRows + 1
	if ranked {
		s.Limit += l.Feature.MaxItems // the shown rows above the window, ranked
	}
	looked, shown := 0, 0
	err := src.Scan(ctx, s, func(row Row) bool {
		ok, _ := v.visible(row)
		if ranked && row.Key >= rg.before {
			return true // above the window: ranked, not looked at
		}
		if looked++; looked > maxRows {
			return false
		}
		if want[keys.HashOf(row.Key)] {
			matched = append(matched, match{row.Key, ok})
			if ok {
				shown++
			}
		}
		return true
	})
	if err == nil && looked > maxRows {
		err = ErrTooManyRows
	}
	if err != nil {
		return 0, err
	}
	var removed, done atomic.Int64
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	// Each worker takes FetchBatch rows at a time: one fetch of their
	// values, then deletes of batch keys each.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, (len(matched)+FetchBatch-1)/FetchBatch) {
		wg.Go(func() {
			for {
				start := int(next.Add(FetchBatch)) - FetchBatch
				if start >= len(matched) || ctx.Err() != nil {
					return
				}
				chunk := matched[start:min(start+FetchBatch, len(matched))]
				ks := make([]string, len(chunk))
				for i, m := range chunk {
					ks[i] = m.key
				}
				stored, err := src.fetchValues(ctx, ks)
				if err != nil {
					fail(err)
					return
				}
				var gone []match
				for _, m := range chunk {
					if b, ok := stored[m.key]; ok && exact[string(b)] {
						gone = append(gone, m)
					}
				}
				for len(gone) > 0 {
					part := gone[:min(batch, len(gone))]
					gone = gone[len(part):]
					ks, visible := ks[:0], 0
					for _, m := range part {
						ks = append(ks, m.key)
						if m.visible {
							visible++
						}
					}
					if err := del(ctx, ks); err != nil {
						fail(err)
						return
					}
					removed.Add(int64(visible))
				}
				done.Add(int64(len(chunk)))
			}
		})
	}
	wg.Wait()
	if first == nil && int(done.Load()) < len(matched) {
		first = ctx.Err()
	}
	if first != nil {
		return int(removed.Load()), &Removal{Removed: int(removed.Load()), Matched: shown, Err: first}
	}
	return int(removed.Load()), nil
}

// ReadSince reads, with scan, the items of a list whose keys are at or
// after from, oldest first, leaving out rows of a deleted feature: what a
// watcher of the list polls. It looks at limit rows at most, visible or
// not, and reads one more, whose key is where the next call starts: a
// stretch holding fewer items than limit is no sign of the end, since the
// rows of a deleted feature (CQL keeps them until they expire) may fill
// it. It does not rank rows against a cap: an item pushed out since it
// was added is still read, once.
func ReadSince(ctx context.Context, l List, from string, limit int, scan Scanner) (SincePage, error) {
	if err := l.Validate(); err != nil {
		return SincePage{}, err
	}
	if limit < 1 || limit > MaxLimit {
		return SincePage{}, fmt.Errorf("%w limit: must be from 1 to %d", errkind.Invalid, MaxLimit)
	}
	v := view{f: l.Feature}
	s := Scan{From: from, Limit: limit + 1, Values: true, WriteTimes: v.f.ItemsSince != 0, Ascending: true}
	var p SincePage
	looked := 0
	err := scan(ctx, s, func(row Row) bool {
		if looked == limit {
			p.Next = row.Key
			return false
		}
		looked++
		if v.f.ItemsSince == 0 || row.WriteTime >= v.f.ItemsSince {
			p.Items = append(p.Items, Item{Key: row.Key, Timestamp: keys.ItemTimestamp(row.Key), Value: row.Value})
		}
		return true
	})
	if err != nil {
		return SincePage{}, err
	}
	return p, nil
}
