// Package watch delivers the items added to lists to the subscriptions
// that watch them. It follows the store's change feed (store.Follower),
// the record of every add, while it watches any list: so an item is
// delivered because it was added, whatever its timestamp, whichever
// gateway added it, and whether or not a cap or its TTL has removed it
// from the list since; a list nobody adds to costs nothing to watch.
//
// Each watched list keeps the items added since its slowest subscription
// read, once, in the order the feed records them (within one add, oldest
// first); each subscription reads them at its own pace. One that falls
// too far behind, for too long, is ended with ErrTooSlow, naming the since
// to subscribe again with; the items kept are bounded per subscription,
// per list and in all. A subscription with since first reads the list
// itself from since on, then the items added from when it started: an
// item added while it reads may come twice (its cursor tells).
//
// It knows nothing of GraphQL or of value types; it must never write.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/semaphore"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Config is what a Hub is built from.
type Config struct {
	Store    store.Store
	MaxLists int // lists watched at once by this process
	// MaxCatchUp bounds the items a subscription with since may be sent
	// before its live items.
	MaxCatchUp int
	// CatchUpBytes bounds the bytes of the catch-up pages all
	// subscriptions hold at once; CatchUpPage is the items of one page.
	CatchUpBytes int64
	CatchUpPage  int
	// SubscriptionBytes is how far behind, in bytes of items, a
	// subscription may fall: past it for SlowAfter, it is ended
	// (ErrTooSlow), as is one that holds a catch-up page its client does
	// not read from for SlowAfter.
	SubscriptionBytes int64
	SlowAfter         time.Duration
	// ListBytes and TotalBytes bound the items kept for one list, and for
	// every list: past them the subscriptions furthest behind are ended.
	ListBytes, TotalBytes int64
	// Current says whether a watched list's feature is still the one
	// subscribed to (nil: it is): one deleted or created again since ends
	// its subscriptions with the error.
	Current func(store.List) error
	// Check is run every Tick: what ends slow subscriptions and those of
	// features deleted, when no add comes.
	Tick  time.Duration
	Meter metric.Meter
	Log   *slog.Logger
}

// Defaults are the settings a zero field of Config takes.
var Defaults = Config{MaxLists: 10_000, MaxCatchUp: 100_000, CatchUpBytes: 64 << 20, CatchUpPage: 100,
	SubscriptionBytes: 8 << 20, SlowAfter: 10 * time.Second, ListBytes: 64 << 20, TotalBytes: 512 << 20, Tick: time.Second}

// ErrTooSlow is the kind of error that ends a subscription whose client
// reads the items more slowly than they are added.
var ErrTooSlow = fmt.Errorf("%w: the client reads the items more slowly than they are added", errkind.TooSlow)

// Why a list is not watched: the hub is closing, or it watches MaxLists
// lists.
var (
	ErrClosed  = fmt.Errorf("%w: the gateway is shutting down; subscribe again", errkind.Refused)
	ErrAtLimit = fmt.Errorf("%w: this gateway watches its limit", errkind.Refused)
)

// Hub holds the watched lists and follows the feed for them.
type Hub struct {
	cfg     Config
	catchUp *semaphore.Weighted

	mu       sync.Mutex
	lists    map[store.ListID]*list
	total    int64 // bytes of the items kept for every list
	closed   bool
	unfollow func()         // stops the follower; nil while none runs
	stopping sync.WaitGroup // followers being stopped

	delivered, records metric.Int64Counter
	ended              metric.Int64Counter
	active, watched    metric.Int64UpDownCounter
	stop               chan struct{}
	ticking            chan struct{}
}

// New returns a hub.
func New(cfg Config) (*Hub, error) {
	d := Defaults
	for _, f := range []struct{ v, d *int }{{&cfg.MaxLists, &d.MaxLists}, {&cfg.MaxCatchUp, &d.MaxCatchUp}, {&cfg.CatchUpPage, &d.CatchUpPage}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	for _, f := range []struct{ v, d *int64 }{{&cfg.CatchUpBytes, &d.CatchUpBytes}, {&cfg.SubscriptionBytes, &d.SubscriptionBytes}, {&cfg.ListBytes, &d.ListBytes}, {&cfg.TotalBytes, &d.TotalBytes}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if cfg.SlowAfter <= 0 {
		cfg.SlowAfter = d.SlowAfter
	}
	if cfg.Tick <= 0 {
		cfg.Tick = d.Tick
	}
	if cfg.Current == nil {
		cfg.Current = func(store.List) error { return nil }
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{cfg: cfg, catchUp: semaphore.NewWeighted(cfg.CatchUpBytes), lists: map[store.ListID]*list{},
		stop: make(chan struct{}), ticking: make(chan struct{})}
	var err error
	m := cfg.Meter
	if h.records, err = m.Int64Counter("listgate.change_feed.records", metric.WithDescription("Change records of the lists this process watches read from the feed: one per add, through any gateway.")); err != nil {
		return nil, err
	}
	if h.delivered, err = m.Int64Counter("listgate.subscription.items.delivered", metric.WithDescription("Items delivered to subscriptions, once per subscription.")); err != nil {
		return nil, err
	}
	if h.ended, err = m.Int64Counter("listgate.subscriptions.ended", metric.WithDescription("Subscriptions the gateway ended, by reason: too_slow, not_found (feature deleted or created again), shutting_down.")); err != nil {
		return nil, err
	}
	if h.active, err = m.Int64UpDownCounter("listgate.subscriptions.active", metric.WithDescription("Subscriptions open in this process.")); err != nil {
		return nil, err
	}
	if h.watched, err = m.Int64UpDownCounter("listgate.subscription.lists.watched", metric.WithDescription("Lists this process watches for its subscriptions.")); err != nil {
		return nil, err
	}
	if _, err = m.Int64ObservableGauge("listgate.subscription.buffer", metric.WithUnit("By"),
		metric.WithDescription("Bytes of items kept for subscriptions that have not read them yet."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			o.Observe(h.total)
			return nil
		})); err != nil {
		return nil, err
	}
	go h.tick()
	return h, nil
}

// Why a subscription was ended, as listgate_subscriptions_ended_total's
// reason.
var (
	endedTooSlow  = reason("too_slow")
	endedNotFound = reason("not_found")
	endedClosing  = reason("shutting_down")
)

func reason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// list is a watched list: the items added since its slowest subscription
// read, and its subscriptions.
type list struct {
	key   store.ListID
	l     store.List
	base  uint64  // the sequence number of items[0]
	items []entry // oldest first
	bytes int64   // of items
	subs  map[*Subscription]struct{}
	// holding is how many of subs hold catch-up bytes.
	holding int
	// recent are the keys delivered in the last moments: an item whose
	// add was recorded twice (a retry after a record that seemed to fail)
	// is delivered once.
	recent map[string]time.Time
}

// entry is an item kept for a list's subscriptions.
type entry struct {
	store.Item
	at  time.Time // of its add's record
	cum int64     // bytes of the list's items up to and with this one, since the first kept
}

func (l *list) end() uint64 { return l.base + uint64(len(l.items)) }

// cumAt is the bytes of items before sequence number seq.
func (l *list) cumAt(seq uint64) int64 {
	if seq <= l.base || len(l.items) == 0 {
		if len(l.items) == 0 {
			return 0
		}
		return l.items[0].cum - entryBytes(l.items[0].Item)
	}
	return l.items[seq-l.base-1].cum
}

// behind is how many bytes of items a subscription has yet to read.
func (l *list) behind(s *Subscription) int64 {
	if len(l.items) == 0 {
		return 0
	}
	return l.items[len(l.items)-1].cum - l.cumAt(s.next)
}

func entryBytes(it store.Item) int64 { return int64(len(it.Key) + len(it.Value) + 64) }

// Subscription is one subscription to a list. Next gives its items.
type Subscription struct {
	hub    *Hub
	list   *list
	since  *int64
	joined time.Time     // by the feed's clock: items of adds recorded before are not its own
	next   uint64        // the next item to read
	notify chan struct{} // a token when items may have come
	done   chan struct{} // closed when the hub ends it
	err    error         // why, set before done closes
	over   time.Time     // when it fell more than SubscriptionBytes behind; zero if not
	last   int64         // the timestamp of the last item it was given
	gave   bool

	caughtUp bool
	catchUp  []store.Item // the page being sent
	from     string       // where the next catch-up page starts
	sent     int
	held     int64     // catch-up bytes held
	asked    time.Time // when Next was last called, while it holds catch-up bytes
}

// Subscribe watches a list until ctx ends: the items added from now on,
// or, with since (ns), first those from since on already in the list.
func (h *Hub) Subscribe(ctx context.Context, l store.List, since *int64) (*Subscription, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	s := &Subscription{hub: h, since: since, notify: make(chan struct{}, 1), done: make(chan struct{}), caughtUp: since == nil}
	if since != nil {
		s.from = keys.TimestampPrefix(max(*since, 0))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	key := l.ID()
	w := h.lists[key]
	if w == nil {
		if len(h.lists) >= h.cfg.MaxLists {
			return nil, fmt.Errorf("%w of %d lists (--max-watched-lists); retry, or on another replica", ErrAtLimit, h.cfg.MaxLists)
		}
		w = &list{key: key, l: l, subs: map[*Subscription]struct{}{}, recent: map[string]time.Time{}}
		h.lists[key] = w
		h.watched.Add(ctx, 1)
	}
	s.list, s.next, s.joined = w, w.end(), h.cfg.Store.FeedNow()
	w.subs[s] = struct{}{}
	h.active.Add(ctx, 1)
	if h.unfollow == nil {
		h.startFollowing(s.joined)
	}
	context.AfterFunc(ctx, func() { h.leave(s) })
	return s, nil
}

// startFollowing starts the follower; h.mu is held. dispatch takes h.mu:
// the follower is stopped without it.
func (h *Hub) startFollowing(since time.Time) {
	h.unfollow = h.cfg.Store.Follow(since, h.wants, h.dispatch)
}

// wants says whether a list is watched.
func (h *Hub) wants(l store.ListID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lists[l] != nil
}

// dispatch takes a change from the feed: its items go to the list's
// subscriptions, if the list is watched. It never blocks.
func (h *Hub) dispatch(c store.Change) {
	ctx := context.Background()
	h.records.Add(ctx, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.lists[c.List]
	if w == nil {
		return
	}
	now := time.Now()
	added := 0
	for _, it := range c.Items {
		if _, dup := w.recent[it.Key]; dup {
			continue
		}
		w.recent[it.Key] = now
		e := entry{Item: it, at: c.At, cum: w.cumAt(w.end()) + entryBytes(it)}
		w.items = append(w.items, e)
		w.bytes += entryBytes(it)
		h.total += entryBytes(it)
		added++
	}
	if added == 0 {
		return
	}
	for s := range w.subs {
		select {
		case s.notify <- struct{}{}:
		default:
		}
	}
	h.enforce(w, now)
}

// enforce ends the subscriptions of w too far behind, and, past the
// list's or every list's bound, those furthest behind; h.mu is held.
func (h *Hub) enforce(w *list, now time.Time) {
	for s := range w.subs {
		if s.held > 0 && now.Sub(s.asked) > h.cfg.SlowAfter {
			// Its client does not read the catch-up page it holds.
			h.end(s, s.tooSlow(), endedTooSlow)
			continue
		}
		switch b := w.behind(s); {
		case b > h.cfg.SubscriptionBytes && !s.over.IsZero() && now.Sub(s.over) > h.cfg.SlowAfter:
			h.end(s, s.tooSlow(), endedTooSlow)
		case b > h.cfg.SubscriptionBytes && s.over.IsZero():
			s.over = now
		case b <= h.cfg.SubscriptionBytes:
			s.over = time.Time{}
		}
	}
	for w.bytes > h.cfg.ListBytes || h.total > h.cfg.TotalBytes {
		var slowest *Subscription
		for s := range w.subs {
			if slowest == nil || s.next < slowest.next {
				slowest = s
			}
		}
		if slowest == nil {
			break
		}
		h.end(slowest, slowest.tooSlow(), endedTooSlow)
	}
	h.trim(w)
}

// trim drops the items every subscription of w has read; h.mu is held.
func (h *Hub) trim(w *list) {
	low := w.end()
	for s := range w.subs {
		low = min(low, s.next)
	}
	if n := int(low - w.base); n > 0 {
		var freed int64
		for _, e := range w.items[:n] {
			freed += entryBytes(e.Item)
		}
		w.items = append(w.items[:0:0], w.items[n:]...)
		w.base = low
		w.bytes -= freed
		h.total -= freed
	}
}

// tooSlow is the error that ends s for falling behind.
func (s *Subscription) tooSlow() error {
	if !s.gave {
		return fmt.Errorf("%w; subscribe again", ErrTooSlow)
	}
	return fmt.Errorf("%w; subscribe again with since: %q, the timestamp of the last item received (it comes again: tell it by its cursor)",
		ErrTooSlow, time.Unix(0, s.last).UTC().Format(time.RFC3339Nano))
}

// end ends a subscription with err (nil: it completes); h.mu is held.
func (h *Hub) end(s *Subscription, err error, why metric.AddOption) {
	if _, ok := s.list.subs[s]; !ok {
		return
	}
	if why != nil {
		h.ended.Add(context.Background(), 1, why)
	}
	s.err = err
	close(s.done)
	h.setHeld(s, 0)
	h.drop(s)
}

// drop removes s from its list, and the list once it has no subscription
// left; h.mu is held.
func (h *Hub) drop(s *Subscription) {
	w := s.list
	if _, ok := w.subs[s]; !ok {
		return
	}
	delete(w.subs, s)
	h.active.Add(context.Background(), -1)
	if len(w.subs) == 0 {
		h.total -= w.bytes
		delete(h.lists, w.key)
		h.watched.Add(context.Background(), -1)
		if len(h.lists) == 0 && h.unfollow != nil {
			// Stopped once h.mu is free: dispatch waits for it.
			h.stopping.Go(h.unfollow)
			h.unfollow = nil
		}
		return
	}
	h.trim(w)
}

// leave is a subscription's end by its context.
func (h *Hub) leave(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.end(s, context.Canceled, nil)
}

// tick checks, every Tick, what no add would: subscriptions behind for too
// long, and lists of features deleted or created again since.
func (h *Hub) tick() {
	defer close(h.ticking)
	t := time.NewTicker(h.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.mu.Lock()
		lists := make([]*list, 0, len(h.lists))
		for _, w := range h.lists {
			lists = append(lists, w)
		}
		h.mu.Unlock()
		now := time.Now()
		for _, w := range lists {
			err := h.cfg.Current(w.l)
			h.mu.Lock()
			if err != nil {
				for s := range w.subs {
					h.end(s, err, endedNotFound)
				}
			} else if len(w.items) > 0 || w.holding > 0 || len(w.recent) > 0 {
				// An idle list costs nothing here.
				h.enforce(w, now)
				for k, at := range w.recent {
					if now.Sub(at) > time.Minute {
						delete(w.recent, k)
					}
				}
			}
			h.mu.Unlock()
		}
	}
}

// Next returns the subscription's next item: of the list from since on
// first, then of the adds from when it started. It blocks until one
// comes or ctx ends (ctx.Err()); once the hub has ended the subscription
// it returns why, at once, or ErrEnded when the hub closed.
func (s *Subscription) Next(ctx context.Context) (store.Item, error) {
	if !s.caughtUp {
		it, ok, err := s.nextCaughtUp(ctx)
		if err != nil || ok {
			return it, err
		}
	}
	h := s.hub
	for {
		h.mu.Lock()
		select {
		case <-s.done:
			h.mu.Unlock()
			if s.err == nil {
				return store.Item{}, ErrEnded
			}
			return store.Item{}, s.err
		default:
		}
		w := s.list
		for s.next < w.end() {
			e := w.items[s.next-w.base]
			s.next++
			if e.at.Before(s.joined) {
				continue // added before it started
			}
			s.last, s.gave = e.Timestamp, true
			if s.next == w.end() {
				s.over = time.Time{}
			}
			h.mu.Unlock()
			h.delivered.Add(ctx, 1)
			return e.Item, nil
		}
		h.mu.Unlock()
		select {
		case <-s.notify:
		case <-s.done:
		case <-ctx.Done():
			return store.Item{}, ctx.Err()
		}
	}
}

// Done is closed once the hub has ended the subscription: Next returns
// why.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// ErrEnded is what Next returns once the hub has closed.
var ErrEnded = errors.New("the subscription has ended")

// nextCaughtUp gives the next item of the catch-up, ok false once it is
// over. It holds one page at a time, within the hub's catch-up bytes.
func (s *Subscription) nextCaughtUp(ctx context.Context) (store.Item, bool, error) {
	h := s.hub
	h.mu.Lock()
	s.asked = time.Now()
	h.mu.Unlock()
	for {
		select {
		case <-s.done:
			s.catchUp = nil                 // let go of the page at once
			return store.Item{}, false, nil // Next says why
		default:
		}
		if len(s.catchUp) > 0 {
			it := s.catchUp[0]
			s.catchUp = s.catchUp[1:]
			s.last, s.gave = it.Timestamp, true
			return it, true, nil
		}
		s.releaseCatchUp()
		if s.from == "" {
			s.caughtUp = true
			return store.Item{}, false, nil
		}
		// A page's worst case, held until it is sent.
		need := int64(h.cfg.CatchUpPage) * int64(h.cfg.Store.Limits().MaxValueBytes+keys.ItemKeyLen+64)
		if err := h.catchUp.Acquire(ctx, need); err != nil {
			return store.Item{}, false, err
		}
		h.mu.Lock()
		select {
		case <-s.done: // ended while it waited: end released what it held
			h.mu.Unlock()
			h.catchUp.Release(need)
			return store.Item{}, false, nil
		default:
		}
		h.setHeld(s, need)
		s.asked = time.Now()
		h.mu.Unlock()
		page, err := h.cfg.Store.Since(ctx, s.list.l, s.from, h.cfg.CatchUpPage)
		if err != nil {
			return store.Item{}, false, err
		}
		items := page.Items
		// Only what the page holds stays held.
		var bytes int64
		for _, it := range items {
			bytes += entryBytes(it)
		}
		h.mu.Lock()
		if bytes < s.held {
			h.setHeld(s, bytes)
		}
		h.mu.Unlock()
		s.from = page.Next
		if s.sent += len(items); s.sent > h.cfg.MaxCatchUp {
			return store.Item{}, false, fmt.Errorf("%w since: more than %d items to send before the new ones (--max-count); subscribe with a later since", errkind.Invalid, h.cfg.MaxCatchUp)
		}
		s.catchUp = items
	}
}

// releaseCatchUp gives back the catch-up bytes held.
func (s *Subscription) releaseCatchUp() {
	s.hub.mu.Lock()
	s.hub.setHeld(s, 0)
	s.hub.mu.Unlock()
}

// setHeld sets the catch-up bytes s holds, giving back any it no longer
// does; h.mu is held.
func (h *Hub) setHeld(s *Subscription, held int64) {
	if d := s.held - held; d > 0 {
		h.catchUp.Release(d)
	}
	switch {
	case s.held == 0 && held > 0:
		s.list.holding++
	case s.held > 0 && held == 0:
		s.list.holding--
	}
	s.held = held
}

// Close ends every subscription (Next returns ErrEnded) and stops
// following the feed.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	for _, w := range h.lists {
		for s := range w.subs {
			h.end(s, nil, endedClosing)
		}
	}
	unfollow := h.unfollow
	h.unfollow = nil
	h.mu.Unlock()
	if unfollow != nil {
		unfollow()
	}
	close(h.stop)
	<-h.ticking
	h.stopping.Wait()
}
