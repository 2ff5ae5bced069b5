// The hub: its state and its lock, Hub.mu, which guards what its struct
// says; its workers (follow, in follow.go; tick, here); and its end.
// unlock does, once mu is unlocked, what was decided under it: nothing but
// this package's code runs with mu held.

package watch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
)

// Hub holds the watched lists and follows the feed for them.
type Hub struct {
	cfg      Config
	catchUp  *pool.Pool     // bytes of the catch-up pages held, each caller's share of them
	pageNeed int64          // the bytes a catch-up page may hold, at worst
	stop     chan struct{}  // closed by Close
	wake     chan struct{}  // a token when watching begins
	workers  sync.WaitGroup // follow and tick

	// mu guards what follows, and each Subscription's fields marked as
	// the hub's. Nothing is called under it but this package's own code.
	mu     sync.Mutex
	lists  map[listName]*list
	total  int64          // bytes of the items kept for every list
	cursor store.Position // the feed is read into the lists up to here
	run    uint64         // counts the times watching began: a read of an earlier run is dropped
	reads  uint64         // counts the reads of the feed begun
	// reading is set while a read is in flight: a list watched from then
	// on is left out of it, and its coverage is known when it ends.
	reading bool
	closed  bool
	// waiting cancels follow's wait for the feed past the cursor of the
	// run it reads (calling it once that wait has ended does nothing).
	waiting context.CancelFunc
	// What was decided under mu is done once it is unlocked (unlock): the
	// catch-up bytes let go of are given back to the pool, and a wait for
	// the feed made moot by a new run is cancelled (its records may come
	// before the position waited for).
	letGo      []letGo
	cancelWait context.CancelFunc

	// Read by the metrics' callbacks, which take no lock of the hub's.
	buffered atomic.Int64 // total, as last set

	delivered, records metric.Int64Counter
	ended              metric.Int64Counter
	active, watched    metric.Int64UpDownCounter
}

// New returns a hub, or an error naming the setting that cannot work.
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
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = d.ReadTimeout
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
	if err := CheckBounds(cfg.Store.Limits(), cfg.CatchUpPage, cfg.CatchUpBytes, cfg.ListBytes, cfg.TotalBytes); err != nil {
		return nil, err
	}
	need := PageNeed(cfg.CatchUpPage, cfg.Store.Limits())
	share := cfg.CatchUpBytes
	if cfg.CatchUpShare > 0 && cfg.CatchUpShare < 1 {
		share = max(int64(cfg.CatchUpShare*float64(cfg.CatchUpBytes)), need)
	}
	h := &Hub{cfg: cfg, catchUp: pool.NewFloor(cfg.CatchUpBytes, share, need), pageNeed: need, lists: map[listName]*list{},
		stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := h.instrument(cfg.Meter); err != nil {
		return nil, err
	}
	h.workers.Add(2)
	go h.follow()
	go h.tick()
	return h, nil
}

func (h *Hub) instrument(m metric.Meter) error {
	var err error
	if h.records, err = m.Int64Counter("listgate.change_feed.records", metric.WithDescription("Change records of the lists this process watches read from the feed: one per add, through any gateway.")); err != nil {
		return err
	}
	if h.delivered, err = m.Int64Counter("listgate.subscription.items.delivered", metric.WithDescription("Items delivered to subscriptions, once per subscription.")); err != nil {
		return err
	}
	if h.ended, err = m.Int64Counter("listgate.subscriptions.ended", metric.WithDescription("Subscriptions the gateway ended, by reason: too_slow, not_found (feature deleted or created again), not_live (feature made not live), position_expired (made not live and live again, or the gateway fell behind what the feed keeps), shutting_down.")); err != nil {
		return err
	}
	// At zero from the start, each reason: a dashboard shows 0, not "No
	// data", and an absent() alert fires only for a gateway not scraped.
	h.records.Add(context.Background(), 0)
	h.delivered.Add(context.Background(), 0)
	for _, r := range []metric.AddOption{endedTooSlow, endedNotFound, endedExpired, endedNotLive, endedClosing} {
		h.ended.Add(context.Background(), 0, r)
	}
	if h.active, err = m.Int64UpDownCounter("listgate.subscriptions.active", metric.WithDescription("Subscriptions open in this process, from when they count as started: every add begun from then on, through any gateway, comes after their head.")); err != nil {
		return err
	}
	if h.watched, err = m.Int64UpDownCounter("listgate.subscription.lists.watched", metric.WithDescription("Lists this process watches for its subscriptions.")); err != nil {
		return err
	}
	_, err = m.Int64ObservableGauge("listgate.subscription.buffer", metric.WithUnit("By"),
		metric.WithDescription("Bytes of items kept for subscriptions that have not read them yet."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(h.buffered.Load())
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = m.Int64ObservableGauge("listgate.subscription.catch_up.waiting",
		metric.WithDescription("Subscriptions waiting for room in --catch-up-bytes for a catch-up page, or in their caller's share of it (--caller-catch-up-bytes-share)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(h.catchUp.Waiting())
			return nil
		}))
	return err
}

// Why a subscription was ended, as listgate_subscriptions_ended_total's
// reason.
var (
	endedTooSlow  = reason("too_slow")
	endedNotFound = reason("not_found")
	endedExpired  = reason("position_expired")
	endedNotLive  = reason("not_live")
	endedClosing  = reason("shutting_down")
)

func reason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// tick checks, every Tick, what no add would: subscriptions behind for too
// long, and lists of features deleted or created again since.
func (h *Hub) tick() {
	defer h.workers.Done()
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
		h.unlock()
		now := time.Now()
		for _, w := range lists {
			err := h.cfg.Current(w.l) // no lock held
			h.mu.Lock()
			if err != nil {
				why := endedNotFound
				if errors.Is(err, errkind.PositionExpired) {
					why = endedExpired
				} else if errors.Is(err, errkind.Invalid) {
					why = endedNotLive
				}
				for s := range w.subs {
					h.end(s, err, why)
				}
			} else if len(w.items) > 0 || w.holding > 0 {
				h.enforce(w, now) // an idle list costs nothing here
			}
			h.buffered.Store(h.total)
			h.unlock()
		}
	}
}

// unlock unlocks h.mu, then does what was decided under it: it cancels a
// wait for the feed, and gives back to the pool the catch-up bytes let go
// of. Neither is called with a lock of the hub's held: a context's cancel
// runs what waits on it, and the pool is another package's.
func (h *Hub) unlock() {
	letGo, cancelWait := h.letGo, h.cancelWait
	h.letGo, h.cancelWait = nil, nil
	h.mu.Unlock()
	if cancelWait != nil {
		cancelWait()
	}
	for _, g := range letGo {
		if g.keep == 0 {
			g.hold.Release()
		} else {
			g.hold.Keep(g.keep)
		}
	}
}

// CatchUpWaiting is how many subscriptions wait for catch-up bytes, as
// the metric shows it.
func (h *Hub) CatchUpWaiting() int64 { return h.catchUp.Waiting() }

// Close ends every subscription (Next returns ErrEnded) and stops
// following the feed.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.unlock()
		return
	}
	h.closed = true
	for _, w := range h.lists {
		for s := range w.subs {
			h.end(s, nil, endedClosing)
		}
	}
	h.unlock()
	close(h.stop)
	h.workers.Wait()
}

// Buffered is the bytes of items kept for subscriptions, as the metric
// shows it: zero once every subscription has ended.
func (h *Hub) Buffered() int64 { return h.buffered.Load() }
