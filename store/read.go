package store

import (
	"context"
	"fmt"
	"math"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// What every read means is written once, here: a backend only reads rows
// (a Scanner), and ReadPage, CountItems, FindItems and MatchingKeys decide
// which of them a caller sees. A row is visible when it was written under
// the feature as it is now (not before ItemsSince) and is among the newest
// MaxItems visible rows of its list.

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

// ReadPage reads one page of a list with scan: the visible items of r's
// region, newest first, at most r.Limit of them, with Distinct only the
// newest item of each value. It looks at r.Limit+1 rows of the region, or
// up to r.MaxScan when rows may be left out; a page that stops there ends
// early, with HasMore, and End at the last row it looked at. On a capped
// list a page that does not start at the newest row reads from the newest
// row, to know each row's rank: at most MaxItems rows more.
func ReadPage(ctx context.Context, l List, r Range, scan Scanner) (Page, error) {
	if err := l.Validate(); err != nil {
		return Page{}, err
	}
	if err := r.Validate(); err != nil {
		return Page{}, err
	}
	p := &pageReader{view: view{f: l.Feature}, r: r, region: regionOf(Window{r.MinTimestamp, r.MaxTimestamp}, r.After)}
	s, ranked := p.scanFor(p.region)
	p.ranked = ranked
	s.Values = true
	// A page looks at Limit+1 rows of its region: the last tells whether
	// more follow. One that may leave rows out looks at up to MaxScan,
	// and one row more tells whether more follow those; it fetches a
	// page's worth first, and more only when rows were left out.
	p.budget = r.Limit + 1
	s.Limit = p.budget
	if r.Distinct || p.f.ItemsSince != 0 {
		p.budget = max(r.MaxScan, p.budget)
		s.Limit = p.budget + 1
		s.Fetch = r.Limit + 2
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
	if err := scan(ctx, s, p.row); err != nil {
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
	return page, nil
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

// FindItems finds, with scan, the newest visible item at or after
// minTimestamp holding each of the value hashes, reading keys only (the
// key carries the hash): the key for each hash, or "". It stops as soon as
// every hash is found. ErrTooManyRows when that means looking at more than
// maxRows rows.
func FindItems(ctx context.Context, l List, hashes []string, minTimestamp int64, maxRows int, scan Scanner) ([]string, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := (Window{MinTimestamp: minTimestamp}).Validate(); err != nil {
		return nil, err
	}
	want := make(map[string][]int, len(hashes))
	for i, h := range hashes {
		want[h] = append(want[h], i)
	}
	found := make([]string, len(hashes))
	v := &view{f: l.Feature}
	err := v.scanKeys(ctx, regionOf(Window{MinTimestamp: minTimestamp}, ""), maxRows, scan, func(row Row, _ bool) bool {
		h := keys.HashOf(row.Key)
		for _, i := range want[h] {
			found[i] = row.Key
		}
		delete(want, h)
		return len(want) > 0
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// MatchingKeys reads, with scan, the keys of every row of a list holding
// one of the value hashes, visible or not (all of them are to be deleted),
// and counts the visible ones.
func MatchingKeys(ctx context.Context, l List, hashes []string, scan Scanner) (matched []string, visible int, err error) {
	if err := l.Validate(); err != nil {
		return nil, 0, err
	}
	want := make(map[string]bool, len(hashes))
	for _, h := range hashes {
		want[h] = true
	}
	v := &view{f: l.Feature}
	s, _ := v.scanFor(region{})
	s.Limit = math.MaxInt32
	err = scan(ctx, s, func(row Row) bool {
		ok, _ := v.visible(row)
		if want[keys.HashOf(row.Key)] {
			matched = append(matched, row.Key)
			if ok {
				visible++
			}
		}
		return true
	})
	return matched, visible, err
}

// ReadSince reads, with scan, the items of a list whose keys are at or
// after from, oldest first, at most limit of them, leaving out rows of a
// deleted feature: what a watcher of the list polls. It does not rank rows
// against a cap: an item pushed out since it was added is still read, once.
func ReadSince(ctx context.Context, l List, from string, limit int, scan Scanner) ([]Item, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	v := view{f: l.Feature}
	s := Scan{From: from, Limit: limit, Values: true, WriteTimes: v.f.ItemsSince != 0, Ascending: true}
	var items []Item
	err := scan(ctx, s, func(row Row) bool {
		if v.f.ItemsSince == 0 || row.WriteTime >= v.f.ItemsSince {
			items = append(items, Item{Key: row.Key, Timestamp: keys.ItemTimestamp(row.Key), Value: row.Value})
		}
		return true
	})
	return items, err
}
