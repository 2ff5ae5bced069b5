// Package lists is the domain service of listgate: everything that can be
// done to the list features and to an entity's list, built on the feature
// catalog and a store. It holds what the operations mean: which input is
// valid, how values are encoded, what a page asks for, the limits, and
// whether a mutation only checks its input. It knows nothing of GraphQL:
// resolvers call it with plain arguments, and errors come back wrapping an
// errkind.
package lists

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
	"github.com/listgate/listgate/watch"
)

// Limits bound what one call may ask for. Each is a flag of the gateway,
// named in the error that enforces it.
type Limits struct {
	MaxListLimit     int // largest limit of one page (--max-list-limit)
	MaxEntities      int // most entities one call may name (--max-entities)
	MaxResponseBytes int // bytes of list items one request may read (--max-response-bytes)
	// MaxCount bounds the rows a count, or a search for values, may look
	// at (--max-count).
	MaxCount int
	// MaxScanFactor bounds the rows a page that leaves rows out (distinct,
	// or of a feature created again) may look at: this many per item of
	// its limit (--max-scan-factor).
	MaxScanFactor int
	MaxValues     int // values of one search or removal (--max-values)
	MaxBatchLists int // lists of one batch add (--max-batch-lists)
}

// DefaultLimit is the items of a page when the caller gives no limit.
const DefaultLimit = 100

// Config is what a Service is built from.
type Config struct {
	Store   store.Store
	Catalog *features.Catalog
	Limits  Limits
	Loader  LoaderConfig
	Now     func() time.Time // the clock for default item timestamps
	Tracer  trace.Tracer     // nil: no loader spans
	Meter   metric.Meter
	// OnPanic turns a panic in a read, which runs in a goroutine of its
	// own, into the error of its key.
	OnPanic func(ctx context.Context, p any) error
	// Watch configures the watching of lists for subscriptions; its
	// Store, Tracer and Meter are the service's.
	Watch watch.Config
}

// Service is the lists service.
type Service struct {
	store   store.Store
	catalog *features.Catalog
	limits  Limits
	now     func() time.Time
	loader  *loader
	workers *workers
	hub     *watch.Hub
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Service{store: cfg.Store, catalog: cfg.Catalog, limits: cfg.Limits, now: cfg.Now}
	l, err := newLoader(s, cfg.Loader, cfg.Tracer, cfg.Meter, cfg.OnPanic)
	if err != nil {
		return nil, err
	}
	s.loader = l
	s.workers = newWorkers(cfg.Loader.Concurrency)
	w := cfg.Watch
	w.Store, w.Meter, w.Now = cfg.Store, cfg.Meter, cfg.Now
	if w.Tracer = cfg.Tracer; w.Tracer == nil {
		w.Tracer = tracenoop.NewTracerProvider().Tracer("")
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	if s.hub, err = watch.New(w); err != nil {
		return nil, err
	}
	return s, nil
}

// Close ends every subscription's watch, and the idle workers.
func (s *Service) Close() {
	s.hub.Close()
	s.workers.close()
}

// WatchQuery asks for the items added to a list, from now on or since a
// time (ns).
type WatchQuery struct {
	Ref
	Since *int64
}

// Watch is a watch of a list: its items as they are added, of the feature
// they belong to.
type Watch struct {
	Feature *store.Feature
	*watch.Subscription
}

// Watch watches a list until ctx ends (see package watch).
func (s *Service) Watch(ctx context.Context, q WatchQuery) (*Watch, error) {
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	sub, err := s.hub.Subscribe(ctx, store.List{Feature: f, EntityID: q.EntityID}, q.Since)
	if err != nil {
		return nil, err
	}
	return &Watch{Feature: f, Subscription: sub}, nil
}

// Ref names one entity's list of a feature version.
type Ref struct {
	EntityType, EntityID, Feature, Version string
}

// NewItem is an item to add: a value as the client sent it, and its
// timestamp (ns since the Unix epoch; nil: now).
type NewItem struct {
	Value     values.Value
	Timestamp *int64
}

// PageQuery asks for one page of a list, newest first.
type PageQuery struct {
	Ref
	Window
	Limit    *int // nil: DefaultLimit
	After    *string
	Distinct bool // only the newest item of each value, within the page
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
	if err := s.CheckLimit(rg.Limit); err != nil {
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
	if err := s.charge(ctx, f, p.Items); err != nil {
		return nil, err
	}
	for _, it := range p.Items {
		if err := values.Check(f.ValueType, it.Value); err != nil {
			return nil, fmt.Errorf("list of %s, item %s: %w", f.Key(), it.Key, err)
		}
	}
	return &Page{Feature: f, Page: p}, nil
}

// CountQuery asks how many items a list holds in a window.
type CountQuery struct {
	Ref
	Window
}

// Count counts a list's items in a window, through the request's loader.
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
		return 0, fmt.Errorf("%w count of %s/%s: the window holds more than %d items, more than one count may look at (--max-count); narrow it with minTimestamp and maxTimestamp", errkind.Invalid, f.Key(), q.EntityID, s.limits.MaxCount)
	}
	return res.count, err
}

// ContainsQuery asks, for each of some values, for the newest item of a
// list holding it.
type ContainsQuery struct {
	Ref
	Values       []values.Value
	MinTimestamp *int64 // ns; nil keeps every item
}

// Found is the answer to a ContainsQuery: the newest item holding each
// value, in the order asked, or nil.
type Found struct {
	Feature *store.Feature
	Items   []*store.Item
}

// Contains finds the newest item holding each value, through the
// request's loader: one key-only read of the list.
func (s *Service) Contains(ctx context.Context, q ContainsQuery) (*Found, error) {
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	encoded, err := s.encodeValues(f, q.Values)
	if err != nil {
		return nil, err
	}
	hashes := make([]byte, 0, len(encoded)*keys.HashLen)
	for _, v := range encoded {
		hashes = keys.AppendValueHash(hashes, v)
	}
	k := readKey{op: readFind, feature: f, entityID: q.EntityID, hashes: string(hashes)}
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
	return found, s.charge(ctx, f, shown)
}

// encodeValues encodes values of a feature's type, at most MaxValues.
func (s *Service) encodeValues(f *store.Feature, vs []values.Value) ([][]byte, error) {
	if err := s.CheckValueCount(len(vs)); err != nil {
		return nil, err
	}
	out := make([][]byte, len(vs))
	for i, v := range vs {
		b, err := values.Encode(f.ValueType, v.Raw)
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

// The bounds of the arguments of a call, each its own check, so that the
// GraphQL edge can apply them before it estimates what a request costs.

// CheckLimit checks the limit of a page.
func (s *Service) CheckLimit(limit int) error {
	if limit < 1 || limit > s.limits.MaxListLimit {
		return fmt.Errorf("%w limit %d: must be from 1 to %d (--max-list-limit)", errkind.Invalid, limit, s.limits.MaxListLimit)
	}
	return nil
}

// CheckValueCount checks how many values a search or a removal names.
func (s *Service) CheckValueCount(n int) error {
	if n == 0 || n > s.limits.MaxValues {
		return fmt.Errorf("%w values: %d given, must be from 1 to %d (--max-values)", errkind.Invalid, n, s.limits.MaxValues)
	}
	return nil
}

// CheckBatch checks the size of a batch add: its lists, and its items in
// all.
func (s *Service) CheckBatch(lists, items int) error {
	if lists == 0 || lists > s.limits.MaxBatchLists {
		return fmt.Errorf("%w adds: %d lists, must be from 1 to %d (--max-batch-lists)", errkind.Invalid, lists, s.limits.MaxBatchLists)
	}
	if limit := s.store.Limits().MaxAddItems; items > limit {
		return fmt.Errorf("%w adds: %d items in all, more than the %d one request may add (--max-add-items)", errkind.Invalid, items, limit)
	}
	return nil
}

// CheckEntity checks an entity's type and id.
func (s *Service) CheckEntity(entityType, id string) error {
	if err := keys.ValidateName("entity type", entityType); err != nil {
		return err
	}
	return keys.ValidateEntityID(id)
}

// CheckEntities checks the entities one call names.
func (s *Service) CheckEntities(entityType string, ids []string) error {
	if err := keys.ValidateName("entity type", entityType); err != nil {
		return err
	}
	if len(ids) > s.limits.MaxEntities {
		return fmt.Errorf("%w entityIds: %d ids, more than the %d one request may ask for (--max-entities)", errkind.Invalid, len(ids), s.limits.MaxEntities)
	}
	for i, id := range ids {
		if err := keys.ValidateEntityID(id); err != nil {
			return fmt.Errorf("entityIds[%d]: %w", i, err)
		}
	}
	return nil
}

// Add adds items to a list, all or nothing.
func (s *Service) Add(ctx context.Context, ref Ref, items []NewItem) (store.AddResult, error) {
	l, add, err := s.prepare(ctx, ref, items, checking(ctx))
	if err != nil || checking(ctx) {
		return store.AddResult{}, err
	}
	return s.store.AddItems(ctx, l, add)
}

// ListAdd is the add of one list in a batch.
type ListAdd struct {
	Ref
	Items []NewItem
}

// BatchResult is what one list's add of a batch did, or why it failed.
type BatchResult struct {
	store.AddResult
	Err error
}

// AddBatch adds items to many lists: at most MaxBatchLists lists and
// MaxAddItems items in all. Every add is checked before any is written,
// so input that can never succeed writes nothing; then each list's add is
// written as its own atomic batch, at most LoaderConfig.Concurrency at
// once, and one that fails (its partition's replicas time out, say) fails
// alone, in its result.
func (s *Service) AddBatch(ctx context.Context, adds []ListAdd) ([]BatchResult, error) {
	total := 0
	for _, a := range adds {
		total += len(a.Items)
	}
	if err := s.CheckBatch(len(adds), total); err != nil {
		return nil, err
	}
	type write struct {
		l     store.List
		items []store.NewItem
	}
	writes := make([]write, len(adds))
	for i, a := range adds {
		l, items, err := s.prepare(ctx, a.Ref, a.Items, true)
		if err != nil {
			return nil, fmt.Errorf("adds[%d]: %w", i, err)
		}
		writes[i] = write{l, items}
	}
	if checking(ctx) {
		return nil, nil
	}
	results := make([]BatchResult, len(writes))
	s.workers.each(len(writes), s.loader.cfg.Concurrency, func(i int) {
		res, err := s.store.AddItems(ctx, writes[i].l, writes[i].items)
		results[i] = BatchResult{AddResult: res, Err: err}
	})
	return results, nil
}

// prepare turns an add into the list and items to write. With check, it
// also checks what the store checks before it writes (ids, limits,
// timestamps, TTLs), so that an add bound to fail fails before anything
// is written.
func (s *Service) prepare(ctx context.Context, ref Ref, items []NewItem, check bool) (store.List, []store.NewItem, error) {
	l, err := s.list(ctx, ref)
	if err != nil {
		return store.List{}, nil, err
	}
	now := s.now()
	add := make([]store.NewItem, len(items))
	for i, it := range items {
		v, err := values.Encode(l.Feature.ValueType, it.Value.Raw)
		if err != nil {
			return store.List{}, nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		add[i] = store.NewItem{Timestamp: now.UnixNano(), Value: v}
		if it.Timestamp != nil {
			add[i].Timestamp = *it.Timestamp
		}
	}
	if check {
		if _, _, err := store.PrepareAdd(l, add, now, s.store.ExpiryCap(), s.store.Limits()); err != nil {
			return store.List{}, nil, err
		}
	}
	return l, add, nil
}

// RemoveValues removes every item of a list holding one of the values and
// returns how many there were.
func (s *Service) RemoveValues(ctx context.Context, ref Ref, vs []values.Value) (int, error) {
	l, err := s.list(ctx, ref)
	if err != nil {
		return 0, err
	}
	encoded, err := s.encodeValues(l.Feature, vs)
	if err != nil || checking(ctx) {
		return 0, err
	}
	return s.store.RemoveValues(ctx, l, encoded)
}

// RemoveAll empties a list.
func (s *Service) RemoveAll(ctx context.Context, ref Ref) error {
	l, err := s.list(ctx, ref)
	if err != nil || checking(ctx) {
		return err
	}
	return s.store.RemoveAll(ctx, l)
}

// list resolves a list reference to its feature, to write to. The store
// checks the entity id before it writes; a check run checks it here.
func (s *Service) list(ctx context.Context, ref Ref) (store.List, error) {
	if err := s.catalog.Fresh(); err != nil {
		return store.List{}, err
	}
	f, err := s.feature(ctx, ref.EntityType, ref.Feature, ref.Version)
	if err != nil {
		return store.List{}, err
	}
	l := store.List{Feature: f, EntityID: ref.EntityID}
	if checking(ctx) {
		if err := l.Validate(); err != nil {
			return store.List{}, err
		}
	}
	return l, nil
}

// feature looks a feature up in the catalog; while a mutation operation is
// checked, features that an earlier field of it creates count too.
func (s *Service) feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	if c := checkFrom(ctx); c != nil {
		key := keys.FeatureKey(entityType, name, version)
		if f, ok := c.created[key]; ok {
			return f, nil
		}
		if c.deleted[key] {
			return nil, fmt.Errorf("feature %s: %w: an earlier field of this operation deletes it", key, errkind.NotFound)
		}
	}
	return s.catalog.Feature(ctx, entityType, name, version)
}
