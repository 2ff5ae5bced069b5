package watch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// heldStore is a store whose feed calls a test holds at chosen points:
// FeedHead once it has the head, ReadFeed before it reads, as their gates
// say; a catch-up's reads (ListFeed, Since) first run its catchUp. It
// tells when the hub waits for the feed past a position (WaitFeed).
type heldStore struct {
	store.Store
	feedHead, readFeed gate

	mu          sync.Mutex
	waitedAfter store.Position // of the last WaitFeed
	past        store.Position // a WaitFeed after it closes waited
	waited      chan struct{}
	catchUp     func(ctx context.Context) error
}

// setCatchUp makes each read of a catch-up run f first, and fail with its
// error.
func (s *heldStore) setCatchUp(f func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUp = f
}

func (s *heldStore) beforeCatchUp(ctx context.Context) error {
	s.mu.Lock()
	f := s.catchUp
	s.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(ctx)
}

func (s *heldStore) ListFeed(ctx context.Context, l store.List, after, upTo store.Position, maxBytes int) ([]store.Change, store.Position, int, error) {
	if err := s.beforeCatchUp(ctx); err != nil {
		return nil, after, 0, err
	}
	return s.Store.ListFeed(ctx, l, after, upTo, maxBytes)
}

func (s *heldStore) Since(ctx context.Context, l store.List, since string, limit int) (store.SincePage, error) {
	if err := s.beforeCatchUp(ctx); err != nil {
		return store.SincePage{}, err
	}
	return s.Store.Since(ctx, l, since, limit)
}

func (s *heldStore) FeedHead(ctx context.Context) (store.Position, time.Duration, error) {
	p, startsIn, err := s.Store.FeedHead(ctx)
	s.feedHead.pass()
	return p, startsIn, err
}

func (s *heldStore) ReadFeed(ctx context.Context, after store.Position, watched func(store.ListID) bool, maxBytes int) ([]store.Change, store.Position, error) {
	s.readFeed.pass()
	return s.Store.ReadFeed(ctx, after, watched, maxBytes)
}

func (s *heldStore) WaitFeed(ctx context.Context, after store.Position) error {
	s.mu.Lock()
	s.waitedAfter = after
	if s.waited != nil && !after.Less(s.past) {
		close(s.waited)
		s.waited = nil
	}
	s.mu.Unlock()
	return s.Store.WaitFeed(ctx, after)
}

// waitsPast waits until the hub waits for the feed past the record of p,
// or has last waited past it.
func (s *heldStore) waitsPast(t *testing.T, p store.Position) {
	t.Helper()
	s.mu.Lock()
	waited := make(chan struct{})
	s.past = store.Position{Record: p.Record, Item: store.AllItems}
	if !s.waitedAfter.Less(s.past) {
		close(waited)
	} else {
		s.waited = waited
	}
	s.mu.Unlock()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the hub did not wait for the feed past the add")
	}
}

// gate holds a call, once armed: the next call through it says it came,
// and waits until the test opens the gate.
type gate struct {
	mu    sync.Mutex
	armed bool
	came  chan struct{}
	open  chan struct{}
}

// arm makes the gate hold the next call.
func (g *gate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.came, g.open = true, make(chan struct{}), make(chan struct{})
}

func (g *gate) pass() {
	g.mu.Lock()
	armed, came, open := g.armed, g.came, g.open
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(came)
		<-open
	}
}

// held waits until a call is held at the gate.
func (g *gate) held(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	came := g.came
	g.mu.Unlock()
	select {
	case <-came:
	case <-time.After(20 * time.Second):
		t.Fatal("no call came to the gate")
	}
}

// let lets the call held go on.
func (g *gate) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
}

// eachHeldBackend is eachBackend with the store held by the test.
func eachHeldBackend(t *testing.T, cfg func(*watch.Config), test func(t *testing.T, e *env, held *heldStore)) {
	for _, b := range backends(store.DefaultLimits) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			held := &heldStore{Store: b.open(t)}
			test(t, newEnv(t, held, cfg), held)
		})
	}
}

// A client that reconnects subscribes again while its old subscription,
// the last of the hub's, is still leaving: the new one starts at the
// feed's head, then the hub reads past it for the old one, which then
// leaves, and the new one joins, beginning a new run from its head. The
// add between is delivered at once, whether the hub was then waiting for
// the feed past it or reading it for the old run; not once another add
// moves the feed.
func TestNewRunIsReadAtOnce(t *testing.T) {
	for _, when := range []string{"waiting", "reading"} {
		t.Run(when, func(t *testing.T) {
			eachHeldBackend(t, nil, func(t *testing.T, e *env, held *heldStore) {
				ctx, leave := context.WithCancel(context.Background())
				old := e.subscribe(ctx, e.list, nil)
				held.feedHead.arm()
				type subscribed struct {
					sub *watch.Subscription
					err error
				}
				again := make(chan subscribed, 1)
				go func() {
					sub, err := e.hub.Subscribe(context.Background(), e.list, watch.Start{})
					again <- subscribed{sub, err}
				}()
				held.feedHead.held(t) // the new subscription starts here
				if when == "reading" {
					held.readFeed.arm()
				}
				e.add(e.list, time.Now(), "between")
				if when == "waiting" {
					_, at := receivePositions(t, old, 1, 20*time.Second)
					held.waitsPast(t, at[0])
				} else {
					held.readFeed.held(t) // the old run's read of the add
				}
				leave()
				select {
				case <-old.Done():
				case <-time.After(20 * time.Second):
					t.Fatal("the old subscription did not leave")
				}
				held.feedHead.let() // the new one joins: a new run
				s := <-again
				if s.err != nil {
					t.Fatal(s.err)
				}
				if when == "reading" {
					held.readFeed.let()
				}
				if got := receive(t, s.sub, 1, 20*time.Second); got[0] != "between" {
					t.Fatalf("got %q", got)
				}
			})
		})
	}
}

// A catch-up whose store read takes longer than SlowAfter is not its
// client's fault: the subscription is not ended TOO_SLOW, and gets its
// items once the read ends. A read that takes longer than ReadTimeout ends
// it UNAVAILABLE, naming where to resume; not TOO_SLOW either. So for a
// catch-up by position (ListFeed) and by since (Since).
func TestSlowStoreIsNotTheClients(t *testing.T) {
	const slowAfter = 50 * time.Millisecond
	for _, by := range []string{"after", "since"} {
		// subscribe subscribes with a catch-up of three items, read by
		// catchUp.
		subscribe := func(t *testing.T, e *env, held *heldStore, catchUp func(sub *watch.Subscription) func(context.Context) error) (*watch.Subscription, store.Position) {
			ctx := context.Background()
			head, err := store.AwaitHead(ctx, e.s)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"a", "b", "c"} {
				e.add(e.list, time.Now().Add(-time.Minute), v)
			}
			var sub *watch.Subscription
			if by == "after" {
				e.quiet(e.subscribe(ctx, e.list, nil)) // the feed has passed every add
				sub = e.subscribeAfter(ctx, e.list, head)
			} else {
				since := time.Now().Add(-time.Hour)
				sub = e.subscribe(ctx, e.list, &since)
			}
			held.setCatchUp(catchUp(sub))
			return sub, head
		}
		t.Run(by+"/slower than SlowAfter", func(t *testing.T) {
			eachHeldBackend(t, func(c *watch.Config) {
				c.SlowAfter = slowAfter
				c.ReadTimeout = time.Minute
			}, func(t *testing.T, e *env, held *heldStore) {
				sub, _ := subscribe(t, e, held, func(sub *watch.Subscription) func(context.Context) error {
					return func(context.Context) error {
						select {
						case <-sub.Done(): // the hub ended it while the store read
						case <-time.After(20 * slowAfter): // a slow store
						}
						return nil
					}
				})
				if got := receive(t, sub, 3, 20*time.Second); got[0] != "a" || got[2] != "c" {
					t.Fatalf("got %q", got)
				}
			})
		})
		t.Run(by+"/past ReadTimeout", func(t *testing.T) {
			eachHeldBackend(t, func(c *watch.Config) {
				c.SlowAfter = slowAfter
				c.ReadTimeout = 4 * slowAfter
			}, func(t *testing.T, e *env, held *heldStore) {
				sub, head := subscribe(t, e, held, func(sub *watch.Subscription) func(context.Context) error {
					return func(ctx context.Context) error {
						select {
						case <-ctx.Done():
							return ctx.Err()
						case <-sub.Done():
							return errors.New("the hub ended the subscription while the store read")
						}
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err := sub.Next(ctx)
				var end *watch.EndError
				if !errors.Is(err, errkind.Unavailable) || errors.Is(err, errkind.TooSlow) || errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &end) {
					t.Fatalf("a store read past ReadTimeout: %v; want UNAVAILABLE, naming where to resume", err)
				}
				if by == "after" && end.Position != head {
					t.Fatalf("resume after %v, want %v, where it began", end.Position, head)
				}
			})
		})
	}
}
