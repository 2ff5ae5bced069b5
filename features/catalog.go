// Package features keeps the list features in memory so that lookups of
// known features never touch the metadata table: a snapshot refreshed on an
// interval and after every local change. A lookup that misses reads the
// metadata again before it answers, so a feature created through any
// replica is found through every other at once. Writes are refused while
// the snapshot is older than the bound that deleted features rely on. It
// also holds the feature operations built from the store's primitives
// (create a version, delete every version).
package features

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agnivade/levenshtein"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// id names a feature without building its key string.
type id struct{ entityType, name, version string }

type snapshot struct {
	byID       map[id]*store.Feature
	all        []*store.Feature // ordered by key
	taken      time.Time
	generation uint64 // one more than the snapshot's before it
}

// Catalog is the in-memory view of the store's features.
type Catalog struct {
	store     store.Store
	snap      atomic.Pointer[snapshot]
	log       *slog.Logger
	refreshes metric.Int64Counter
	now       func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	next    *readThrough // the read misses wait for; not started yet
	reading bool         // a read-through refresh is running
}

// readThrough is one refresh that lookups which missed wait for.
type readThrough struct {
	done chan struct{}
	err  error
}

const (
	// MaxRefreshInterval bounds --feature-refresh: how long a replica may
	// go on with a feature deleted, or created again, through another.
	MaxRefreshInterval = 150 * time.Second
	// MaxWriteAge is the oldest a snapshot may be for writes: a replica
	// that cannot refresh must not keep writing for long under a feature
	// deleted elsewhere.
	MaxWriteAge = 4 * time.Minute
	// readThroughGap spaces the refreshes that misses cause, so that a
	// flood of lookups of unknown features costs the store at most one
	// metadata read per gap.
	readThroughGap = 10 * time.Millisecond
	// readThroughTimeout bounds one such refresh, whoever waits for it.
	readThroughTimeout = 5 * time.Second
)

// New loads the features once; Run keeps them fresh. Its metrics go to mp
// (none when nil).
func New(ctx context.Context, s store.Store, log *slog.Logger, mp metric.MeterProvider) (*Catalog, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter("github.com/listgate/listgate/features")
	c := &Catalog{store: s, log: log, now: time.Now}
	c.snap.Store(&snapshot{byID: map[id]*store.Feature{}, taken: c.now()})
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
			if err := c.refreshSafely(ctx); err != nil && ctx.Err() == nil {
				c.log.Warn("feature catalog refresh failed; serving the previous snapshot", "err", err, "age", c.Age().String())
			}
		}
	}
}

// Refresh reloads every feature from the store. A refresh that ends after
// one that started later is dropped: snapshots never go backwards.
func (c *Catalog) Refresh(ctx context.Context) error {
	taken := c.now()
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
	for {
		cur := c.snap.Load()
		s.generation = cur.generation + 1
		if !cur.taken.Before(taken) || c.snap.CompareAndSwap(cur, s) {
			return nil
		}
	}
}

// refreshSafely is Refresh in the catalog's own goroutines, where a panic
// (in a store's driver, say) would end the process: it is logged and
// returned as an error; the previous snapshot stays.
func (c *Catalog) refreshSafely(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic refreshing the feature catalog", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("refreshing the feature catalog: panic: %v", p)
		}
	}()
	return c.Refresh(ctx)
}

// Known returns a feature the snapshot holds, or nil; it never reads the
// store.
func (c *Catalog) Known(entityType, name, version string) *store.Feature {
	return c.snap.Load().byID[id{entityType, name, version}]
}

// Generation changes whenever the snapshot does.
func (c *Catalog) Generation() uint64 { return c.snap.Load().generation }

// Age is how old the snapshot is.
func (c *Catalog) Age() time.Duration { return c.now().Sub(c.snap.Load().taken) }

// Feature returns a feature, or a NOT_FOUND error naming it. A feature
// the snapshot lacks is looked up again in a snapshot taken after the call
// began, so that one created through another replica is found.
func (c *Catalog) Feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	if f, ok := c.snap.Load().byID[id{entityType, name, version}]; ok {
		return f, nil
	}
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return nil, err
	}
	if err := c.readThrough(ctx); err != nil {
		return nil, fmt.Errorf("feature %s: %w", keys.FeatureKey(entityType, name, version), err)
	}
	if f, ok := c.snap.Load().byID[id{entityType, name, version}]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("feature %s: %w%s", keys.FeatureKey(entityType, name, version), errkind.NotFound, c.suggest(entityType, name, version))
}

// suggest names the features closest to one that does not exist, and how
// to create it.
func (c *Catalog) suggest(entityType, name, version string) string {
	type near struct {
		key  string
		dist int
	}
	var close []near
	want := keys.FeatureKey(entityType, name, version)
	for _, f := range c.snap.Load().all {
		// Another entity type counts as far as a name typo; a version of the
		// same name is nearest.
		if d := levenshtein.ComputeDistance(want, f.Key()); d <= max(3, len(want)/4) || f.EntityType == entityType && f.Name == name {
			close = append(close, near{f.Key(), d})
		}
	}
	slices.SortFunc(close, func(a, b near) int { return cmp.Or(a.dist-b.dist, strings.Compare(a.key, b.key)) })
	var b strings.Builder
	for i, n := range close[:min(len(close), 3)] {
		if i == 0 {
			b.WriteString(" (did you mean ")
		} else {
			b.WriteString(" or ")
		}
		b.WriteString(n.key)
	}
	if b.Len() > 0 {
		b.WriteString("?)")
	}
	b.WriteString("; create a feature with createListFeature (listFeatures lists those there are)")
	return b.String()
}

// Fresh reports whether the snapshot is recent enough to write under: an
// UNAVAILABLE error when the store has not answered a refresh for
// MaxWriteAge.
func (c *Catalog) Fresh() error {
	if age := c.Age(); age > MaxWriteAge {
		return fmt.Errorf("%w: the feature catalog was last read from the store %s ago, more than the %s that writes allow (a feature deleted elsewhere could still be written); writes resume once the store answers",
			errkind.Refused, age.Round(time.Second), MaxWriteAge)
	}
	return nil
}

// readThrough waits for a refresh that starts after it was called. Calls
// that come while none has started share the next one; one runs at a time,
// readThroughGap apart.
func (c *Catalog) readThrough(ctx context.Context) error {
	c.mu.Lock()
	r := c.next
	if r == nil {
		r = &readThrough{done: make(chan struct{})}
		c.next = r
		if !c.reading {
			c.reading = true
			go c.readThroughLoop()
		}
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Catalog) readThroughLoop() {
	for {
		c.mu.Lock()
		r := c.next
		c.next = nil
		if r == nil {
			c.reading = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), readThroughTimeout)
		r.err = c.refreshSafely(ctx)
		cancel()
		close(r.done)
		time.Sleep(readThroughGap)
	}
}

// Features returns the features of one entity type, or all when it is "",
// from a snapshot taken after the call began.
func (c *Catalog) Features(ctx context.Context, entityType string) ([]*store.Feature, error) {
	if err := c.readThrough(ctx); err != nil {
		return nil, err
	}
	return c.List(entityType), nil
}

// List returns the features of one entity type, or all when it is "", from
// the snapshot.
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
func (c *Catalog) CreateVersion(ctx context.Context, entityType, name, version string, ch VersionChanges) (store.Feature, error) {
	versions, err := c.versions(ctx, entityType, name)
	if err != nil {
		return store.Feature{}, err
	}
	if len(versions) == 0 {
		return store.Feature{}, fmt.Errorf("feature %s#%s: %w: create it with createListFeature first", entityType, name, errkind.NotFound)
	}
	newest := versions[0]
	for _, v := range versions[1:] {
		if v.CreatedAt.After(newest.CreatedAt) {
			newest = v
		}
	}
	return c.Create(ctx, ch.Apply(newest, version))
}

// VersionChanges are what a new version of a feature changes of the one
// it is made from; nil keeps that one's.
type VersionChanges struct {
	TTL         *time.Duration
	Description *string
	MaxItems    *int
}

// Apply makes version of base, with the changes.
func (ch VersionChanges) Apply(base store.Feature, version string) store.Feature {
	f := store.Feature{EntityType: base.EntityType, Name: base.Name, Version: version, ValueType: base.ValueType,
		TTL: base.TTL, Description: base.Description, MaxItems: base.MaxItems}
	if ch.TTL != nil {
		f.TTL = *ch.TTL
	}
	if ch.Description != nil {
		f.Description = *ch.Description
	}
	if ch.MaxItems != nil {
		f.MaxItems = *ch.MaxItems
	}
	return f
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
