// Package watch delivers the items added to lists to the subscriptions that
// watch them. A list watched in this process has one poller, whatever the
// number of its subscriptions: every interval it reads the list's
// partition for the items it has not delivered (one single-partition
// query, store.Since), and hands each new item, once, oldest first, to
// every subscription of the list. The partition is the only source, so
// items added through any gateway, or directly in the database, are
// delivered alike.
//
// Delivery rule. A poller keeps the newest timestamp it has delivered. An
// item is delivered, once, if when a poll finds it its timestamp is no more
// than the lateness window before that newest timestamp (items stamped
// with the current time and added through different gateways arrive a
// little out of order); an item stamped earlier than that is not. Within
// one poll, items go out oldest first; a late item goes out after the
// newer ones delivered before it. A subscription with since first gets
// every item from since on that was in the list when it subscribed, oldest
// first, then the items the poller delivers from then on, so that
// subscribing again with the timestamp of the last item received misses
// nothing.
//
// It knows nothing of GraphQL or of the catalog; it must never write.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Config is what a Hub is built from.
type Config struct {
	Store    store.Store
	Interval time.Duration // between two polls of a list
	Lateness time.Duration // the lateness window of the delivery rule
	MaxLists int           // lists watched at once by this process
	// MaxCatchUp bounds the items a subscription with since may be sent
	// before its live items.
	MaxCatchUp int
	// Buffer is how many items a subscription may have waiting for its
	// client; one that falls further behind is ended (ErrTooSlow).
	Buffer int
	// Batch bounds the new items one poll reads; a poll that reads that
	// many reads again at once.
	Batch  int
	Now    func() time.Time
	Tracer trace.Tracer
	Meter  metric.Meter
	Log    *slog.Logger
}

// Defaults are the settings a zero field of Config takes.
var Defaults = Config{Interval: time.Second, Lateness: 5 * time.Second, MaxLists: 10_000, MaxCatchUp: 100_000, Buffer: 1000, Batch: 1000}

// ErrTooSlow ends a subscription whose client does not read its items as
// fast as they come.
var ErrTooSlow = errors.New("the client reads the items more slowly than they are added; subscribe again with since: the timestamp of the last item received")

// maxSeen bounds the keys a poller remembers inside the lateness window;
// past it the window shrinks (a list that takes more items than this in
// one window has its late items delivered within a shorter one).
const maxSeen = 10_000

// Hub holds the pollers of the watched lists.
type Hub struct {
	cfg     Config
	mu      sync.Mutex
	pollers map[string]*poller // by list
	closed  bool
	running sync.WaitGroup // the pollers' goroutines

	polls, delivered metric.Int64Counter
	active, watched  metric.Int64UpDownCounter
}

// New returns a hub.
func New(cfg Config) (*Hub, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, f := range []struct{ v, d *int }{{&cfg.MaxLists, &Defaults.MaxLists}, {&cfg.MaxCatchUp, &Defaults.MaxCatchUp}, {&cfg.Buffer, &Defaults.Buffer}, {&cfg.Batch, &Defaults.Batch}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = Defaults.Interval
	}
	if cfg.Lateness < 0 {
		cfg.Lateness = 0
	}
	h := &Hub{cfg: cfg, pollers: map[string]*poller{}}
	var err error
	if h.polls, err = cfg.Meter.Int64Counter("listgate.subscription.polls", metric.WithDescription("Polls of watched lists: one single-partition query each.")); err != nil {
		return nil, err
	}
	if h.delivered, err = cfg.Meter.Int64Counter("listgate.subscription.items.delivered", metric.WithDescription("Items delivered to subscriptions, once per subscription.")); err != nil {
		return nil, err
	}
	if h.active, err = cfg.Meter.Int64UpDownCounter("listgate.subscriptions.active", metric.WithDescription("Subscriptions open in this process.")); err != nil {
		return nil, err
	}
	if h.watched, err = cfg.Meter.Int64UpDownCounter("listgate.subscription.lists.watched", metric.WithDescription("Lists this process polls for its subscriptions.")); err != nil {
		return nil, err
	}
	return h, nil
}

// Subscription is one subscription to a list.
type Subscription struct {
	// Items are the list's items as they are delivered. The channel closes
	// when the subscription ends: its context ended, the hub closed, or
	// Err says why.
	Items <-chan store.Item
	err   error // set before Items closes
}

// Err is why the subscription ended, when not by its context or the hub
// closing.
func (s *Subscription) Err() error { return s.err }

// Subscribe watches a list until ctx ends: the items added from now on, or,
// with since (ns), also those from since on already in the list.
func (h *Hub) Subscribe(ctx context.Context, l store.List, since *int64) (*Subscription, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	sub := &subscriber{live: make(chan store.Item, h.cfg.Buffer), done: make(chan struct{})}
	p, snapshot, err := h.join(ctx, l, sub, since != nil)
	if err != nil {
		return nil, err
	}
	h.active.Add(ctx, 1)
	out := make(chan store.Item)
	s := &Subscription{Items: out}
	go func() {
		defer func() {
			h.leave(p, sub)
			h.active.Add(context.WithoutCancel(ctx), -1)
			close(out)
		}()
		if since != nil {
			if err := h.catchUp(ctx, l, *since, snapshot, out); err != nil {
				s.err = err
				return
			}
		}
		send := func(it store.Item) bool {
			select {
			case out <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case it := <-sub.live:
				if !send(it) {
					return
				}
			case <-sub.done:
				s.err = sub.err
				// Items delivered before the end still go out.
				for {
					select {
					case it := <-sub.live:
						if !send(it) {
							return
						}
					default:
						return
					}
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return s, nil
}

// subscriber is a subscription as its poller holds it.
type subscriber struct {
	live chan store.Item // items delivered, waiting for the client
	done chan struct{}   // closed when the poller ends the subscription
	err  error           // why, set before done closes
}

// Why a list is not watched: the hub is closing, or it watches MaxLists
// lists.
var (
	ErrClosed  = fmt.Errorf("%w: the gateway is shutting down; subscribe again", errkind.Refused)
	ErrAtLimit = fmt.Errorf("%w: this gateway watches its limit", errkind.Refused)
)

// snapshot is what a poller had delivered when a subscription with since
// joined it: its catch-up sends exactly what the poller will not.
type snapshot struct {
	seen  map[string]bool // keys delivered within the window
	floor int64           // the window's start: older items are never delivered live
}

// join adds sub to the list's poller, starting one if none watches the
// list. The hub's lock is held only to find or register the poller: a
// poller's first read, which may wait on the database, holds no one else
// up.
func (h *Hub) join(ctx context.Context, l store.List, sub *subscriber, wantSnapshot bool) (*poller, snapshot, error) {
	// A feature created again is another list: its own poller.
	key := fmt.Sprintf("%s\x00%s\x00%d", l.Feature.Key(), l.EntityID, l.Feature.CreatedAt.UnixNano())
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return nil, snapshot{}, ErrClosed
		}
		p := h.pollers[key]
		if p == nil {
			if len(h.pollers) >= h.cfg.MaxLists {
				h.mu.Unlock()
				return nil, snapshot{}, fmt.Errorf("%w of %d lists (--max-watched-lists); retry, or on another replica", ErrAtLimit, h.cfg.MaxLists)
			}
			p = h.newPoller(key, l)
			h.pollers[key] = p
			h.mu.Unlock()
			p.start(ctx)
			if p.err != nil {
				h.mu.Lock()
				if h.pollers[key] == p {
					delete(h.pollers, key)
				}
				h.mu.Unlock()
			}
		} else {
			h.mu.Unlock()
		}
		select {
		case <-p.ready:
		case <-ctx.Done():
			return nil, snapshot{}, ctx.Err()
		}
		if p.err != nil {
			return nil, snapshot{}, p.err
		}
		h.mu.Lock()
		if h.pollers[p.key] != p {
			// It retired with its last subscription meanwhile: start again.
			h.mu.Unlock()
			continue
		}
		p.mu.Lock()
		p.subs[sub] = struct{}{}
		var snap snapshot
		if wantSnapshot {
			snap = snapshot{seen: maps.Clone(p.seen), floor: p.floor()}
		}
		p.mu.Unlock()
		h.mu.Unlock()
		return p, snap, nil
	}
}

// leave removes sub from its poller, and stops the poller with its last
// subscription.
func (h *Hub) leave(p *poller, sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p.mu.Lock()
	delete(p.subs, sub)
	empty := len(p.subs) == 0
	p.mu.Unlock()
	if empty && h.pollers[p.key] == p {
		p.retire()
		delete(h.pollers, p.key)
	}
}

// Close ends every subscription (their Items close) and stops the
// pollers, waiting for a poll under way: the store may be closed after.
func (h *Hub) Close() {
	defer h.running.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for key, p := range h.pollers {
		p.mu.Lock()
		for sub := range p.subs {
			p.end(sub, nil)
		}
		p.mu.Unlock()
		p.retire()
		delete(h.pollers, key)
	}
}

// catchUp sends the items of the list from since on that the poller will
// not deliver: those it delivered before the subscription joined, and
// those older than its window, oldest first, at most MaxCatchUp.
func (h *Hub) catchUp(ctx context.Context, l store.List, since int64, snap snapshot, out chan<- store.Item) error {
	from := keys.TimestampPrefix(max(since, 0))
	sent := 0
	for {
		items, err := h.cfg.Store.Since(ctx, l, from, h.cfg.Batch+1)
		if err != nil {
			return err
		}
		for i, it := range items {
			if i == h.cfg.Batch {
				break // the first item of the next batch
			}
			if !snap.seen[it.Key] && it.Timestamp >= snap.floor {
				continue // the poller delivers it
			}
			if sent++; sent > h.cfg.MaxCatchUp {
				return fmt.Errorf("%w since: more than %d items to send before the new ones (--max-count); subscribe with a later since", errkind.Invalid, h.cfg.MaxCatchUp)
			}
			select {
			case out <- it:
			case <-ctx.Done():
				return nil
			}
		}
		if len(items) <= h.cfg.Batch {
			return nil
		}
		from = items[h.cfg.Batch].Key
	}
}
