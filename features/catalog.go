// Package features keeps the list features in memory so that reads never
// touch the metadata table: a snapshot refreshed on an interval and after
// every local change, so gateway replicas converge within one interval. It
// also holds the feature operations built from the store's primitives
// (create a version, delete every version).
package features

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// id names a feature without building its key string.
type id struct{ entityType, name, version string }

type snapshot struct {
	byID  map[id]*store.Feature
	all   []*store.Feature // ordered by key
	taken time.Time
}

// Catalog is the in-memory view of the store's features.
type Catalog struct {
	store     store.Store
	snap      atomic.Pointer[snapshot]
	log       *slog.Logger
	refreshes metric.Int64Counter
}

// MaxRefreshInterval keeps replicas within the grace that deleted features
// are given before they may be re-created.
const MaxRefreshInterval = keys.RecreateGrace / 2

// New loads the features once; Run keeps them fresh. Its metrics go to mp
// (none when nil).
func New(ctx context.Context, s store.Store, log *slog.Logger, mp metric.MeterProvider) (*Catalog, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter("github.com/listgate/listgate/features")
	c := &Catalog{store: s, log: log}
	c.snap.Store(&snapshot{byID: map[id]*store.Feature{}, taken: time.Now()})
	var err error
	if c.refreshes, err = meter.Int64Counter("listgate.features.refreshes",
		metric.WithDescription("Reloads of the feature catalog, by outcome.")); err != nil {
		return nil, err
	}
	if _, err = meter.Float64ObservableGauge("listgate.features.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the feature catalog's snapshot."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(c.Age().Seconds())
			return nil
		})); err != nil {
		return nil, err
	}
	if err := c.Refresh(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Run refreshes the catalog every interval until ctx ends.
func (c *Catalog) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("feature catalog refresh failed; serving the previous snapshot", "err", err, "age", c.Age().String())
			}
		}
	}
}

// Refresh reloads every feature from the store.
func (c *Catalog) Refresh(ctx context.Context) error {
	taken := time.Now()
	fs, err := c.store.Features(ctx, "")
	if err != nil {
		c.refreshes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "error")))
		return fmt.Errorf("loading features: %w", err)
	}
	c.refreshes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "ok")))
	s := &snapshot{byID: make(map[id]*store.Feature, len(fs)), all: make([]*store.Feature, len(fs)), taken: taken}
	for i := range fs {
		f := &fs[i]
		s.byID[id{f.EntityType, f.Name, f.Version}] = f
		s.all[i] = f
	}
	c.snap.Store(s)
	return nil
}

// Age is how old the snapshot is.
func (c *Catalog) Age() time.Duration { return time.Since(c.snap.Load().taken) }

// Feature returns a feature, or a NOT_FOUND error naming it.
func (c *Catalog) Feature(entityType, name, version string) (*store.Feature, error) {
	if f, ok := c.snap.Load().byID[id{entityType, name, version}]; ok {
		return f, nil
	}
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("feature %s: %w", keys.FeatureKey(entityType, name, version), store.ErrNotFound)
}

// List returns the features of one entity type, or all when it is "".
func (c *Catalog) List(entityType string) []*store.Feature {
	all := c.snap.Load().all
	if entityType == "" {
		return all
	}
	var out []*store.Feature
	for _, f := range all {
		if f.EntityType == entityType {
			out = append(out, f)
		}
	}
	return out
}

// Create creates a feature.
func (c *Catalog) Create(ctx context.Context, f store.Feature) (store.Feature, error) {
	created, err := c.store.CreateFeature(ctx, f)
	if err != nil {
		return store.Feature{}, err
	}
	c.refreshAfterChange(ctx)
	return created, nil
}

// CreateVersion creates another version of an existing feature: the same
// value type, and the TTL and description of its newest version unless
// given.
func (c *Catalog) CreateVersion(ctx context.Context, entityType, name, version string, ttl *time.Duration, description *string) (store.Feature, error) {
	versions, err := c.versions(ctx, entityType, name)
	if err != nil {
		return store.Feature{}, err
	}
	if len(versions) == 0 {
		return store.Feature{}, fmt.Errorf("feature %s#%s: %w: create it with createListFeature first", entityType, name, store.ErrNotFound)
	}
	newest := versions[0]
	for _, v := range versions[1:] {
		if v.CreatedAt.After(newest.CreatedAt) {
			newest = v
		}
	}
	f := store.Feature{EntityType: entityType, Name: name, Version: version, ValueType: newest.ValueType, TTL: newest.TTL, Description: newest.Description}
	if ttl != nil {
		f.TTL = *ttl
	}
	if description != nil {
		f.Description = *description
	}
	return c.Create(ctx, f)
}

// Delete deletes every version of a feature and returns how many there were.
func (c *Catalog) Delete(ctx context.Context, entityType, name string) (int, error) {
	versions, err := c.versions(ctx, entityType, name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range versions {
		ok, err := c.store.DeleteFeature(ctx, entityType, name, v.Version)
		if err != nil {
			c.refreshAfterChange(ctx)
			return n, err
		}
		if ok {
			n++
		}
	}
	c.refreshAfterChange(ctx)
	return n, nil
}

// DeleteVersion deletes one version of a feature; false if it did not exist.
func (c *Catalog) DeleteVersion(ctx context.Context, entityType, name, version string) (bool, error) {
	ok, err := c.store.DeleteFeature(ctx, entityType, name, version)
	if err == nil {
		c.refreshAfterChange(ctx)
	}
	return ok, err
}

// versions reads a feature's versions from the store, not the snapshot:
// changes must see other replicas' changes.
func (c *Catalog) versions(ctx context.Context, entityType, name string) ([]store.Feature, error) {
	if err := keys.ValidateName("entity type", entityType); err != nil {
		return nil, err
	}
	if err := keys.ValidateName("feature name", name); err != nil {
		return nil, err
	}
	all, err := c.store.Features(ctx, entityType)
	if err != nil {
		return nil, err
	}
	var out []store.Feature
	for _, f := range all {
		if f.Name == name {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// refreshAfterChange makes a local change visible at once. A failure is
// only logged: the change itself succeeded, and Run retries.
func (c *Catalog) refreshAfterChange(ctx context.Context) {
	if err := c.Refresh(context.WithoutCancel(ctx)); err != nil {
		c.log.Warn("feature catalog refresh after a change failed", "err", err)
	}
}
