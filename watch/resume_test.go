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

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// A client that received an item stamped half an hour ahead, lost its
// connection, and resumes after that item's position gets the item added
// meanwhile though it is stamped earlier: delivery and resumption follow
// the feed, not the items' timestamps. (By since, it would never come.)
func TestResumeAfterPosition(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		now := time.Now()
		ctx, disconnect := context.WithCancel(context.Background())
		sub := e.subscribe(ctx, e.list, nil)
		e.add(e.list, now.Add(30*time.Minute), "X")
		got, at := receivePositions(t, sub, 1, 20*time.Second)
		if got[0] != "X" {
			t.Fatalf("got %q", got)
		}
		disconnect()
		e.add(e.list, now, "Y", "Z")
		e.add(e.list, now.Add(-time.Hour), "older")
		resumed := e.subscribeAfter(context.Background(), e.list, at[0])
		got, positions := receivePositions(t, resumed, 3, 20*time.Second)
		y, z := "Y", "Z"
		if keyOf(now, z) < keyOf(now, y) {
			y, z = z, y
		}
		if strings.Join(got, ",") != y+","+z+",older" {
			t.Fatalf("resumed with %q", got)
		}
		// From the middle of an add, the rest of it.
		fromMiddle := e.subscribeAfter(context.Background(), e.list, positions[0])
		if got := receive(t, fromMiddle, 2, 20*time.Second); strings.Join(got, ",") != z+",older" {
			t.Fatalf("resumed in the middle of an add with %q", got)
		}
		e.quiet(fromMiddle)
	})
}

// A position the feed does not hold, or cannot be, is refused at once: the
// client re-reads the list; after and since exclude each other.
func TestPositionRefused(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		ctx := context.Background()
		foreign := store.Position{Record: "q" + strings.Repeat("\x07", 16)}
		if _, err := e.hub.Subscribe(ctx, e.list, watch.Start{After: &foreign}); !errors.Is(err, errkind.PositionExpired) {
			t.Fatalf("a position of another feed: %v", err)
		}
		ns := time.Now().UnixNano()
		head, _ := store.AwaitHead(ctx, e.s)
		if _, err := e.hub.Subscribe(ctx, e.list, watch.Start{After: &head, Since: &ns}); !errors.Is(err, errkind.Invalid) {
			t.Fatalf("after and since: %v", err)
		}
		for _, text := range []string{"", "!!", strings.Repeat("A", 100), "AAAA"} {
			if _, err := store.ParsePosition(text); !errors.Is(err, errkind.Invalid) {
				t.Fatalf("ParsePosition(%q) = %v", text, err)
			}
		}
	})
}

// small are limits that make the bounds of a few items testable: an add
// holds at most 100 items of 4 KiB, 64 KiB in all.
var small = store.Limits{MaxAddItems: 100, MaxAddBytes: 64 << 10, MaxValueBytes: 4 << 10}

// smallAdd is the most an add within small weighs in a buffer.
var smallAdd = watch.AddNeed(small)

func values(n, size int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d-%s", prefix, i, strings.Repeat("x", size))
	}
	return out
}

// Past the bound of every list, the subscription furthest behind is ended,
// whichever list it watches: here a client that never reads list A, not
// the readers of list B whose add passed the bound. When every
// subscription has ended, whether by its client, its bound or Close, no
// byte is held.
func TestTotalBoundEndsTheFurthestBehind(t *testing.T) {
	eachBackendLimited(t, small, func(c *watch.Config) {
		c.ListBytes = 2 * smallAdd
		c.TotalBytes = 5 * smallAdd / 2
		c.SlowAfter = time.Hour // only the bounds end subscriptions
	}, func(t *testing.T, e *env) {
		a, b := e.list, store.List{Feature: e.list.Feature, EntityID: "b"}
		idle := e.subscribe(context.Background(), a, nil)
		reader := e.subscribe(context.Background(), b, nil)
		probe := e.subscribe(context.Background(), a, nil)
		for i := range 2 { // two full adds to A, not read
			e.add(a, time.Now(), values(15, 4000, fmt.Sprint("a", i))...)
		}
		receive(t, probe, 30, 20*time.Second) // A's buffer holds them
		for i := range 3 {
			e.add(b, time.Now(), values(15, 4000, fmt.Sprint("b", i))...)
			receive(t, reader, 15, 20*time.Second)
		}
		select {
		case <-idle.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the subscription that never read was not ended")
		}
		if _, err := idle.Next(context.Background()); !errors.Is(err, errkind.TooSlow) {
			t.Fatalf("it ended with %v", err)
		}
		select {
		case <-reader.Done():
			t.Fatal("a reader of another list was ended")
		default:
		}
	})
}

// Subscriptions come and go on lists with adds, are ended by their bounds
// and by the hub's close: the bytes buffered are always what the lists
// hold, and zero once all have ended.
func TestBufferedBytesReturnToZero(t *testing.T) {
	eachBackendLimited(t, small, func(c *watch.Config) {
		c.SubscriptionBytes = smallAdd
		c.ListBytes = 2 * smallAdd
		c.TotalBytes = 3 * smallAdd
		c.SlowAfter = 10 * time.Millisecond
	}, func(t *testing.T, e *env) {
		lists := []store.List{e.list, {Feature: e.list.Feature, EntityID: "u2"}, {Feature: e.list.Feature, EntityID: "u3"}}
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var ended atomic.Int64
		for i := range 12 {
			wg.Go(func() {
				for round := 0; round < 5 && ctx.Err() == nil; round++ {
					sctx, leave := context.WithCancel(ctx)
					sub := e.subscribe(sctx, lists[(i+round)%len(lists)], nil)
					for n := 0; n < i%4*10; n++ { // some read, some never do
						d, err := sub.Next(sctx)
						if err != nil {
							ended.Add(1)
							break
						}
						sub.Sent(d)
					}
					leave()
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for i := 0; ; i++ {
			select {
			case <-done:
			default:
				if i < 500 {
					e.add(lists[i%len(lists)], time.Now(), values(10, 3000, fmt.Sprint(i, "-"))...)
					continue
				}
				<-done
			}
			break
		}
		if b := e.hub.Buffered(); b != 0 {
			t.Fatalf("%d bytes buffered once every subscription left (%d ended by a bound)", b, ended.Load())
		}
		// Ended by a bound, then by Close.
		stuck := e.subscribe(context.Background(), lists[0], nil)
		e.add(lists[0], time.Now(), values(15, 4000, "big")...)
		e.add(lists[0], time.Now(), values(15, 4000, "bigger")...)
		<-stuck.Done()
		open := e.subscribe(context.Background(), lists[1], nil)
		e.add(lists[1], time.Now(), "pending")
		waitFor(t, func() bool { return e.hub.Buffered() > 0 })
		e.hub.Close()
		if _, err := open.Next(context.Background()); !errors.Is(err, watch.ErrEnded) {
			t.Fatalf("after Close: %v", err)
		}
		if b := e.hub.Buffered(); b != 0 {
			t.Fatalf("%d bytes buffered after Close", b)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// One writer adds to a list, while a client subscribes to another list
// and ends the subscription again and again, the last subscription of its
// list each time: every add completes, a steady subscriber gets every
// item, once, in order, and the hub closes. (The hub once called the
// store under its lock while the store called the hub under its own: the
// embedded store hung for good after a few thousand cycles.)
func TestChurnNeverHangs(t *testing.T) {
	eachBackend(t, nil, func(t *testing.T, e *env) {
		other := store.List{Feature: e.list.Feature, EntityID: "churn"}
		steady := e.subscribe(context.Background(), e.list, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var cycles atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for cycles.Load() < 3000 && ctx.Err() == nil {
				sctx, leave := context.WithCancel(ctx)
				// A subscribe still starting when the test's time is up
				// ends with it (on a cluster it waits out the clock skew).
				if _, err := e.hub.Subscribe(sctx, other, watch.Start{}); err != nil && ctx.Err() == nil {
					t.Errorf("subscribe: %v", err)
				}
				leave()
				cycles.Add(1)
			}
		})
		added := 0
		for ; added < 3000 && ctx.Err() == nil && cycles.Load() < 3000; added++ {
			e.add(e.list, time.Now(), fmt.Sprint(added))
		}
		wg.Wait()
		got := receive(t, steady, added, time.Minute)
		for i, v := range got {
			if v != fmt.Sprint(i) {
				t.Fatalf("item %d is %s", i, v)
			}
		}
		t.Logf("%d adds while %d subscriptions came and went", added, cycles.Load())
		closed := make(chan struct{})
		go func() { e.hub.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Fatal("the hub did not close")
		}
	})
}

// A catch-up is charged page by page as it is read: each item given, and
// the records of other lists looked at; a page the caller cannot pay for
// ends the subscription, naming where to resume.
func TestCatchUpIsCharged(t *testing.T) {
	eachBackend(t, func(c *watch.Config) { c.CatchUpPage = 10 }, func(t *testing.T, e *env) {
		ctx := context.Background()
		head, _ := store.AwaitHead(ctx, e.s)
		for i := range 25 {
			e.add(e.list, time.Now(), fmt.Sprint(i))
		}
		e.add(store.List{Feature: e.list.Feature, EntityID: "other"}, time.Now(), "other")
		e.quiet(e.subscribe(ctx, e.list, nil)) // the feed has passed every add
		var items, budget atomic.Int64
		budget.Store(1 << 30)
		charge := func(_ context.Context, n, looked int) error {
			items.Add(int64(n))
			if budget.Add(-int64(n)) < 0 {
				return fmt.Errorf("%w: out of budget", errkind.Throttled)
			}
			return nil
		}
		sub, err := e.hub.Subscribe(ctx, e.list, watch.Start{After: &head, Charge: charge})
		if err != nil {
			t.Fatal(err)
		}
		receive(t, sub, 25, 20*time.Second)
		if n := items.Load(); n != 25 {
			t.Fatalf("charged %d items for 25", n)
		}
		budget.Store(10)
		poor, err := e.hub.Subscribe(ctx, e.list, watch.Start{After: &head, Charge: charge})
		if err != nil {
			t.Fatal(err)
		}
		_, err = poor.Next(ctx)
		var end *watch.EndError
		if !errors.Is(err, errkind.Throttled) || !errors.As(err, &end) || end.Position != head {
			t.Fatalf("out of budget: %v; want THROTTLED before the first item, to resume where it began", err)
		}
	})
}

// Settings that cannot work are refused, naming the flag.
func TestSettingsThatCannotWork(t *testing.T) {
	s := backends(store.DefaultLimits)[0].open(t)
	for _, tc := range []struct {
		cfg  watch.Config
		flag string
	}{
		{watch.Config{Store: s, CatchUpBytes: 1 << 20}, "--catch-up-bytes"},
		{watch.Config{Store: s, ListBytes: 1 << 20}, "--watched-list-bytes"},
		{watch.Config{Store: s, ListBytes: 64 << 20, TotalBytes: 32 << 20}, "--subscription-memory"},
	} {
		if _, err := watch.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.flag)
		}
	}
}

// The bounds count only the items a subscription has not read: with a
// list's bound of one add (the least start-up accepts), a subscriber that
// reads each add whole before the next is never ended, whatever the adds
// to its list or to another; and what every subscription has read is let
// go of as it is read, not at the next add or tick.
func TestBoundsCountOnlyUnread(t *testing.T) {
	eachBackendLimited(t, small, func(c *watch.Config) {
		c.ListBytes = smallAdd
		c.TotalBytes = 3 * smallAdd / 2 // one list's add, and half another's
		c.SlowAfter = time.Hour         // only the bounds end subscriptions
		c.Tick = time.Hour              // nor does a tick drop what was read
	}, func(t *testing.T, e *env) {
		a, b := e.list, store.List{Feature: e.list.Feature, EntityID: "b"}
		readerA := e.subscribe(context.Background(), a, nil)
		readerB := e.subscribe(context.Background(), b, nil)
		for i := range 3 {
			for _, r := range []struct {
				l   store.List
				sub *watch.Subscription
			}{{a, readerA}, {a, readerA}, {b, readerB}} {
				e.add(r.l, time.Now(), values(15, 4000, fmt.Sprint(i, "-"))...)
				receive(t, r.sub, 15, 20*time.Second)
				if n := e.hub.Buffered(); n != 0 {
					t.Fatalf("round %d: %d bytes kept once every item was read", i, n)
				}
			}
		}
	})
}
