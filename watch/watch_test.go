package watch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/watch"
)

type env struct {
	t    *testing.T
	s    store.Store
	hub  *watch.Hub
	list store.List
}

var seq atomic.Int64

// eachBackend runs test on the embedded store and on Cassandra, with a hub
// of its own and a list of its own.
func eachBackend(t *testing.T, cfg func(*watch.Config), test func(t *testing.T, e *env)) {
	eachBackendLimited(t, store.DefaultLimits, cfg, test)
}

// eachBackendLimited is eachBackend with stores that take adds within
// limits.
func eachBackendLimited(t *testing.T, limits store.Limits, cfg func(*watch.Config), test func(t *testing.T, e *env)) {
	for _, b := range backends(limits) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b.open(t), cfg)
			test(t, e)
		})
	}
}

type backend struct {
	name string
	open func(t *testing.T) store.Store
}

// backends opens each store; on Cassandra each open is a session of its
// own, as another gateway's would be.
func backends(limits store.Limits) []backend {
	return []backend{
		{"embedded", func(t *testing.T) store.Store {
			s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Limits: limits})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"cassandra", func(t *testing.T) store.Store {
			c := cqltest.Config(t)
			c.Feed = cql.FeedConfig{Shards: 4, Poll: 50 * time.Millisecond, Retention: 10 * time.Minute}
			c.Limits = limits
			return cqltest.Open(t, c)
		}},
	}
}

func newEnv(t *testing.T, s store.Store, cfg func(*watch.Config)) *env {
	f := feature(t, s, 0)
	c := watch.Config{Store: s, MaxLists: 10, MaxCatchUp: 100_000, Tick: 20 * time.Millisecond, Meter: metricnoop.NewMeterProvider().Meter("")}
	if cfg != nil {
		cfg(&c)
	}
	hub, err := watch.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	return &env{t: t, s: s, hub: hub, list: store.List{Feature: f, EntityID: "u1"}}
}

func feature(t *testing.T, s store.Store, maxItems int) *store.Feature {
	f, err := s.CreateFeature(context.Background(), store.Feature{
		EntityType: fmt.Sprintf("w%d_%d", time.Now().UnixNano()%1e9, seq.Add(1)), Name: "f", ValueType: store.String, TTL: 2 * time.Hour, MaxItems: maxItems, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	return &f
}

func (e *env) add(l store.List, ts time.Time, values ...string) {
	e.t.Helper()
	var items []store.NewItem
	for _, v := range values {
		items = append(items, store.NewItem{Timestamp: ts.UnixNano(), Value: []byte(v)})
	}
	if _, err := e.s.AddItems(context.Background(), l, items); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) subscribe(ctx context.Context, l store.List, since *time.Time) *watch.Subscription {
	e.t.Helper()
	var start watch.Start
	if since != nil {
		ns := since.UnixNano()
		start.Since = &ns
	}
	sub, err := e.hub.Subscribe(ctx, l, start)
	if err != nil {
		e.t.Fatal(err)
	}
	return sub
}

func (e *env) subscribeAfter(ctx context.Context, l store.List, after store.Position) *watch.Subscription {
	e.t.Helper()
	sub, err := e.hub.Subscribe(ctx, l, watch.Start{After: &after})
	if err != nil {
		e.t.Fatal(err)
	}
	return sub
}

// receive reads n items, failing past wait.
func receive(t *testing.T, sub *watch.Subscription, n int, wait time.Duration) []string {
	t.Helper()
	got, _ := receivePositions(t, sub, n, wait)
	return got
}

// receivePositions reads n items and their positions, failing past wait.
func receivePositions(t *testing.T, sub *watch.Subscription, n int, wait time.Duration) ([]string, []store.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got := make([]string, 0, n)
	var at []store.Position
	for len(got) < n {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d items (%q): %v", len(got), got, err)
		}
		sub.Sent(d)
		got, at = append(got, string(d.Value)), append(at, d.Position)
	}
	return got, at
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// quiet checks that no item comes once n have: it adds a marker through
// another list of the feed and reads until it is certain the feed has gone
// past every add before it.
func (e *env) quiet(sub *watch.Subscription) {
	e.t.Helper()
	marker := store.List{Feature: e.list.Feature, EntityID: "marker"}
	probe := e.subscribe(context.Background(), marker, nil)
	e.add(marker, time.Now(), "marker")
	receive(e.t, probe, 1, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if it, err := sub.Next(ctx); err == nil {
		e.t.Fatalf("one more item came: %q", it.Value)
	}
}

// Every item added after a subscription starts is delivered once,
// whatever its timestamp: an hour old, half an hour ahead, or with many
// others at one timestamp; within one add, oldest first; adds in the order
// they came. Items there before it started are not.
func TestDeliveryByArrival(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		now := time.Now()
		e.add(e.list, now, "before")
		sub := e.subscribe(context.Background(), e.list, nil)
		e.add(e.list, now.Add(-time.Hour), "an hour old")
		e.add(e.list, now.Add(30*time.Minute), "half an hour ahead")
		e.add(e.list, now, "now")
		e.add(e.list, now.Add(-time.Minute), "b", "a") // one add, at one timestamp
		e.add(e.list, now.Add(-2*time.Minute), "older in a later add")
		got := receive(t, sub, 6, 20*time.Second)
		a, b := "a", "b"
		if keyOf(now.Add(-time.Minute), b) < keyOf(now.Add(-time.Minute), a) {
			a, b = b, a
		}
		want := []string{"an hour old", "half an hour ahead", "now", a, b, "older in a later add"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("got %q, want %q", got, want)
		}
		e.quiet(sub)
	})
}

func keyOf(ts time.Time, v string) string { return keys.ItemKey(ts.UnixNano(), []byte(v)) }

// More than 10,000 items at one timestamp, in eleven adds, each come once.
func TestManyItemsAtOneTimestamp(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		sub := e.subscribe(context.Background(), e.list, nil)
		ts := time.Now().Add(-time.Minute)
		for add := range 11 {
			values := make([]string, 1000)
			for i := range values {
				values[i] = fmt.Sprint("v", add*1000+i)
			}
			e.add(e.list, ts, values...)
		}
		got := receive(t, sub, 11_000, time.Minute)
		seen := map[string]bool{}
		for _, v := range got {
			if seen[v] {
				t.Fatalf("%s came twice", v)
			}
			seen[v] = true
		}
		e.quiet(sub)
	})
}

// Items a cap pushes out of the list at once, and items already past their
// TTL by the time they are read, are delivered all the same.
func TestCapDoesNotHideAdds(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		capped := store.List{Feature: feature(t, e.s, 10), EntityID: "u1"}
		sub := e.subscribe(context.Background(), capped, nil)
		values := make([]string, 20)
		for i := range values {
			values[i] = fmt.Sprint("v", i)
		}
		e.add(capped, time.Now(), values...)
		if got := receive(t, sub, 20, 20*time.Second); len(got) != 20 {
			t.Fatalf("got %d", len(got))
		}
	})
}

// Ten subscriptions reading as fast as they can get a burst of 10 × 1,000
// items, every one, and none is ended.
func TestBurstToFastSubscribers(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		var subs []*watch.Subscription
		for range 10 {
			subs = append(subs, e.subscribe(context.Background(), e.list, nil))
		}
		var wg sync.WaitGroup
		counts := make([]int, len(subs))
		for i, sub := range subs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for counts[i] < 10_000 {
					if _, err := sub.Next(ctx); err != nil {
						t.Errorf("subscription %d after %d items: %v", i, counts[i], err)
						return
					}
					counts[i]++
				}
			})
		}
		for add := range 10 {
			values := make([]string, 1000)
			for i := range values {
				values[i] = fmt.Sprint("v", add*1000+i, strings.Repeat("x", 100))
			}
			e.add(e.list, time.Now(), values...)
		}
		wg.Wait()
		for i, n := range counts {
			if n != 10_000 {
				t.Fatalf("subscription %d got %d items", i, n)
			}
		}
	})
}

// A subscription that reads nothing while more than its buffer comes is
// ended with ErrTooSlow, naming the since to subscribe again with; one
// that reads goes on.
func TestSlowSubscriberIsEnded(t *testing.T) {
	eachBackend(t, func(c *watch.Config) {
		c.SubscriptionBytes = 64 << 10
		c.SlowAfter = 100 * time.Millisecond
	}, func(t *testing.T, e *env) {
		slow := e.subscribe(context.Background(), e.list, nil)
		fast := e.subscribe(context.Background(), e.list, nil)
		e.add(e.list, time.Now(), "first")
		if got := receive(t, slow, 1, 20*time.Second); got[0] != "first" {
			t.Fatalf("got %q", got)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for n := range 201 {
				if _, err := fast.Next(ctx); err != nil {
					t.Errorf("the fast subscription after %d items: %v", n, err)
					return
				}
			}
		})
		for range 4 {
			values := make([]string, 50)
			for i := range values {
				values[i] = fmt.Sprint(i, strings.Repeat("x", 1000))
			}
			e.add(e.list, time.Now(), values...)
		}
		wg.Wait()
		select {
		case <-slow.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the slow subscription was not ended")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			_, err := slow.Next(ctx)
			if err == nil {
				continue // what it had not read before it was ended
			}
			var end *watch.EndError
			if !errors.Is(err, errkind.TooSlow) || !errors.As(err, &end) || !strings.Contains(err.Error(), "after:") {
				t.Fatalf("the slow subscription ended with %v", err)
			}
			// It resumes after the last item it got, and gets the rest.
			resumed := e.subscribeAfter(context.Background(), e.list, end.Position)
			for _, v := range receive(t, resumed, 200, 20*time.Second) {
				if v == "first" {
					t.Fatal("resumed with the item it had received")
				}
			}
			e.quiet(resumed)
			break
		}
	})
}

// A subscription with since first gets the list's items from since on,
// then every item added, with no gap.
func TestSince(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		now := time.Now()
		for i := range 250 {
			e.add(e.list, now.Add(-time.Duration(300-i)*time.Second), fmt.Sprint("old", i))
		}
		since := now.Add(-100 * time.Second)
		sub := e.subscribe(context.Background(), e.list, &since)
		e.add(e.list, now.Add(-time.Hour), "new and old")
		got := receive(t, sub, 51, 20*time.Second)
		if got[0] != "old200" || got[49] != "old249" || got[50] != "new and old" {
			t.Fatalf("got %q … %q", got[:3], got[48:])
		}
	})
}

// A subscription with since whose client stops reading its catch-up page
// is ended with ErrTooSlow once SlowAfter passes, and gives back the
// catch-up bytes another subscription waits for.
func TestUnreadCatchUpIsEnded(t *testing.T) {
	eachBackend(t, func(c *watch.Config) {
		c.CatchUpPage = 100
		// One page at its largest: while one is held, another waits.
		c.CatchUpBytes = watch.PageNeed(c.CatchUpPage, c.Store.Limits())
		c.SlowAfter = 200 * time.Millisecond
	}, func(t *testing.T, e *env) {
		now := time.Now()
		values := make([]string, 150)
		for i := range values {
			values[i] = fmt.Sprint("v", i)
		}
		e.add(e.list, now.Add(-time.Minute), values...)
		since := now.Add(-time.Hour)
		stalled := e.subscribe(context.Background(), e.list, &since)
		receive(t, stalled, 1, 20*time.Second) // holds its first page, and reads no more
		waiting := e.subscribe(context.Background(), e.list, &since)
		if got := receive(t, waiting, 150, 30*time.Second); len(got) != 150 {
			t.Fatalf("got %d", len(got))
		}
		select {
		case <-stalled.Done():
		default:
			t.Fatal("the stalled subscription was not ended")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			if _, err := stalled.Next(ctx); err != nil {
				if !errors.Is(err, errkind.TooSlow) {
					t.Fatalf("the stalled subscription ended with %v", err)
				}
				break
			}
		}
	})
}

// A subscription to a feature deleted or created again is ended with its
// error.
func TestFeatureGoneEndsSubscriptions(t *testing.T) {
	var gone atomic.Bool
	notFound := fmt.Errorf("%w: deleted", errkind.NotFound)
	eachBackend(t, func(c *watch.Config) {
		c.Current = func(store.List) error {
			if gone.Load() {
				return notFound
			}
			return nil
		}
	}, func(t *testing.T, e *env) {
		sub := e.subscribe(context.Background(), e.list, nil)
		gone.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := sub.Next(ctx); !errors.Is(err, errkind.NotFound) {
			t.Fatalf("got %v", err)
		}
	})
}

// Subscriptions that end while others join the same list, and a hub that
// closes while subscriptions come and go: each subscription either works
// or is refused or ended with a reason, and nothing panics or races.
func TestJoinsLeavesAndClose(t *testing.T) {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := newEnv(t, s, nil)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithCancel(context.Background())
				sub, err := e.hub.Subscribe(ctx, e.list, watch.Start{})
				if err != nil {
					cancel()
					if !errors.Is(err, watch.ErrClosed) {
						t.Errorf("subscribe: %v", err)
					}
					return
				}
				cancel()
				if _, err := sub.Next(context.Background()); !errors.Is(err, watch.ErrEnded) && err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("after its cancellation: %v", err)
				}
			}
		})
	}
	live := e.subscribe(context.Background(), e.list, nil)
	e.add(e.list, time.Now(), "while others come and go")
	receive(t, live, 1, 20*time.Second)
	e.hub.Close()
	close(stop)
	wg.Wait()
	if _, err := live.Next(context.Background()); !errors.Is(err, watch.ErrEnded) {
		t.Fatalf("after Close: %v", err)
	}
}

// A caller's catch-ups hold at most its share of the catch-up bytes: while
// caller a's subscriptions hold their pages, and read no more, another of
// a's waits for room in a's share, and caller b's catch-up comes whole,
// holding up no one and held up by no one.
func TestCatchUpShare(t *testing.T) {
	// A page of ten values of 1 KB holds more than half of what a page may
	// (one add's worst): two such pages leave less than one of two free.
	limits := store.Limits{MaxAddItems: 10, MaxAddBytes: 16 << 10, MaxValueBytes: 1 << 10}
	eachBackendLimited(t, limits, func(c *watch.Config) {
		c.CatchUpPage = 10
		c.CatchUpBytes = 2 * watch.PageNeed(c.CatchUpPage, c.Store.Limits()) // a's share: one page
		c.CatchUpShare = 0.5
		c.SlowAfter = time.Hour // nothing ends a's for being slow
	}, func(t *testing.T, e *env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for i := range 3 {
			e.add(e.list, time.Now().Add(-time.Minute), values(10, 1000, fmt.Sprint(i))...)
		}
		since := time.Now().Add(-time.Hour).UnixNano()
		subscribe := func(caller string) *watch.Subscription {
			sub, err := e.hub.Subscribe(ctx, e.list, watch.Start{Since: &since, Caller: caller})
			if err != nil {
				t.Fatal(err)
			}
			return sub
		}
		held := subscribe("a")
		receive(t, held, 1, 20*time.Second) // holds its first page, and reads no more
		waiting := subscribe("a")
		read := make(chan error, 1)
		go func() {
			_, err := waiting.Next(ctx)
			read <- err
		}()
		waitFor(t, func() bool { return e.hub.CatchUpWaiting() == 1 || len(read) == 1 })
		if got := receive(t, subscribe("b"), 30, 20*time.Second); len(got) != 30 {
			t.Fatalf("b got %d", len(got))
		}
		select {
		case err := <-read:
			t.Fatalf("a's second catch-up read while a held its share: %v", err)
		case <-held.Done():
			t.Fatal("a's first catch-up ended")
		default:
		}
		cancel()
		waitFor(t, func() bool { return e.hub.CatchUpWaiting() == 0 })
	})
}
