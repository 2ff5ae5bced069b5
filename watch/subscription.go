// A subscription: how it starts (Subscribe, join), the live items it
// reads from its list's buffer (Next, nextLive), and how it ends (end,
// ended, EndError). Its fields are the hub's, under Hub.mu, or its
// reader's (the goroutine that calls Next and Sent), as its struct says.

package watch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// ErrTooSlow is the kind of error that ends a subscription whose client
// reads the items more slowly than they are added.
var ErrTooSlow = fmt.Errorf("%w: the client reads the items more slowly than they are added", errkind.TooSlow)

// Why a list is not watched: the hub is closing, or it watches MaxLists
// lists.
var (
	ErrClosed  = fmt.Errorf("%w: the gateway is shutting down; subscribe again", errkind.Refused)
	ErrAtLimit = fmt.Errorf("%w: this gateway watches its limit", errkind.Refused)
)

// ErrEnded is what Next returns once the hub has closed.
var ErrEnded = errors.New("the subscription has ended")

// Subscription is one subscription to a list. Next gives its items.
type Subscription struct {
	hub    *Hub
	list   *list
	start  store.Position // it delivers what comes after
	caller string         // whose share of the catch-up bytes it holds
	charge Charge
	notify chan struct{} // a token when items may have come
	done   chan struct{} // closed when the hub ends it
	begun  chan struct{} // closed once its head counts as started

	// The hub's, under Hub.mu.
	next    uint64         // the next entry of list.items to read
	joined  store.Position // where the list's buffer covers it from: records up to it come from the store
	knownAt bool           // joined is known
	started bool           // its head counts as started: listgate_subscriptions_active counts it
	err     error          // why it ended, set before done closes
	over    time.Time      // when it fell more than SubscriptionBytes behind; zero if not
	held    int64          // catch-up bytes held
	taken   *pool.Hold     // held's bytes of the pool, while it holds some
	// asked is, while it holds catch-up bytes, when its client was last
	// handed its page or took from it; zero while the gateway reads the
	// page from the store, which is not the client's time.
	asked time.Time

	// Its reader's: of the goroutine that calls Next and Sent, never the
	// hub's.
	resume   store.Position // after the last item sent: where to resume
	page     []Delivery     // of a catch-up, being given
	since    string         // where the next page of the list starts; "" once read
	bounded  bool           // from and to are set
	from, to store.Position // the feed's records to read from the store, after from up to to's
	sent     int            // items of catch-up pages
}

// Delivery is an item given to a subscription, and its position.
type Delivery struct {
	store.Item
	Position store.Position
}

// Charge takes from the caller's budget the cost of a catch-up page read
// for a subscription: items given, records of other lists looked at. An
// error ends the subscription.
type Charge func(ctx context.Context, items, looked int) error

// Start is where a subscription starts, who asks, and what its catch-up
// costs.
type Start struct {
	Since  *int64          // ns: first the items of the list from then on
	After  *store.Position // after a position a client received; nil: now
	Caller string          // whose share of the catch-up bytes its pages take
	Charge Charge          // nil: catch-ups are free
}

// Subscribe watches a list until ctx ends: the items added from now on,
// or after a position; with since, first the list's own items from then
// on.
func (h *Hub) Subscribe(ctx context.Context, l store.List, start Start) (*Subscription, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if start.Since != nil && start.After != nil {
		return nil, fmt.Errorf("%w after: not with since; subscribe after a position, or since a time", errkind.Invalid)
	}
	// The store is asked first, with no lock of the hub's held.
	head, startsIn, err := h.cfg.Store.FeedHead(ctx)
	if err != nil {
		return nil, err
	}
	at := head
	if start.After != nil {
		if err := h.cfg.Store.CheckPosition(ctx, *start.After); err != nil {
			return nil, err
		}
		at = *start.After
	}
	s := &Subscription{hub: h, start: at, resume: at, caller: start.Caller, charge: start.Charge, notify: make(chan struct{}, 1), done: make(chan struct{}), begun: make(chan struct{})}
	if start.Since != nil {
		s.since = keys.TimestampPrefix(max(*start.Since, 0))
	}
	if err := h.join(ctx, s, l, head, startsIn <= 0); err != nil {
		return nil, err
	}
	if startsIn > 0 {
		// It watches from now on, and counts as started once the head
		// does: its operation's goroutine does not wait for that.
		time.AfterFunc(startsIn, func() { h.start(s) })
	}
	context.AfterFunc(ctx, func() { h.leave(s) })
	return s, nil
}

// start counts s as started (listgate_subscriptions_active), unless it
// has ended.
func (h *Hub) start(s *Subscription) {
	h.mu.Lock()
	defer h.unlock()
	if _, ok := s.list.subs[s]; ok && !s.started {
		s.started = true
		close(s.begun)
		h.active.Add(context.Background(), 1)
	}
}

// Started is closed once the subscription counts as started: every add
// begun from then on, through any gateway, comes after its head.
func (s *Subscription) Started() <-chan struct{} { return s.begun }

// join adds s to its list's subscriptions, watching the list if none did,
// and the feed from head if no list was watched, started or not yet
// (start). What the hub read before s started comes from the store.
func (h *Hub) join(ctx context.Context, s *Subscription, l store.List, head store.Position, started bool) error {
	h.mu.Lock()
	defer h.unlock()
	if h.closed {
		return ErrClosed
	}
	key := l.ID()
	w := h.lists[nameOf(key)]
	if w != nil && w.l.Feature != l.Feature {
		if why, err := changed(w.l.Feature, l.Feature); err != nil {
			// The feature was created again, or made live again, since
			// w's subscriptions began: they end, as their next check
			// would end them, and s starts a list of its own.
			for old := range w.subs {
				h.end(old, err, why)
			}
			w = h.lists[nameOf(key)] // gone with its last subscription
		} else if _, err := changed(l.Feature, w.l.Feature); err != nil {
			return err // s's feature is older than the one watched
		}
	}
	if w == nil {
		if len(h.lists) >= h.cfg.MaxLists {
			return fmt.Errorf("%w of %d lists (--max-watched-lists); retry, or on another replica", ErrAtLimit, h.cfg.MaxLists)
		}
		if len(h.lists) == 0 {
			h.run++
			h.cursor = head
			h.cancelWait, h.waiting = h.waiting, nil
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
		w = &list{key: key, l: l, subs: map[*Subscription]struct{}{}, born: h.reads, ready: !h.reading}
		h.lists[nameOf(key)] = w
		h.watched.Add(ctx, 1)
	}
	s.list, s.next = w, w.end()
	if s.next == w.base {
		w.atBase++
	}
	if w.ready {
		// Records after the cursor reach the buffer after s.next.
		s.joined, s.knownAt = h.cursor, true
	}
	w.subs[s] = struct{}{}
	if s.started = started; started {
		close(s.begun)
		h.active.Add(ctx, 1)
	}
	return nil
}

// EndError is an error that ends a subscription, with the position to
// resume from: after the last item it delivered.
type EndError struct {
	Err      error
	Position store.Position
}

func (e *EndError) Error() string {
	return fmt.Sprintf("%v; subscribe again with after: %q, the position of the last item received (or of where it began), to get every item added since", e.Err, e.Position.String())
}

func (e *EndError) Unwrap() error { return e.Err }

// ResumePosition is where to resume, as clients see it.
func (e *EndError) ResumePosition() string { return e.Position.String() }

// end ends a subscription with err (nil when the hub closes: ErrEnded);
// h.mu is held.
func (h *Hub) end(s *Subscription, err error, why metric.AddOption) {
	w := s.list
	if _, ok := w.subs[s]; !ok {
		return
	}
	if why != nil {
		h.ended.Add(context.Background(), 1, why)
	}
	delete(w.subs, s)
	h.setHeld(s, 0)
	s.err = err
	close(s.done)
	if s.started {
		h.active.Add(context.Background(), -1)
	}
	if len(w.subs) == 0 {
		h.unwatch(w)
	} else if s.next == w.base {
		h.leftBase(w)
	}
	h.buffered.Store(h.total)
}

// leave is a subscription's end by its context.
func (h *Hub) leave(s *Subscription) {
	h.mu.Lock()
	defer h.unlock()
	h.end(s, context.Canceled, nil)
}

// Next returns the subscription's next item: of the list from since on
// first, then of the feed after its start. It blocks until one comes or
// ctx ends (ctx.Err()); once the hub has ended the subscription it
// returns why, at once, or ErrEnded when the hub closed.
func (s *Subscription) Next(ctx context.Context) (Delivery, error) {
	if !s.bounded {
		if err := s.bound(ctx); err != nil {
			return Delivery{}, err
		}
	}
	for len(s.page) > 0 || s.since != "" || s.from.Less(s.to) {
		d, ok, err := s.nextCatchUp(ctx)
		if err != nil || ok {
			return d, err
		}
	}
	return s.nextLive(ctx)
}

// bound sets what the subscription reads from the store: the records after
// its start up to where the list's buffer covers it from, once the hub
// knows (a list first watched while the hub reads the feed is covered from
// where that read ends).
func (s *Subscription) bound(ctx context.Context) error {
	h := s.hub
	for {
		h.mu.Lock()
		known, joined, err := s.knownAt, s.joined, s.ended()
		h.unlock()
		switch {
		case err != nil:
			return err
		case known:
			s.bounded = true
			if s.start.Less(joined) {
				s.from, s.to = s.start, joined
			}
			return nil
		}
		select {
		case <-s.notify:
		case <-s.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// nextLive gives the next item of the list's buffer after the start.
func (s *Subscription) nextLive(ctx context.Context) (Delivery, error) {
	h := s.hub
	for {
		h.mu.Lock()
		if err := s.ended(); err != nil {
			h.unlock()
			return Delivery{}, err
		}
		w := s.list
		for s.next < w.end() {
			e := w.items[s.next-w.base]
			h.read(s)
			if !s.start.Before(e.at.Record, int(e.at.Item)) {
				continue // read before it started
			}
			if s.next == w.end() {
				s.over = time.Time{}
			}
			h.unlock()
			h.delivered.Add(ctx, 1)
			return Delivery{Item: e.Item, Position: e.at}, nil
		}
		h.unlock()
		select {
		case <-s.notify:
		case <-s.done:
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// ended is why the hub ended s, or nil; h.mu is held. One too slow names
// where to resume: after the last item sent, which its reader has told
// (Sent) before it asks for more.
func (s *Subscription) ended() error {
	select {
	case <-s.done:
		switch {
		case s.err == nil:
			return ErrEnded
		case errors.Is(s.err, errkind.TooSlow):
			return &EndError{Err: s.err, Position: s.resume}
		}
		return s.err
	default:
		return nil
	}
}

// Sent tells that the item Next gave last reached the client: a
// subscription ended from now on resumes after it. Called by the reader,
// before it calls Next again.
func (s *Subscription) Sent(d Delivery) { s.resume = d.Position }

// Done is closed once the hub has ended the subscription: Next returns
// why.
func (s *Subscription) Done() <-chan struct{} { return s.done }
