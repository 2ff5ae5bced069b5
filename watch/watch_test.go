package watch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/watch"
)

const (
	interval = 50 * time.Millisecond
	lateness = 2 * time.Second
)

// polls counts the reads of the watched lists.
type polls struct {
	store.Store
	n atomic.Int64
}

func (s *polls) Since(ctx context.Context, l store.List, from string, limit int) ([]store.Item, error) {
	s.n.Add(1)
	return s.Store.Since(ctx, l, from, limit)
}

type env struct {
	t    *testing.T
	s    *polls
	hub  *watch.Hub
	list store.List
}

var seq atomic.Int64

// eachBackend runs test on the embedded store and on Cassandra, with a hub
// of its own and a list of its own.
func eachBackend(t *testing.T, cfg func(*watch.Config), test func(t *testing.T, e *env)) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"embedded", func(t *testing.T) store.Store {
			s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"cassandra", func(t *testing.T) store.Store { return cqltest.Open(t, cqltest.Config(t)) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := &polls{Store: b.open(t)}
			f, err := s.CreateFeature(context.Background(), store.Feature{
				EntityType: fmt.Sprintf("w%d_%d", time.Now().UnixNano()%1e9, seq.Add(1)), Name: "f", ValueType: store.String, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			c := watch.Config{Store: s, Interval: interval, Lateness: lateness, MaxLists: 10, MaxCatchUp: 1000, Buffer: 100, Batch: 3,
				Tracer: tracenoop.NewTracerProvider().Tracer(""), Meter: metricnoop.NewMeterProvider().Meter(""), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if cfg != nil {
				cfg(&c)
			}
			hub, err := watch.New(c)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(hub.Close)
			test(t, &env{t: t, s: s, hub: hub, list: store.List{Feature: &f, EntityID: "u1"}})
		})
	}
}

func (e *env) add(ts time.Time, values ...string) {
	e.t.Helper()
	var items []store.NewItem
	for _, v := range values {
		items = append(items, store.NewItem{Timestamp: ts.UnixNano(), Value: []byte(v)})
	}
	if _, err := e.s.AddItems(context.Background(), e.list, items); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) subscribe(ctx context.Context, since *time.Time) *watch.Subscription {
	e.t.Helper()
	var s *int64
	if since != nil {
		ns := since.UnixNano()
		s = &ns
	}
	sub, err := e.hub.Subscribe(ctx, e.list, s)
	if err != nil {
		e.t.Fatal(err)
	}
	return sub
}

// receive reads n items, failing after wait, then checks that no more come
// within a few polls.
func receive(t *testing.T, sub *watch.Subscription, n int, wait time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.After(wait)
	for len(got) < n {
		select {
		case it, ok := <-sub.Items:
			if !ok {
				t.Fatalf("the subscription ended after %v (err %v)", got, sub.Err())
			}
			got = append(got, string(it.Value))
		case <-deadline:
			t.Fatalf("received %v within %v, want %d items", got, wait, n)
		}
	}
	select {
	case it := <-sub.Items:
		t.Fatalf("received %v, then %q as well", got, it.Value)
	case <-time.After(4 * interval):
	}
	return got
}

// Items added after a subscription are delivered once each, oldest first,
// several at one timestamp too; items there before are not; a list's
// subscriptions share one poller, whose polls stop with its last one.
func TestDelivery(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		now := time.Now()
		e.add(now.Add(-time.Second), "before")
		ctx, cancel := context.WithCancel(context.Background())
		a, b := e.subscribe(ctx, nil), e.subscribe(ctx, nil)
		e.add(now.Add(time.Millisecond), "x3", "x1", "x2") // one timestamp
		e.add(now, "first")
		e.add(now.Add(2*time.Millisecond), "last")
		// A poll reads at most 3 new items (Batch), then reads again.
		for _, sub := range []*watch.Subscription{a, b} {
			got := receive(t, sub, 5, 5*time.Second)
			if got[0] != "first" || got[4] != "last" || !slices.Equal(slices.Sorted(slices.Values(got[1:4])), []string{"x1", "x2", "x3"}) {
				t.Fatalf("received %v: want first, the three of one timestamp, last", got)
			}
		}
		// One poller: polls come once per interval, not twice.
		before := e.s.n.Load()
		time.Sleep(20 * interval)
		if n := e.s.n.Load() - before; n > 30 {
			t.Fatalf("%d polls in 20 intervals with two subscriptions of one list", n)
		}
		cancel()
		time.Sleep(2 * interval)
		stopped := e.s.n.Load()
		time.Sleep(5 * interval)
		if n := e.s.n.Load() - stopped; n != 0 {
			t.Fatalf("%d polls after the last subscription ended", n)
		}
	})
}

// The lateness rule: an item stamped within the window before the newest
// delivered is delivered; one stamped before it is not.
func TestLateness(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		sub := e.subscribe(context.Background(), nil)
		now := time.Now()
		e.add(now, "newest")
		receive(t, sub, 1, 5*time.Second)
		e.add(now.Add(-lateness/2), "late")
		e.add(now.Add(-2*lateness), "too late")
		if got := receive(t, sub, 1, 5*time.Second); got[0] != "late" {
			t.Fatalf("received %v", got)
		}
	})
}

// A subscription with since gets what was there from since on, then the
// new items; subscribing again with the last item's timestamp misses
// nothing.
func TestSince(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		base := time.Now().Add(-time.Hour)
		e.add(base.Add(-time.Second), "older")
		for i := range 5 {
			e.add(base.Add(time.Duration(i)*time.Second), fmt.Sprint("old", i))
		}
		since := base.Add(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		sub := e.subscribe(ctx, &since)
		if got := receive(t, sub, 4, 5*time.Second); !slices.Equal(got, []string{"old1", "old2", "old3", "old4"}) {
			t.Fatalf("catch-up %v", got)
		}
		last := time.Now()
		e.add(last, "new1")
		receive(t, sub, 1, 5*time.Second)
		cancel() // the client goes away…
		e.add(time.Now(), "while away")
		// …and comes back with the timestamp of the last item it got.
		sub = e.subscribe(context.Background(), &last)
		got := receive(t, sub, 2, 5*time.Second)
		if !slices.Equal(got, []string{"new1", "while away"}) {
			t.Fatalf("after subscribing again: %v", got)
		}
		e.add(time.Now(), "new2")
		if got := receive(t, sub, 1, 5*time.Second); got[0] != "new2" {
			t.Fatalf("then %v", got)
		}
	})
}

// A subscription whose client does not read falls behind its buffer and
// ends with ErrTooSlow; the hub's bounds refuse with clear errors; Close
// ends every subscription.
func TestBounds(t *testing.T) {
	eachBackend(t, func(c *watch.Config) { c.Buffer = 2; c.MaxLists = 1; c.MaxCatchUp = 2 }, func(t *testing.T, e *env) {
		slow := e.subscribe(context.Background(), nil)
		now := time.Now()
		e.add(now, "a", "b", "c", "d")
		time.Sleep(10 * interval)
		n := 0
		for range slow.Items {
			n++
		}
		if !errors.Is(slow.Err(), watch.ErrTooSlow) || n > 3 { // the buffer, and one on its way out
			t.Fatalf("a client that does not read: %d items, then %v", n, slow.Err())
		}
		other := store.List{Feature: e.list.Feature, EntityID: "u2"}
		held := e.subscribe(context.Background(), nil) // u1: the one list allowed
		if _, err := e.hub.Subscribe(context.Background(), other, nil); !errors.Is(err, errkind.Unavailable) {
			t.Fatalf("a second list past --max-watched-lists: %v", err)
		}
		since := now.Add(-time.Minute)
		far := e.subscribe(context.Background(), &since)
		for range far.Items {
		}
		if !errors.Is(far.Err(), errkind.Invalid) {
			t.Fatalf("a catch-up past its bound: %v", far.Err())
		}
		e.hub.Close()
		select {
		case _, ok := <-held.Items:
			if ok {
				t.Fatal("an item after Close")
			}
		case <-time.After(time.Second):
			t.Fatal("Close did not end the subscription")
		}
		if _, err := e.hub.Subscribe(context.Background(), e.list, nil); !errors.Is(err, errkind.Unavailable) {
			t.Fatalf("a subscription after Close: %v", err)
		}
	})
}

// slowFirst answers the reads of the list "slow" only after a while.
type slowFirst struct{ store.Store }

func (s slowFirst) Since(ctx context.Context, l store.List, from string, limit int) ([]store.Item, error) {
	if l.EntityID == "slow" {
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.Since(ctx, l, from, limit)
}

// A list whose first read is slow holds up no subscription to another
// list.
func TestSlowFirstReadHoldsNoOneUp(t *testing.T) {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.CreateFeature(context.Background(), store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	hub, err := watch.New(watch.Config{Store: slowFirst{s}, Interval: interval, Tracer: tracenoop.NewTracerProvider().Tracer(""),
		Meter: metricnoop.NewMeterProvider().Meter(""), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	ctx := context.Background()
	list := func(id string) store.List { return store.List{Feature: &f, EntityID: id} }
	if _, err := hub.Subscribe(ctx, list("fast"), nil); err != nil {
		t.Fatal(err)
	}
	go hub.Subscribe(ctx, list("slow"), nil)
	time.Sleep(100 * time.Millisecond) // the slow list's first read is under way
	for _, id := range []string{"fast", "other"} {
		began := time.Now()
		if _, err := hub.Subscribe(ctx, list(id), nil); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > time.Second {
			t.Fatalf("a subscription to %s took %v while another list's first read was slow", id, took)
		}
	}
}
