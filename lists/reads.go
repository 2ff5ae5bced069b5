package lists

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
	"github.com/listgate/listgate/watch"
)

// PageQuery asks for one page of a list, newest first.
type PageQuery struct {
	Ref
	Window
	Limit    *int // nil: DefaultLimit
	After    *string
	Distinct bool  // only the newest item of each value, within the page
	Shown    Shown // how the response writes each item
}

// Window bounds the items of a read by timestamp (ns since the Unix
// epoch), both bounds inclusive: nil keeps every item on that side.
type Window struct {
	MinTimestamp, MaxTimestamp *int64
}

// store is the window as the store takes it; empty is true when no item
// can be in it (it ends before 1970, or before it starts).
func (w Window) store() (sw store.Window, empty bool) {
	if w.MinTimestamp != nil {
		sw.MinTimestamp = max(*w.MinTimestamp, 0)
	}
	if w.MaxTimestamp != nil {
		// Items are stamped from 1970 on, and every one stamped 1970-01-01
		// exactly has long expired.
		if *w.MaxTimestamp < max(sw.MinTimestamp, 1) {
			return sw, true
		}
		sw.MaxTimestamp = *w.MaxTimestamp
	}
	return sw, false
}

// Page is a page of a list, newest first, with the feature it belongs to.
// Every value has been checked to be of the feature's type.
type Page struct {
	Feature *store.Feature
	store.Page
}

// Page reads one page of a list, for one field of an operation's response.
// Every read an operation makes goes through its loader (see WithReads):
// equal reads are made once, at most LoaderConfig.Concurrency at once, and
// the pages a response shows are bounded together by MaxResponseBytes.
func (s *Service) Page(ctx context.Context, q PageQuery) (*Page, error) {
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	rg := store.Range{Limit: DefaultLimit, Distinct: q.Distinct}
	if q.Limit != nil {
		rg.Limit = *q.Limit
	}
	if err := s.CheckLimit(int64(rg.Limit)); err != nil {
		return nil, err
	}
	rg.MaxScan = rg.Limit * s.limits.MaxScanFactor
	w, empty := q.Window.store()
	if empty {
		return &Page{Feature: f}, keys.ValidateEntityID(q.EntityID)
	}
	rg.MinTimestamp, rg.MaxTimestamp = w.MinTimestamp, w.MaxTimestamp
	if q.After != nil {
		rg.After = *q.After // the store checks it is an item key, before any read
	}
	res, err := s.load(ctx, readKey{op: readPage, feature: f, entityID: q.EntityID, r: rg})
	if err != nil {
		return nil, err
	}
	p := res.page
	p.Items = s.typed(ctx, f, q.EntityID, p.Items)
	if err := s.charge(ctx, f, p.Items, q.Shown); err != nil {
		return nil, err
	}
	return &Page{Feature: f, Page: p}, nil
}

// CountQuery asks how many items a list holds in a window.
type CountQuery struct {
	Ref
	Window
}

// Count counts a list's items in a window, through the operation's loader.
func (s *Service) Count(ctx context.Context, q CountQuery) (int, error) {
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return 0, err
	}
	w, empty := q.Window.store()
	if empty {
		return 0, keys.ValidateEntityID(q.EntityID)
	}
	res, err := s.load(ctx, readKey{op: readCount, feature: f, entityID: q.EntityID, r: store.Range{MinTimestamp: w.MinTimestamp, MaxTimestamp: w.MaxTimestamp}})
	if errors.Is(err, store.ErrTooManyRows) {
		return 0, s.tooManyRows("count", f, q.EntityID, s.scanRows(readsFrom(ctx), f))
	}
	return res.count, err
}

// tooManyRows is the error of a count or histogram that would look at
// more than rows rows.
func (s *Service) tooManyRows(what string, f *store.Feature, entityID string, rows int) error {
	if rows < s.limits.MaxCount {
		return fmt.Errorf("%w %s of %s/%s: the window holds more than %d items, this %s's share of the keys its operation may look at (its counts and histograms share what --max-complexity leaves, each up to --max-count, %d); narrow it with minTimestamp and maxTimestamp, or count in fewer per operation",
			errkind.Invalid, what, f.Key(), entityID, rows, what, s.limits.MaxCount)
	}
	return fmt.Errorf("%w %s of %s/%s: the window holds more than %d items, more than one %s may look at (--max-count); narrow it with minTimestamp and maxTimestamp", errkind.Invalid, what, f.Key(), entityID, rows, what)
}

// HistogramQuery asks how many items a list holds in each bucket of a
// window: from MinTimestamp, Width ns each, the last ending at
// MaxTimestamp.
type HistogramQuery struct {
	Ref
	MinTimestamp int64  // ns, inclusive
	MaxTimestamp *int64 // ns, inclusive; nil: now
	Width        int64  // ns
}

// Bucket is one bucket of a histogram: the items from Start on, up to
// the next bucket's start.
type Bucket struct {
	Start int64 // ns
	Count int
}

// CheckBuckets checks a histogram's window and width, and says how many
// buckets it makes: at most MaxBuckets.
func (s *Service) CheckBuckets(minTimestamp, maxTimestamp, width int64) (int, error) {
	switch {
	case width < 1:
		return 0, fmt.Errorf("%w bucketSeconds: must be at least 1", errkind.Invalid)
	case minTimestamp < 0:
		return 0, fmt.Errorf("%w minTimestamp: before 1970-01-01", errkind.Invalid)
	case maxTimestamp < minTimestamp:
		return 0, fmt.Errorf("%w maxTimestamp: before minTimestamp", errkind.Invalid)
	}
	n := (maxTimestamp-minTimestamp)/width + 1
	if n > int64(s.limits.MaxBuckets) {
		return 0, fmt.Errorf("%w histogram: %d buckets from minTimestamp to maxTimestamp, more than the %d one histogram may hold (--max-buckets); widen the buckets or narrow the window", errkind.Invalid, n, s.limits.MaxBuckets)
	}
	return int(n), nil
}

// Histogram counts a list's items in each bucket of a window, through the
// operation's loader: one read of the window's keys, however many buckets.
func (s *Service) Histogram(ctx context.Context, q HistogramQuery) ([]Bucket, error) {
	maxTimestamp := s.now().UnixNano()
	if q.MaxTimestamp != nil {
		maxTimestamp = *q.MaxTimestamp
	}
	n, err := s.CheckBuckets(q.MinTimestamp, maxTimestamp, q.Width)
	if err != nil {
		return nil, err
	}
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	if err := keys.ValidateEntityID(q.EntityID); err != nil {
		return nil, err
	}
	k := readKey{op: readHistogram, feature: f, entityID: q.EntityID, r: store.Range{MinTimestamp: q.MinTimestamp, MaxTimestamp: maxTimestamp}, width: q.Width}
	var counts []int
	if maxTimestamp >= 1 { // items are stamped after 1970-01-01T00:00:00Z: an earlier window is empty
		res, err := s.load(ctx, k)
		if errors.Is(err, store.ErrTooManyRows) {
			return nil, s.tooManyRows("histogram", f, q.EntityID, s.scanRows(readsFrom(ctx), f))
		}
		if err != nil {
			return nil, err
		}
		counts = res.buckets
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i].Start = q.MinTimestamp + int64(i)*q.Width
		if i < len(counts) {
			out[i].Count = counts[i]
		}
	}
	return out, nil
}

// ContainsQuery asks, for each of some values, for the newest item of a
// list holding it.
type ContainsQuery struct {
	Ref
	Values       []values.Value
	MinTimestamp *int64 // ns; nil keeps every item
	Shown        Shown  // how the response writes each item found
}

// Found is the answer to a ContainsQuery: the newest item holding each
// value, in the order asked, or nil.
type Found struct {
	Feature *store.Feature
	Items   []*store.Item
}

// Contains finds the newest item holding each value, through the
// operation's loader: a key-only read of the list, and the values of the
// rows whose hash matches, compared.
func (s *Service) Contains(ctx context.Context, q ContainsQuery) (*Found, error) {
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	encoded, err := s.encodeValues(f, q.Values)
	if err != nil {
		return nil, err
	}
	k := readKey{op: readFind, feature: f, entityID: q.EntityID, values: joinValues(encoded)}
	if q.MinTimestamp != nil {
		k.r.MinTimestamp = max(*q.MinTimestamp, 0)
	}
	res, err := s.load(ctx, k)
	if errors.Is(err, store.ErrTooManyRows) {
		return nil, fmt.Errorf("%w listContains of %s/%s: the list holds more than %d items from minTimestamp on, more than one search may look at (--max-count); narrow it with minTimestamp", errkind.Invalid, f.Key(), q.EntityID, s.limits.MaxCount)
	}
	if err != nil {
		return nil, err
	}
	found := &Found{Feature: f, Items: make([]*store.Item, len(encoded))}
	var shown []store.Item
	for i, key := range res.found {
		if key != "" {
			found.Items[i] = &store.Item{Key: key, Timestamp: keys.ItemTimestamp(key), Value: encoded[i]}
			shown = append(shown, *found.Items[i])
		}
	}
	return found, s.charge(ctx, f, shown, q.Shown)
}

// WatchQuery asks for the items added to a list: from now on, after a
// position a client received, or since a time (ns).
type WatchQuery struct {
	Ref
	Since *int64
	After *string
}

// Watch is a watch of a list: its items as they are added, of the feature
// they belong to.
type Watch struct {
	Feature  *store.Feature
	entityID string
	s        *Service
	sub      *watch.Subscription
}

// Watch watches a list until ctx ends (see package watch). Its catch-up
// is its caller's, and charged, as the operation in ctx says (SetCatchUp).
func (s *Service) Watch(ctx context.Context, q WatchQuery) (*Watch, error) {
	start := watch.Start{Since: q.Since}
	if q.After != nil {
		p, err := store.ParsePosition(*q.After)
		if err != nil {
			return nil, err
		}
		start.After = &p
	}
	if r := readsFrom(ctx); r != nil {
		start.Caller, start.Charge = r.catchUpCaller, r.catchUpCharge
	}
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	if !f.Live {
		return nil, store.NotLive(f)
	}
	wait := s.store.LiveWait(s.catalog.RecreateWait())
	if err := store.CheckLiveSince(f, s.now(), wait); err != nil {
		return nil, err
	}
	if start.After != nil {
		// A position of a record the feed no longer keeps is refused below,
		// by the hub.
		if at, ok := s.store.PositionTime(*start.After); ok {
			if err := store.CheckResume(f, at, wait); err != nil {
				return nil, err
			}
		}
	}
	sub, err := s.hub.Subscribe(ctx, store.List{Feature: f, EntityID: q.EntityID}, start)
	if err != nil {
		return nil, err
	}
	return &Watch{Feature: f, entityID: q.EntityID, s: s, sub: sub}, nil
}

// Next is the watch's next item, of the feature's value type (one that is
// not is left out, as a page leaves it out), and its position. It returns
// ctx's error once ctx ends, watch.ErrEnded once the gateway ended the
// watch as it shuts down, or the error that ended it.
func (w *Watch) Next(ctx context.Context) (watch.Delivery, error) {
	for {
		d, err := w.sub.Next(ctx)
		if err != nil {
			return d, err
		}
		if items := w.s.typed(ctx, w.Feature, w.entityID, []store.Item{d.Item}); len(items) == 1 {
			return d, nil
		}
	}
}

// Sent tells that the item Next gave last reached the client (see
// watch.Subscription.Sent).
func (w *Watch) Sent(d watch.Delivery) { w.sub.Sent(d) }

// current says whether a watched list's feature is still the one
// subscribed to: one deleted, or created again, ends its watches. So does
// one made not live, as soon as this gateway sees it: another gateway may
// have stopped recording its adds since the change was written, so the
// subscription can no longer promise every add, and says so at once
// rather than miss some silently.
func (s *Service) current(l store.List) error {
	f := l.Feature
	now := s.catalog.Known(f.EntityType, f.Name, f.Version)
	if now == nil || !now.CreatedAt.Equal(f.CreatedAt) {
		return fmt.Errorf("feature %s: %w: it was deleted, or created again, since the subscription began; subscribe again", f.Key(), errkind.NotFound)
	}
	if !now.Live {
		return fmt.Errorf("%w feature %s: it was made not live since the subscription began, so its adds are no longer recorded; make it live again (setListFeatureLive), then read the list and subscribe without a position", errkind.Invalid, f.Key())
	}
	if !now.LiveSince.Equal(f.LiveSince) {
		return store.PositionExpired(fmt.Sprintf("feature %s was made not live and live again (at %s) since the subscription began, and the adds made while it was not live were not recorded",
			f.Key(), now.LiveSince.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

// typed returns the items whose values are of the feature's type, leaving
// out, counted and logged, any that are not: rows another tool wrote, or a
// gateway that had not yet seen a feature deleted and created again. One
// such row never fails a page. items may be shared by the aliases of one
// read: it is copied, not changed.
func (s *Service) typed(ctx context.Context, f *store.Feature, entityID string, items []store.Item) []store.Item {
	var kept []store.Item
	for i, it := range items {
		err := values.Check(f.ValueType, it.Value)
		if err == nil {
			if kept != nil {
				kept = append(kept, it)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]store.Item, 0, len(items)-1), items[:i]...)
		}
		s.skipped.Add(ctx, 1)
		if last, ok := s.skipLogged.Load(f.Key()); !ok || time.Since(last.(time.Time)) > time.Minute {
			s.skipLogged.Store(f.Key(), time.Now())
			s.log.WarnContext(ctx, "a stored value is not of its feature's type: left out of the page (logged once a minute per feature)",
				"feature", f.Key(), "entity_id", entityID, "item_key", it.Key, "err", err)
		}
	}
	if kept == nil {
		return items
	}
	return kept
}
