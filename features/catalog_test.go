package features_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// countingStore counts metadata reads.
type countingStore struct {
	store.Store
	featureReads atomic.Int64
	mu           sync.Mutex
	types        []string // the entity type of each read, "" for all
}

func (s *countingStore) Features(ctx context.Context, entityType string) ([]store.Feature, error) {
	s.featureReads.Add(1)
	s.mu.Lock()
	s.types = append(s.types, entityType)
	s.mu.Unlock()
	return s.Store.Features(ctx, entityType)
}

func newStore(t *testing.T) *countingStore {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &countingStore{Store: s}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestLookupsOfKnownFeaturesDoNotReadTheStore(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	reads := s.featureReads.Load()
	for range 100 {
		if _, err := c.Feature(ctx, "user", "f", ""); err != nil {
			t.Fatal(err)
		}
		c.List("user")
	}
	if n := s.featureReads.Load() - reads; n != 0 {
		t.Fatalf("%d metadata reads for 200 lookups; want 0", n)
	}
}

// A change made through one replica's catalog is visible there at once; on
// another, a created feature is found at once (a miss reads the store) and a
// deleted one is gone within one refresh interval.
func TestReplicasConverge(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	const interval = 50 * time.Millisecond
	b.Feature(ctx, "user", "f", "") // a miss before the create
	go b.Run(ctx, interval)

	if _, err := a.Create(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Feature(ctx, "user", "f", ""); err != nil {
		t.Fatalf("the creating replica does not see its feature: %v", err)
	}
	// Found at once by another replica, or, after a miss of its own,
	// within the second a miss is believed.
	if _, err := c.Feature(ctx, "user", "f", ""); err != nil {
		t.Fatalf("another replica does not see the feature at once: %v", err)
	}
	waitFor(t, 2*time.Second, func() bool { _, err := b.Feature(ctx, "user", "f", ""); return err == nil })

	if n, err := a.Delete(ctx, "user", "f"); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if _, err := a.Feature(ctx, "user", "f", ""); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("the deleting replica still sees the feature: %v", err)
	}
	waitFor(t, 20*interval, func() bool { _, err := b.Feature(ctx, "user", "f", ""); return errors.Is(err, errkind.NotFound) })
	if age := b.Age(); age > 10*interval {
		t.Fatalf("snapshot age %v with a %v interval", age, interval)
	}
}

func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Lookups that miss at once share a refresh, and each waits for one that
// started after it: a flood of unknown features costs few metadata reads.
func TestMissesShareARefresh(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	reads := s.featureReads.Load()
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if _, err := c.Feature(ctx, "user", "missing", ""); !errors.Is(err, errkind.NotFound) {
				t.Errorf("err = %v, want errkind.NotFound", err)
			}
		})
	}
	wg.Wait()
	if n := s.featureReads.Load() - reads; n < 1 || n > 20 {
		t.Fatalf("%d metadata reads for 200 concurrent misses; want 1 to 20", n)
	}
}

// slowStore holds its next metadata read until released, answering with
// what the store held when the read began.
type slowStore struct {
	store.Store
	hold    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (s *slowStore) Features(ctx context.Context, entityType string) ([]store.Feature, error) {
	fs, err := s.Store.Features(ctx, entityType)
	if s.hold.CompareAndSwap(true, false) {
		close(s.started)
		<-s.release
	}
	return fs, err
}

// A slow refresh that ends after a newer one does not bring back an older
// snapshot.
func TestSnapshotsNeverGoBackwards(t *testing.T) {
	s := &slowStore{Store: newStore(t), started: make(chan struct{}), release: make(chan struct{})}
	ctx := context.Background()
	c, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hold.Store(true)
	done := make(chan error)
	go func() { done <- c.Refresh(ctx) }() // reads no feature, then waits
	<-s.started
	if _, err := c.Create(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	close(s.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(c.List("user")) != 1 {
		t.Fatal("the older refresh replaced the newer snapshot: the created feature is gone")
	}
}

// failingStore fails metadata reads while down.
type failingStore struct {
	store.Store
	down atomic.Bool
}

func (s *failingStore) Features(ctx context.Context, entityType string) ([]store.Feature, error) {
	if s.down.Load() {
		return nil, errkind.Unavailable
	}
	return s.Store.Features(ctx, entityType)
}

// A catalog that cannot refresh refuses writes once its snapshot is older
// than deleted features allow, and accepts them again after a refresh.
func TestStaleCatalogIsNotServed(t *testing.T) {
	s := &failingStore{Store: newStore(t)}
	ctx := context.Background()
	c, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	var offset atomic.Int64
	features.SetClock(c, func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	if err := c.Fresh(); err != nil {
		t.Fatalf("a fresh catalog: %v", err)
	}
	s.down.Store(true)
	offset.Store(int64(c.Staleness() - time.Second))
	if err := c.Refresh(ctx); err == nil {
		t.Fatal("refresh from a store that is down succeeded")
	}
	if err := c.Fresh(); err != nil {
		t.Fatalf("just inside the bound: %v", err)
	}
	offset.Store(int64(c.Staleness() + time.Second))
	if err := c.Fresh(); !errors.Is(err, errkind.Unavailable) {
		t.Fatalf("past the bound: err = %v, want errkind.Unavailable", err)
	}
	s.down.Store(false)
	if err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Fresh(); err != nil {
		t.Fatalf("after a refresh: %v", err)
	}
}

// A feature that does not exist is answered with the closest ones, and how
// to create one.
func TestNotFoundSuggests(t *testing.T) {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, f := range []store.Feature{
		{EntityType: "user", Name: "reading_history", ValueType: store.String, TTL: time.Hour},
		{EntityType: "user", Name: "reading_history", Version: "v2", ValueType: store.String, TTL: time.Hour},
		{EntityType: "user", Name: "story_presented", ValueType: store.String, TTL: time.Hour},
		{EntityType: "story", Name: "user_has_read", ValueType: store.String, TTL: time.Hour},
	} {
		if _, err := s.CreateFeature(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	c, err := features.New(ctx, s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ entityType, name, version, says string }{
		{"user", "reading_histroy", "", "did you mean user#reading_history| or user#reading_history|v2?"},
		{"user", "reading_history", "v3", "did you mean user#reading_history|v2 or user#reading_history|?"},
		{"user", "clicks", "", "not found; create a feature with createListFeature"},
	} {
		_, err := c.Feature(ctx, tc.entityType, tc.name, tc.version)
		if !errors.Is(err, errkind.NotFound) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "createListFeature") {
			t.Errorf("%s#%s|%s: %v; want it to say %q", tc.entityType, tc.name, tc.version, err, tc.says)
		}
	}
}

// A miss reads the features of its entity type alone, and is believed for
// a moment: looking the same name up again reads nothing.
func TestMissesReadTheirEntityTypeOnce(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	c, err := features.New(ctx, s, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	reads := s.featureReads.Load()
	for range 100 {
		if _, err := c.Feature(ctx, "user", "missing", ""); !errors.Is(err, errkind.NotFound) {
			t.Fatalf("err = %v, want errkind.NotFound", err)
		}
	}
	if n := s.featureReads.Load() - reads; n != 1 {
		t.Fatalf("%d metadata reads for 100 misses of one name; want 1", n)
	}
	s.mu.Lock()
	last := s.types[len(s.types)-1]
	s.mu.Unlock()
	if last != "user" {
		t.Fatalf("a miss read the features of %q; want user's alone", last)
	}
}
