// Package features keeps the list features in memory so that lookups of
// known features never touch the metadata table: a snapshot refreshed on an
// interval and after every local change. A lookup that misses reads the
// features of its entity type again before it answers, so a feature
// created through any replica is found through every other at once; a
// miss is remembered for a moment, so that lookups of names that do not
// exist cost the store little. The features are served only while the
// snapshot is younger than the staleness bound every replica of a fleet
// shares: what deleted and re-created features rely on. It also holds the
// feature operations built from the store's primitives (create a version,
// delete every version).
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
	"github.com/hashicorp/golang-lru/v2/simplelru"
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
	staleness time.Duration

	mu      sync.Mutex
	next    map[string]*readThrough       // by entity type ("": all), the reads misses wait for, not started yet
	reading map[string]bool               // entity types with a read running
	missing *simplelru.LRU[id, time.Time] // features looked up and not found, until when to believe it
}

// readThrough is one refresh that lookups which missed wait for.
type readThrough struct {
	done chan struct{}
	err  error
}

// DefaultStaleness is how old a snapshot may be and still be served, by
// default (--feature-staleness).
const DefaultStaleness = time.Minute

// ClockSkew is how far apart the clocks of a fleet's gateways may be for
// the re-creation rule: a feature re-created with another value type or
// cap waits the staleness bound and this past its deletion.
const ClockSkew = 5 * time.Second

const (
	// readThroughGap spaces the reads that misses of one entity type
	// cause, so that a flood of lookups of unknown features costs the
	// store at most one metadata read per gap and type.
	readThroughGap = 10 * time.Millisecond
	// readThroughTimeout bounds one such read, whoever waits for it.
	readThroughTimeout = 5 * time.Second
	// missFor is how long a miss is believed: a feature created through
	// another replica is found here this long after a miss, at most.
	missFor = time.Second
	// maxMisses bounds the misses remembered.
	maxMisses = 10_000
	// maxHintCandidates bounds the features a not-found error weighs.
	maxHintCandidates = 1000
)

// New loads the features once; Run keeps them fresh. Its metrics go to mp
// (none when nil). The snapshot is served while younger than
// DefaultStaleness; SetStaleness changes that.
func New(ctx context.Context, s store.Store, log *slog.Logger, mp metric.MeterProvider) (*Catalog, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter("github.com/listgate/listgate/features")
	missing, _ := simplelru.NewLRU[id, time.Time](maxMisses, nil)
	c := &Catalog{store: s, log: log, now: time.Now, staleness: DefaultStaleness,
		next: map[string]*readThrough{}, reading: map[string]bool{}, missing: missing}
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
			if err := c.refreshSafely(ctx, ""); err != nil && ctx.Err() == nil {
				c.log.Warn("feature catalog refresh failed; serving the previous snapshot", "err", err, "age", c.Age())
			}
		}
	}
}

// SetStaleness sets how old a snapshot may be and still be served: the
// bound every replica of a fleet shares (--feature-staleness).
func (c *Catalog) SetStaleness(d time.Duration) { c.staleness = d }

// Staleness is how old a snapshot may be and still be served.
func (c *Catalog) Staleness() time.Duration { return c.staleness }

// RecreateWait is how long after its deletion a feature may be created
// again with another value type or cap: until every gateway has seen the
// deletion.
func (c *Catalog) RecreateWait() time.Duration { return c.staleness + ClockSkew }

// Refresh reloads every feature from the store. A refresh that ends after
// one that started later is dropped: snapshots never go backwards.
func (c *Catalog) Refresh(ctx context.Context) error {
	return c.refresh(ctx, "")
}

// refresh reloads the features of one entity type ("": all). One type's
// are merged into the snapshot, which keeps its age: only a whole refresh
// makes it younger.
func (c *Catalog) refresh(ctx context.Context, entityType string) error {
	taken := c.now()
	fs, err := c.store.Features(ctx, entityType)
	if err != nil {
		c.refreshes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "error")))
		return fmt.Errorf("loading features: %w", err)
	}
	c.refreshes.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "ok")))
	for {
		cur := c.snap.Load()
		if entityType == "" && !cur.taken.Before(taken) {
			return nil
		}
		next := &snapshot{byID: make(map[id]*store.Feature, len(cur.byID)+len(fs)), taken: taken, generation: cur.generation + 1}
		if entityType != "" {
			next.taken = cur.taken
			for _, f := range cur.all {
				if f.EntityType != entityType {
					next.all = append(next.all, f)
				}
			}
		}
		for i := range fs {
			next.all = append(next.all, &fs[i])
		}
		slices.SortFunc(next.all, func(a, b *store.Feature) int { return strings.Compare(a.Key(), b.Key()) })
		for _, f := range next.all {
			next.byID[id{f.EntityType, f.Name, f.Version}] = f
		}
		if c.snap.CompareAndSwap(cur, next) {
			return nil
		}
	}
}

// refreshSafely is Refresh in the catalog's own goroutines, where a panic
// (in a store's driver, say) would end the process: it is logged and
// returned as an error; the previous snapshot stays.
func (c *Catalog) refreshSafely(ctx context.Context, entityType string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("panic refreshing the feature catalog", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("refreshing the feature catalog: panic: %v", p)
		}
	}()
	return c.refresh(ctx, entityType)
}

// Age is how old the snapshot is.
func (c *Catalog) Age() time.Duration { return c.now().Sub(c.snap.Load().taken) }

// Known returns a feature the snapshot holds, or nil; it never reads the
// store.
func (c *Catalog) Known(entityType, name, version string) *store.Feature {
	return c.snap.Load().byID[id{entityType, name, version}]
}

// Generation changes whenever the snapshot does.
func (c *Catalog) Generation() uint64 { return c.snap.Load().generation }

// Feature returns a feature, or a NOT_FOUND error naming it. A feature the
// snapshot lacks is looked up again, with the features of its entity type
// read after the call began, so that one created through another replica
// is found; a miss is believed for missFor. UNAVAILABLE while the snapshot
// is older than the staleness bound.
func (c *Catalog) Feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	if err := c.Fresh(); err != nil {
		return nil, err
	}
	key := id{entityType, name, version}
	if f, ok := c.snap.Load().byID[key]; ok {
		return f, nil
	}
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return nil, err
	}
	c.mu.Lock()
	until, missed := c.missing.Get(key)
	c.mu.Unlock()
	if !missed || c.now().After(until) {
		if err := c.readThrough(ctx, entityType); err != nil {
			return nil, fmt.Errorf("feature %s: %w", keys.FeatureKey(entityType, name, version), err)
		}
		if f, ok := c.snap.Load().byID[key]; ok {
			return f, nil
		}
		c.mu.Lock()
		c.missing.Add(key, c.now().Add(missFor))
		c.mu.Unlock()
	}
	return nil, fmt.Errorf("feature %s: %w%s", keys.FeatureKey(entityType, name, version), errkind.NotFound, c.suggest(entityType, name, version))
}

// forget drops what misses were remembered: a feature created here is
// found at once.
func (c *Catalog) forget() {
	c.mu.Lock()
	c.missing.Purge()
	c.mu.Unlock()
}

// suggest names the features closest to one that does not exist, and how
// to create it: among the features of its entity type, those whose name
// is a typo away (every version of the same name is nearest), or, when
// the type has none, the entity types a typo away. It weighs
// maxHintCandidates features at most.
func (c *Catalog) suggest(entityType, name, version string) string {
	type near struct {
		key  string
		dist int
	}
	var close []near
	all := c.snap.Load().all
	types := map[string]bool{}
	weighed := 0
	for _, f := range all {
		if f.EntityType != entityType {
			types[f.EntityType] = true
			continue
		}
		if weighed++; weighed > maxHintCandidates {
			break
		}
		if f.Name == name {
			close = append(close, near{f.Key(), levenshtein.ComputeDistance(version, f.Version)})
		} else if d := levenshtein.ComputeDistance(name, f.Name); d <= max(2, len(name)/4) {
			close = append(close, near{f.Key(), d})
		}
	}
	if weighed == 0 {
		for t := range types {
			if weighed++; weighed > maxHintCandidates {
				break
			}
			if d := levenshtein.ComputeDistance(entityType, t); d <= max(2, len(entityType)/4) {
				close = append(close, near{"entity type " + t, d})
			}
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

// Fresh reports whether the snapshot is recent enough to serve: an
// UNAVAILABLE error when the store has not answered a refresh for the
// staleness bound. Past it, a feature deleted or created again through
// another replica could be served as it was.
func (c *Catalog) Fresh() error {
	if age := c.Age(); age > c.staleness {
		return fmt.Errorf("%w: the feature catalog was last read from the store %s ago, more than the %s a gateway may serve it for (--feature-staleness: a feature deleted elsewhere could still be served); lists are served again once the store answers",
			errkind.Refused, age.Round(time.Second), c.staleness)
	}
	return nil
}

// readThrough waits for a read of an entity type's features ("": all)
// that starts after it was called. Calls that come while none has started
// share the next one; one runs at a time per type, readThroughGap apart.
func (c *Catalog) readThrough(ctx context.Context, entityType string) error {
	c.mu.Lock()
	r := c.next[entityType]
	if r == nil {
		r = &readThrough{done: make(chan struct{})}
		c.next[entityType] = r
		if !c.reading[entityType] {
			c.reading[entityType] = true
			go c.readThroughLoop(entityType)
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

func (c *Catalog) readThroughLoop(entityType string) {
	for {
		c.mu.Lock()
		r := c.next[entityType]
		delete(c.next, entityType)
		if r == nil {
			delete(c.reading, entityType)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), readThroughTimeout)
		r.err = c.refreshSafely(ctx, entityType)
		cancel()
		close(r.done)
		time.Sleep(readThroughGap)
	}
}

// Features returns the features of one entity type, or all when it is "",
// from a read of the store that began after the call.
func (c *Catalog) Features(ctx context.Context, entityType string) ([]*store.Feature, error) {
	if err := c.readThrough(ctx, entityType); err != nil {
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

// Count is how many features of one entity type, or of all when it is "",
// the snapshot holds: what a list of them is priced by before it runs.
func (c *Catalog) Count(entityType string) int {
	all := c.snap.Load().all
	if entityType == "" {
		return len(all)
	}
	n := 0
	for _, f := range all {
		if f.EntityType == entityType {
			n++
		}
	}
	return n
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
// it is made from; nil keeps that one's. A version is live as the one it
// is made from.
type VersionChanges struct {
	TTL         *time.Duration
	Description *string
	MaxItems    *int
}

// Apply makes version of base, with the changes.
func (ch VersionChanges) Apply(base store.Feature, version string) store.Feature {
	f := store.Feature{EntityType: base.EntityType, Name: base.Name, Version: version, ValueType: base.ValueType,
		TTL: base.TTL, Description: base.Description, MaxItems: base.MaxItems, Live: base.Live}
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

// SetLive makes one version of a feature live or not.
func (c *Catalog) SetLive(ctx context.Context, entityType, name, version string, live bool) (store.Feature, error) {
	f, err := c.store.SetFeatureLive(ctx, entityType, name, version, live)
	if err != nil {
		return store.Feature{}, err
	}
	c.refreshAfterChange(ctx)
	return f, nil
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
	c.forget()
	if err := c.Refresh(context.WithoutCancel(ctx)); err != nil {
		c.log.Warn("feature catalog refresh after a change failed", "err", err)
	}
}
