package features_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// countingStore counts metadata reads.
type countingStore struct {
	store.Store
	featureReads atomic.Int64
}

func (s *countingStore) Features(ctx context.Context, entityType string) ([]store.Feature, error) {
	s.featureReads.Add(1)
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

func TestLookupsDoNotReadTheStore(t *testing.T) {
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
		if _, err := c.Feature("user", "f", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Feature("user", "missing", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("missing feature: err = %v, want ErrNotFound", err)
		}
		c.List("user")
	}
	if n := s.featureReads.Load() - reads; n != 0 {
		t.Fatalf("%d metadata reads for 300 lookups; want 0", n)
	}
}

// A change made through one replica's catalog is visible there at once and
// on another replica within one refresh interval.
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
	const interval = 50 * time.Millisecond
	go b.Run(ctx, interval)

	if _, err := a.Create(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Feature("user", "f", ""); err != nil {
		t.Fatalf("the creating replica does not see its feature: %v", err)
	}
	waitFor(t, 20*interval, func() bool { _, err := b.Feature("user", "f", ""); return err == nil })

	if n, err := a.Delete(ctx, "user", "f"); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	if _, err := a.Feature("user", "f", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the deleting replica still sees the feature: %v", err)
	}
	waitFor(t, 20*interval, func() bool { _, err := b.Feature("user", "f", ""); return errors.Is(err, store.ErrNotFound) })
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
