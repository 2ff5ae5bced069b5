// Package embedded is the list store on a local Pebble database: what
// `go run .` uses when no CQL cluster is configured. It keeps the semantics
// of the CQL store (proved by store/storetest), TTL included: an expired item
// is invisible at once and its bytes are reclaimed by a background sweep. It
// serves one process; Pebble locks its folder.
package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Feature layout (items: items.go). Identifiers never hold 0x00 (keys
// validates them), so it separates their parts.
//
//	f <entityType> 00 <name> 00 <version>  →  JSON featureRecord
const featurePrefix = 'f'

// Config says where the database lives and how to use it.
type Config struct {
	Dir string
	// SweepInterval is how often expired items are reclaimed; 0 disables
	// the background sweep (call Sweep instead).
	SweepInterval time.Duration
	Limits        store.Limits
	// Now is the clock used for TTLs; time.Now when nil.
	Now func() time.Time
	// MeterProvider takes the store's metrics (none when nil).
	MeterProvider metric.MeterProvider
	// RecreateWait is how long after its deletion a feature may be created
	// again with another value type or cap (store.CheckRecreate); 0:
	// store.DefaultRecreateWait.
	RecreateWait time.Duration
	// Existing makes Open fail when Dir holds no store, rather than make
	// one.
	Existing bool
	// FeedRetention is how long change records are kept (0:
	// DefaultFeedRetention).
	FeedRetention time.Duration
	// Log takes what Open could not make private in Dir (files.go), and
	// the lines it writes when it moves a folder of the old layout.
	Log *slog.Logger
	// LongScans is how many scans read past their first rows at once
	// (store.Turns); 0: half the cores.
	LongScans int
}

// Store is a store.Store on Pebble.
type Store struct {
	db     *pebble.DB
	cfg    Config
	now    func() time.Time
	mu     sync.Mutex // serializes feature metadata changes
	stop   chan struct{}
	done   sync.WaitGroup
	closed sync.Once
	rows   *store.RowMeter

	blockBytes atomic.Int64 // bytes of the blocks the scans read (countBlocks)
	turns      *store.Turns // the long scans'

	feed feedSeq // the change feed's numbering (feed.go)

	// liveMu orders the adds' commits against features made live: an add
	// holds it shared from deciding whether it records until its batch
	// has committed, SetFeatureLive holds it alone while it writes. So an
	// add that commits once a feature is made live records (LiveWait 0).
	liveMu sync.RWMutex
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database in cfg.Dir, its folders
// and files its user's alone.
func Open(cfg Config) (*Store, error) {
	tighten(cfg.Dir, cfg.Log)
	db, err := pebble.Open(cfg.Dir, &pebble.Options{FS: privateFiles, Logger: quietLogger{}, ErrorIfNotExists: cfg.Existing})
	if err != nil {
		if inUse := inUseError(cfg.Dir, err); inUse != nil {
			return nil, inUse
		}
		return nil, fmt.Errorf("opening the embedded store in %s: %w", cfg.Dir, err)
	}
	s := &Store{db: db, cfg: cfg, now: cfg.Now, stop: make(chan struct{}), turns: store.NewTurns(cfg.LongScans)}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Limits == (store.Limits{}) {
		s.cfg.Limits = store.DefaultLimits
	}
	if s.cfg.RecreateWait == 0 {
		s.cfg.RecreateWait = store.DefaultRecreateWait
	}
	if s.cfg.FeedRetention == 0 {
		s.cfg.FeedRetention = DefaultFeedRetention
	}
	if err := s.migrateItems(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.openFeed(); err != nil {
		db.Close()
		return nil, err
	}
	if cfg.MeterProvider != nil {
		if s.rows, err = store.NewRowMeter(cfg.MeterProvider); err != nil {
			db.Close()
			return nil, err
		}
	}
	if cfg.SweepInterval > 0 {
		s.done.Add(1)
		go s.sweepLoop(cfg.SweepInterval)
	}
	return s, nil
}

// InUseError is Open's error when the folder is held by another process,
// or by another Store of this one: Pebble locks it for one at a time.
type InUseError struct {
	Dir string
	PID int   // the holder's process id; 0 when it cannot be known
	Err error // Pebble's
}

func (e *InUseError) Error() string {
	switch {
	case e.PID == os.Getpid():
		return fmt.Sprintf("the data folder %s is in use by this process already", e.Dir)
	case e.PID > 0:
		return fmt.Sprintf("the data folder %s is in use by another listgate process (pid %d)", e.Dir, e.PID)
	}
	return fmt.Sprintf("the data folder %s is in use by another listgate process", e.Dir)
}

func (e *InUseError) Unwrap() error { return e.Err }

// inUseError returns an *InUseError when err is Pebble failing to lock dir,
// else nil. Pebble reports its own process's lock by message only, and
// another's by fcntl's bare EAGAIN (EACCES on some systems; an EACCES of a
// path is a folder this process may not write).
func inUseError(dir string, err error) error {
	var pathErr *fs.PathError
	switch {
	case strings.Contains(err.Error(), "lock held by current process"):
		return &InUseError{Dir: dir, PID: os.Getpid(), Err: err}
	case errors.As(err, &pathErr):
		return nil
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES):
		return &InUseError{Dir: dir, PID: lockHolder(filepath.Join(dir, "LOCK")), Err: err}
	}
	return nil
}

// Close stops the sweep and closes the database.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		close(s.stop)
		s.done.Wait()
		err = s.db.Close()
	})
	return err
}

// ExpiryCap is the latest expiry date kept: the same as Cassandra 5.0's.
func (s *Store) ExpiryCap() time.Time { return keys.ExpiryCap2106 }

// Limits are the bounds AddItems enforces.
func (s *Store) Limits() store.Limits { return s.cfg.Limits }

// Ready reports whether the database is open and answers.
func (s *Store) Ready(context.Context) error {
	select {
	case <-s.stop:
		return errors.New("embedded store is closed")
	default:
	}
	_, closer, err := s.db.Get([]byte{featurePrefix})
	if err == nil {
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("embedded store: %w", err)
	}
	return nil
}

// successor is the first key after every key starting with prefix.
func successor(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// source is how the reads of a list reach its rows.
func (s *Store) source(l store.List) store.Source {
	return store.Source{Scan: s.scanner(l), Fetch: s.fetcher(l)}
}

// Items reads one page of a list.
func (s *Store) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	return store.ReadPage(ctx, l, r, s.source(l))
}

// Since reads the items of a list from a key on, oldest first.
func (s *Store) Since(ctx context.Context, l store.List, from string, limit int) (store.SincePage, error) {
	return store.ReadSince(ctx, l, from, limit, s.scanner(l))
}

// Count counts a list's items in a window.
func (s *Store) Count(ctx context.Context, l store.List, w store.Window, maxRows int) (int, error) {
	return store.CountItems(ctx, l, w, maxRows, s.scanner(l))
}

// Histogram counts a list's items in each bucket of a window.
func (s *Store) Histogram(ctx context.Context, l store.List, b store.Buckets, maxRows int) ([]int, error) {
	return store.HistogramItems(ctx, l, b, maxRows, s.scanner(l))
}

// Find finds the newest item holding each value.
func (s *Store) Find(ctx context.Context, l store.List, values [][]byte, minTimestamp int64, maxRows int) ([]string, error) {
	return store.FindItems(ctx, l, values, minTimestamp, maxRows, s.source(l))
}

// AddItems writes the items and their sweep entries in one synced batch,
// with the range delete of a trim (store.ShouldTrim).
func (s *Store) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	now := s.now()
	writes, expired, err := store.PrepareAdd(l, items, now, s.ExpiryCap(), s.cfg.Limits)
	if err != nil {
		return store.AddResult{}, err
	}
	if len(writes) == 0 {
		return store.AddResult{Expired: expired}, nil
	}
	id := partition(l)
	b := s.db.NewBatch()
	defer b.Close()
	for _, w := range writes {
		if err := putItem(b, id, w.Key, uint64(now.Unix()+int64(w.TTL)), w.Value); err != nil {
			return store.AddResult{}, err
		}
	}
	if store.ShouldTrim(l.Feature, len(writes)) {
		// A trim is optional: a list past its cap reads right (reads rank),
		// and the next add trims it. One whose read fails leaves it.
		if top, err := store.NewestKeys(ctx, l, s.scanner(l)); err == nil {
			if boundary := store.TrimBoundary(l.Feature, top, writes); boundary != "" {
				// After the sets in the batch, so it drops the new items
				// past the cap too. Their sweep entries find nothing.
				if err := deleteItems(b, id, append(bytes.Clone(id), boundary...)); err != nil {
					return store.AddResult{}, err
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return store.AddResult{}, err // past its deadline, an add writes nothing
	}
	s.liveMu.RLock()
	defer s.liveMu.RUnlock()
	live, err := s.recordsAdds(l.Feature)
	if err != nil {
		return store.AddResult{}, err
	}
	if live {
		// The record goes in the same batch: numbered now, settled once this
		// commit, and every one numbered before it, has committed or failed.
		n, err := s.give(now)
		if err != nil {
			return store.AddResult{}, err
		}
		defer s.feed.done(n)
		if err := writeRecord(b, n, now, l, writes); err != nil {
			return store.AddResult{}, err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return store.AddResult{}, fmt.Errorf("adding list items: %w", err)
	}
	return store.AddResult{Added: len(writes), Expired: expired}, nil
}

// recordsAdds says whether an add to f records: f is live, or its stored
// record says it has been made live since f was read (a gateway's
// snapshot that has not seen the change yet). Call under liveMu, shared.
func (s *Store) recordsAdds(f *store.Feature) (bool, error) {
	if f.Live {
		return true, nil
	}
	rec, exists, err := s.readFeature(featureKey(f.EntityType, f.Name, f.Version))
	if err != nil {
		return false, fmt.Errorf("adding list items: %w", err)
	}
	return exists && rec.DeletedAt.IsZero() && rec.CreatedAt.Equal(f.CreatedAt) && !rec.NotLive, nil
}

// RemoveValues deletes the items of a window holding any of the values
// (store.RemoveMatching), a synced batch of up to removeBatch keys at a
// time.
func (s *Store) RemoveValues(ctx context.Context, l store.List, values [][]byte, w store.Window, maxRows int) (int, error) {
	id := partition(l)
	return store.RemoveMatching(ctx, l, values, w, maxRows, s.source(l), removeBatch, 1, func(ctx context.Context, ks []string) error {
		b := s.db.NewBatch()
		defer b.Close()
		for _, k := range ks {
			if err := deleteItem(b, append(bytes.Clone(id), k...)); err != nil {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("removing items by value: %w", err)
		}
		return nil
	})
}

// removeBatch bounds the keys one removal deletes in one batch.
const removeBatch = 1000

// RemoveAll deletes the list's key ranges.
func (s *Store) RemoveAll(_ context.Context, l store.List) error {
	if err := l.Validate(); err != nil {
		return err
	}
	id := partition(l)
	b := s.db.NewBatch()
	defer b.Close()
	if err := deleteItems(b, id, successor(id)); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("removing all list items: %w", err)
	}
	return nil
}

func (s *Store) sweepLoop(every time.Duration) {
	defer s.done.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_, _ = s.Sweep()
			_ = s.sweepFeed()
		}
	}
}

// featureRecord is a feature as stored, with its deletion marks.
type featureRecord struct {
	ValueType   store.ValueType `json:"valueType"`
	TTLSeconds  int64           `json:"ttlSeconds"`
	Description string          `json:"description,omitempty"`
	MaxItems    int             `json:"maxItems,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
	DeletedAt   time.Time       `json:"deletedAt,omitzero"`
	// NotLive is stored negated so that a record written before the flag
	// existed, without the field, reads as live, as every feature was then.
	NotLive   bool      `json:"notLive,omitempty"`
	LiveSince time.Time `json:"liveSince,omitzero"`
}

// feature is the record as a feature named by its key's parts.
func (rec featureRecord) feature(entityType, name, version string) store.Feature {
	return store.Feature{
		EntityType: entityType, Name: name, Version: version,
		ValueType: rec.ValueType, TTL: time.Duration(rec.TTLSeconds) * time.Second,
		Description: rec.Description, MaxItems: rec.MaxItems, CreatedAt: rec.CreatedAt,
		Live: !rec.NotLive, LiveSince: rec.LiveSince,
	}
}

func featureKey(entityType, name, version string) []byte {
	k := []byte{featurePrefix}
	k = append(k, entityType...)
	k = append(append(k, 0), name...)
	return append(append(k, 0), version...)
}

func (s *Store) readFeature(k []byte) (featureRecord, bool, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return featureRecord{}, false, nil
	}
	if err != nil {
		return featureRecord{}, false, err
	}
	defer closer.Close()
	var rec featureRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return featureRecord{}, false, fmt.Errorf("feature record %q: %w", k, err)
	}
	return rec, true, nil
}

func (s *Store) writeFeature(k []byte, rec featureRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.db.Set(k, v, pebble.Sync)
}

// CreateFeature stores a new feature. A deleted one is created again at
// once, and the items written under it are dropped with it (one range
// delete over every list of the feature, in the same batch).
func (s *Store) CreateFeature(_ context.Context, f store.Feature) (store.Feature, error) {
	now := s.now()
	if err := f.Validate(now, s.ExpiryCap()); err != nil {
		return store.Feature{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := featureKey(f.EntityType, f.Name, f.Version)
	old, exists, err := s.readFeature(k)
	if err != nil {
		return store.Feature{}, err
	}
	if exists && old.DeletedAt.IsZero() {
		return store.Feature{}, store.FeatureExists(f.Key())
	}
	if exists {
		if err := store.CheckRecreate(&store.Feature{ValueType: old.ValueType, MaxItems: old.MaxItems}, &f, old.DeletedAt, now, s.cfg.RecreateWait); err != nil {
			return store.Feature{}, err
		}
	}
	f.CreatedAt = now.Truncate(time.Millisecond).UTC()
	if exists && !f.CreatedAt.After(old.CreatedAt) {
		// Another feature, another list in the change feed: created at
		// once after its deletion, within the same millisecond, it still
		// comes after the one deleted.
		f.CreatedAt = old.CreatedAt.Add(time.Millisecond).UTC()
	}
	f.ItemsSince, f.LiveSince = 0, time.Time{}
	rec := featureRecord{ValueType: f.ValueType, TTLSeconds: int64(f.TTL / time.Second), Description: f.Description, MaxItems: f.MaxItems, CreatedAt: f.CreatedAt, NotLive: !f.Live}
	v, err := json.Marshal(rec)
	if err != nil {
		return store.Feature{}, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if exists {
		lists := append([]byte(f.Key()), 0)
		if err := deleteItems(b, lists, successor(lists)); err != nil {
			return store.Feature{}, err
		}
	}
	if err := b.Set(k, v, nil); err != nil {
		return store.Feature{}, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return store.Feature{}, fmt.Errorf("creating feature %s: %w", f.Key(), err)
	}
	return f, nil
}

// Features lists the live features, of one entity type or of all.
func (s *Store) Features(_ context.Context, entityType string) ([]store.Feature, error) {
	prefix := []byte{featurePrefix}
	if entityType != "" {
		if err := keys.ValidateName("entity type", entityType); err != nil {
			return nil, err
		}
		prefix = append(append(prefix, entityType...), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: successor(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []store.Feature
	for ok := it.First(); ok; ok = it.Next() {
		parts := bytes.SplitN(it.Key()[1:], []byte{0}, 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("feature key %q: malformed", it.Key())
		}
		var rec featureRecord
		if err := json.Unmarshal(it.Value(), &rec); err != nil {
			return nil, fmt.Errorf("feature record %q: %w", it.Key(), err)
		}
		if !rec.DeletedAt.IsZero() {
			continue
		}
		out = append(out, rec.feature(string(parts[0]), string(parts[1]), string(parts[2])))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, it.Error()
}

// DeleteFeature marks one version deleted; its items are left to expire.
func (s *Store) DeleteFeature(_ context.Context, entityType, name, version string) (bool, error) {
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := featureKey(entityType, name, version)
	rec, exists, err := s.readFeature(k)
	if err != nil || !exists || !rec.DeletedAt.IsZero() {
		return false, err
	}
	rec.DeletedAt = s.now().Truncate(time.Millisecond).UTC()
	if err := s.writeFeature(k, rec); err != nil {
		return false, fmt.Errorf("deleting feature %s: %w", keys.FeatureKey(entityType, name, version), err)
	}
	return true, nil
}

// SetFeatureLive makes a feature live or not; made live, it records when.
func (s *Store) SetFeatureLive(_ context.Context, entityType, name, version string, live bool) (store.Feature, error) {
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return store.Feature{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := featureKey(entityType, name, version)
	rec, exists, err := s.readFeature(k)
	if err != nil {
		return store.Feature{}, err
	}
	if !exists || !rec.DeletedAt.IsZero() {
		return store.Feature{}, fmt.Errorf("feature %s: %w", keys.FeatureKey(entityType, name, version), errkind.NotFound)
	}
	if rec.NotLive == !live {
		return rec.feature(entityType, name, version), nil
	}
	rec.NotLive = !live
	if live {
		rec.LiveSince = store.NextLiveSince(s.now(), rec.LiveSince)
	}
	s.liveMu.Lock() // no add between its decision and its commit (AddItems)
	err = s.writeFeature(k, rec)
	s.liveMu.Unlock()
	if err != nil {
		return store.Feature{}, fmt.Errorf("setting feature %s live: %w", keys.FeatureKey(entityType, name, version), err)
	}
	return rec.feature(entityType, name, version), nil
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
