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
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
	"github.com/listgate/listgate/watch"
)

// Config is what a Service is built from.
type Config struct {
	Store   store.Store
	Catalog *features.Catalog
	Limits  Limits
	Loader  LoaderConfig
	Now     func() time.Time // the clock for default item timestamps
	Tracer  trace.Tracer     // nil: no loader spans
	Meter   metric.Meter
	Log     *slog.Logger // rows left out of pages, for one
	// OnPanic turns a panic in a read, which runs in a goroutine of its
	// own, into the error of its key.
	OnPanic func(ctx context.Context, p any) error
	// Watch configures the watching of lists for subscriptions; its
	// Store, Meter and Log are the service's.
	Watch watch.Config
	// Answers are the bytes of answers being built and written, each
	// caller's share of them (answers.go); nil: unbounded.
	Answers *pool.Pool
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
	// answers are the bytes of answers being built and written (nil:
	// unbounded); itemSizes what an item of a feature's page is reserved.
	answers   *pool.Pool
	itemSizes *itemSizes

	log        *slog.Logger
	skipped    metric.Int64Counter // stored values not of their feature's type
	skipLogged sync.Map            // feature key → when a skip was last logged
}

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Meter == nil {
		cfg.Meter = noop.NewMeterProvider().Meter("")
	}
	s := &Service{store: cfg.Store, catalog: cfg.Catalog, limits: cfg.Limits, now: cfg.Now, log: cfg.Log,
		answers: cfg.Answers, itemSizes: newItemSizes(cfg.Store.Limits().MaxValueBytes)}
	l, err := newLoader(s, cfg.Loader, cfg.Tracer, cfg.Meter, cfg.OnPanic)
	if err != nil {
		return nil, err
	}
	if s.skipped, err = cfg.Meter.Int64Counter("listgate.list.items.skipped",
		metric.WithDescription("Stored values left out of pages because they are not of their feature's type (written by another tool, or by a gateway that had not seen the feature deleted and created again).")); err != nil {
		return nil, err
	}
	s.loader = l
	s.workers = newWorkers(cfg.Loader.Concurrency)
	w := cfg.Watch
	w.Store, w.Meter, w.Log, w.Current = cfg.Store, cfg.Meter, cfg.Log, s.current
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

// Now is the service's clock: what a window left open ends at.
func (s *Service) Now() time.Time { return s.now() }

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
