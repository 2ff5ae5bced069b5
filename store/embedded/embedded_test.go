package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/storetest"
)

func open(t testing.TB, dir string, now func() time.Time) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(embedded.Config{Dir: dir, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.RunWith(t, func(t *testing.T, now func() time.Time, opts storetest.Options) store.Store {
		s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Now: now, FeedRetention: opts.FeedRetention})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// Expired items are invisible at once; the sweep reclaims them and only them.
func TestSweepReclaimsExpiredItems(t *testing.T) {
	var offset time.Duration
	s := open(t, t.TempDir(), func() time.Time { return time.Now().Add(offset) })
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	now := time.Now()
	if _, err := s.AddItems(ctx, l, []store.NewItem{{Timestamp: now.UnixNano(), Value: []byte("a")}, {Timestamp: now.UnixNano(), Value: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(); err != nil || n != 0 {
		t.Fatalf("Sweep before expiry = %d, %v", n, err)
	}
	// Half an hour on, "b" is added again at a later timestamp.
	offset = 30 * time.Minute
	if _, err := s.AddItems(ctx, l, []store.NewItem{{Timestamp: now.Add(offset).UnixNano(), Value: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	offset = time.Hour + time.Second
	for _, step := range []string{"before the sweep", "after the sweep"} {
		p, err := s.Items(ctx, l, store.Range{Limit: 10})
		if err != nil || len(p.Items) != 1 || p.Items[0].Timestamp != now.Add(30*time.Minute).UnixNano() {
			t.Fatalf("Items %s = %+v, %v; want only the later b", step, p, err)
		}
		if step == "before the sweep" {
			if n, err := s.Sweep(); err != nil || n != 2 {
				t.Fatalf("Sweep after the first items expired = %d, %v; want 2", n, err)
			}
		}
	}
	if n, err := s.Sweep(); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0", n, err)
	}
}

// A sweep after a long downtime reclaims every expired item, in bounded
// batches.
func TestSweepInBatches(t *testing.T) {
	var offset time.Duration
	s := open(t, t.TempDir(), func() time.Time { return time.Now().Add(offset) })
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for e := range 5 {
		items := make([]store.NewItem, 500)
		for i := range items {
			items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: []byte("v")}
		}
		if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: fmt.Sprint("u", e)}, items); err != nil {
			t.Fatal(err)
		}
	}
	offset = 2 * time.Hour
	if n, err := s.Sweep(); err != nil || n != 2500 {
		t.Fatalf("Sweep = %d, %v; want 2500", n, err)
	}
	if n, err := s.Sweep(); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want 0", n, err)
	}
}

// Data survives closing and reopening the folder.
func TestPersistent(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := embedded.Open(embedded.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: "u1"}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, nil)
	fs, err := s.Features(ctx, "")
	if err != nil || len(fs) != 1 {
		t.Fatalf("Features after reopen = %v, %v", fs, err)
	}
	p, err := s.Items(ctx, store.List{Feature: &fs[0], EntityID: "u1"}, store.Range{Limit: 10})
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("Items after reopen = %+v, %v", p, err)
	}
}

// A folder open in one Store cannot be opened by another: the error says
// so in words, not as Pebble's lock error, and names the holder.
func TestOpenTwiceSaysTheFolderIsInUse(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, nil)
	_, err := embedded.Open(embedded.Config{Dir: dir})
	var inUse *embedded.InUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || inUse.Dir != dir {
		t.Fatalf("opening the folder again: %#v", err)
	}
	if want := "the data folder " + dir + " is in use by this process already"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// A feature stored before the live flag existed, its record without the
// field, reads as live: an upgrade ends no subscription.
func TestFeatureOfAnEarlierReleaseIsLive(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	created := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	if err := s.PutFeatureRecord("user", "old", "", []byte(`{"valueType":"STRING","ttlSeconds":3600,"createdAt":"`+created+`"}`)); err != nil {
		t.Fatal(err)
	}
	fs, err := s.Features(context.Background(), "user")
	if err != nil || len(fs) != 1 || !fs[0].Live || !fs[0].LiveSince.IsZero() {
		t.Fatalf("Features = %+v, %v; want one, live since its creation", fs, err)
	}
}
