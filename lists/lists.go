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
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// Limits bound what one call may ask for.
type Limits struct {
	MaxListLimit     int // largest limit of one page
	MaxEntities      int // most entities one call may name
	MaxResponseBytes int // bytes of list items one request may read
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
}

// Service is the lists service.
type Service struct {
	store   store.Store
	catalog *features.Catalog
	limits  Limits
	now     func() time.Time
	loader  *loader
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
	return s, nil
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
	MinTimestamp *int64 // ns; nil or before 1970 keeps every item
	Limit        *int   // nil: DefaultLimit
	After        *string
}

// Page is a page of a list, newest first, with the feature it belongs to.
// Every value has been checked to be of the feature's type.
type Page struct {
	Feature *store.Feature
	store.Page
}

// Page reads one page of a list, for one field of a request's response.
// Every page a request reads goes through its loader (see WithRequest):
// equal pages are read once, at most LoaderConfig.Concurrency at once, and
// the pages a response shows are bounded together by MaxResponseBytes.
func (s *Service) Page(ctx context.Context, q PageQuery) (*Page, error) {
	f, err := s.catalog.Feature(ctx, q.EntityType, q.Feature, q.Version)
	if err != nil {
		return nil, err
	}
	rg := store.Range{Limit: DefaultLimit}
	if q.Limit != nil {
		rg.Limit = *q.Limit
	}
	if rg.Limit < 1 || rg.Limit > s.limits.MaxListLimit {
		return nil, fmt.Errorf("%w limit %d: must be from 1 to %d", errkind.Invalid, rg.Limit, s.limits.MaxListLimit)
	}
	if q.MinTimestamp != nil {
		rg.MinTimestamp = max(*q.MinTimestamp, 0)
	}
	if q.After != nil {
		rg.After = *q.After // the store checks it is an item key, before any read
	}
	p, err := s.load(ctx, pageKey{feature: f, entityID: q.EntityID, r: rg})
	if err != nil {
		return nil, err
	}
	if err := s.charge(ctx, f, p); err != nil {
		return nil, err
	}
	for _, it := range p.Items {
		if err := values.Check(f.ValueType, it.Value); err != nil {
			return nil, fmt.Errorf("list of %s, item %s: %w", f.Key(), it.Key, err)
		}
	}
	return &Page{Feature: f, Page: p}, nil
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
		return fmt.Errorf("%w entityIds: %d ids, more than the %d one request may ask for", errkind.Invalid, len(ids), s.limits.MaxEntities)
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

// RemoveValue removes every item of a list with that value and returns how
// many there were.
func (s *Service) RemoveValue(ctx context.Context, ref Ref, value values.Value) (int, error) {
	l, err := s.list(ctx, ref)
	if err != nil {
		return 0, err
	}
	v, err := values.Encode(l.Feature.ValueType, value.Raw)
	if err != nil || checking(ctx) {
		return 0, err
	}
	return s.store.RemoveValue(ctx, l, v)
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
	f, err := s.catalog.Feature(ctx, entityType, name, version)
	if errors.Is(err, errkind.NotFound) {
		if c := checkFrom(ctx); c != nil {
			if f, ok := c.created[keys.FeatureKey(entityType, name, version)]; ok {
				return f, nil
			}
		}
	}
	return f, err
}
