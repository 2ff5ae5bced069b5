// Package watch delivers the items added to lists to the subscriptions
// that watch them. It follows the store's change feed (store.Follower),
// the record of every add to a live feature, while it watches any list
// (subscriptions to others are refused above it): so an item is
// delivered because it was added, whatever its timestamp, whichever
// gateway added it, and whether or not a cap or its TTL has removed it
// from the list since; a list nobody adds to costs nothing to watch.
//
// Every item delivered carries its position in the feed. A subscription
// starts after a position: the feed's head (from now on), or one a client
// received (after it, every add once, in the feed's order); what the hub
// read before it joined comes from the store (Follower.ListFeed), the rest
// from the list's buffer. With since it first reads the list itself from
// that time on.
//
// Each watched list keeps the items its slowest subscription has not read,
// once; each subscription reads them at its own pace. One that falls too
// far behind, for too long, is ended with ErrTooSlow, naming the position
// to resume from; the items kept are bounded per subscription, per list
// and in all.
//
// Catch-up pages are held within a pool of bytes (package pool) of which
// each caller holds at most its share: one caller's catch-ups that its
// clients do not read never make another caller's wait.
//
// Concurrency: one goroutine reads the feed (follow), one checks the
// lists every Tick (tick); each subscription is read by its client's
// goroutine (Next). Their shared state is guarded by Hub.mu, and nothing
// is called under it but this package's own code: never the store, never
// a callback (the store calls nothing back: it is pulled), never the pool
// (catch-up bytes let go of under it are given back once it is unlocked).
// It knows nothing of GraphQL or of value types; it must never write.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Config is what a Hub is built from.
type Config struct {
	Store    store.Store
	MaxLists int // lists watched at once by this process
	// MaxCatchUp bounds the items a subscription may be sent before its
	// live items (by since, or from a position).
	MaxCatchUp int
	// CatchUpBytes bounds the bytes of the catch-up pages all
	// subscriptions hold at once; CatchUpPage is the items of one page.
	CatchUpBytes int64
	CatchUpPage  int
	// CatchUpShare is the share of CatchUpBytes one caller's
	// subscriptions may hold (0: all), at least one page: past it they
	// wait, holding none, and other callers' do not.
	CatchUpShare float64
	// SubscriptionBytes is how far behind, in bytes of items, a
	// subscription may fall: past it for SlowAfter, it is ended
	// (ErrTooSlow), as is one that holds a catch-up page its client does
	// not read from for SlowAfter.
	SubscriptionBytes int64
	SlowAfter         time.Duration
	// ReadTimeout bounds a store read of one catch-up page: past it, the
	// subscription is ended UNAVAILABLE, naming where to resume. SlowAfter
	// runs only once the page is handed over: a slow store is not its
	// client's fault.
	ReadTimeout time.Duration
	// ListBytes and TotalBytes bound the items kept for one list, and for
	// every list: past them the subscriptions furthest behind are ended.
	ListBytes, TotalBytes int64
	// Current says whether a watched list's feature is still the one
	// subscribed to (nil: it is): one deleted or created again since ends
	// its subscriptions with the error. It is called with no lock held.
	Current func(store.List) error
	// Check is run every Tick: what ends slow subscriptions and those of
	// features deleted, when no add comes.
	Tick  time.Duration
	Meter metric.Meter
	Log   *slog.Logger
}

// Defaults are the settings a zero field of Config takes.
var Defaults = Config{MaxLists: 10_000, MaxCatchUp: 100_000, CatchUpBytes: 64 << 20, CatchUpPage: 100,
	SubscriptionBytes: 8 << 20, SlowAfter: 10 * time.Second, ReadTimeout: 10 * time.Second, ListBytes: 64 << 20, TotalBytes: 512 << 20, Tick: time.Second}

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

// readBytes bounds the items one read of the feed gives.
const readBytes = 4 << 20

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
	lists  map[store.ListID]*list
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
	h := &Hub{cfg: cfg, catchUp: pool.New(cfg.CatchUpBytes, share), pageNeed: need, lists: map[store.ListID]*list{},
		stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := h.instrument(cfg.Meter); err != nil {
		return nil, err
	}
	h.workers.Add(2)
	go h.follow()
	go h.tick()
	return h, nil
}

// CheckBounds refuses bounds that cannot work with a store's limits,
// naming the flag to raise: catch-up bytes that cannot hold one page (no
// catch-up could start), a list's bound below one add (an add would end
// every subscription of its list), or a total below one list's.
func CheckBounds(l store.Limits, page int, catchUp, list, total int64) error {
	if need := PageNeed(page, l); catchUp < need {
		return fmt.Errorf("--catch-up-bytes %d: less than one catch-up page may hold (%d bytes: %d items of --max-value-bytes, or one add of --max-add-bytes); no catch-up could start", catchUp, need, page)
	}
	if add := AddNeed(l); list < add {
		return fmt.Errorf("--watched-list-bytes %d: less than one add may hold (%d bytes: --max-add-bytes, and %d bytes an item for --max-add-items); one add would end every subscription of its list", list, add, entryOverhead)
	}
	if total < list {
		return fmt.Errorf("--subscription-memory %d: less than --watched-list-bytes %d", total, list)
	}
	return nil
}

// PageNeed is what one catch-up page may hold, at worst: page items of
// the largest value, or one add of the largest size.
func PageNeed(page int, l store.Limits) int64 {
	return max(int64(page)*int64(l.MaxValueBytes+keys.ItemKeyLen+entryOverhead), AddNeed(l))
}

// AddNeed is what one add's items may weigh in a buffer, at worst.
func AddNeed(l store.Limits) int64 {
	return int64(l.MaxAddBytes) + int64(l.MaxAddItems)*entryOverhead
}

func (h *Hub) instrument(m metric.Meter) error {
	var err error
	if h.records, err = m.Int64Counter("listgate.change_feed.records", metric.WithDescription("Change records of the lists this process watches read from the feed: one per add, through any gateway.")); err != nil {
		return err
	}
	if h.delivered, err = m.Int64Counter("listgate.subscription.items.delivered", metric.WithDescription("Items delivered to subscriptions, once per subscription.")); err != nil {
		return err
	}
	if h.ended, err = m.Int64Counter("listgate.subscriptions.ended", metric.WithDescription("Subscriptions the gateway ended, by reason: too_slow, not_found (feature deleted or created again), shutting_down.")); err != nil {
		return err
	}
	if h.active, err = m.Int64UpDownCounter("listgate.subscriptions.active", metric.WithDescription("Subscriptions open in this process.")); err != nil {
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
	endedClosing  = reason("shutting_down")
)

func reason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// list is a watched list: the items its slowest subscription has not
// read, and its subscriptions. Guarded by Hub.mu.
//
// An item is dropped as soon as every subscription has read it, so that
// the bounds count only what some subscription has not: base is the next
// of the slowest subscriptions, and atBase how many they are; once none
// is left there, trim finds the new slowest.
type list struct {
	key store.ListID
	l   store.List
	// born is the count of reads begun when the list was first watched:
	// reads begun after take its records. ready is set once the reads that
	// take them begin from the cursor: the list was watched while none was
	// in flight, or the one in flight has ended.
	born    uint64
	ready   bool
	base    uint64  // the sequence number of items[0]
	atBase  int     // the subscriptions whose next is base
	items   []entry // oldest first
	dead    int     // dropped entries before items in its array, cleared
	bytes   int64   // of items
	cumBase int64   // bytes of the items dropped before items[0]
	subs    map[*Subscription]struct{}
	holding int // how many of subs hold catch-up bytes
}

// entry is an item kept for a list's subscriptions.
type entry struct {
	store.Item
	at  store.Position // just after it
	cum int64          // bytes of the list's items up to and with this one
}

// entryOverhead is what an item weighs in a buffer beyond its key and
// value.
const entryOverhead = store.ItemOverhead

func entryBytes(it store.Item) int64 { return int64(len(it.Key) + len(it.Value) + entryOverhead) }

func (w *list) end() uint64 { return w.base + uint64(len(w.items)) }

// cumBefore is the bytes of the list's items before sequence number seq.
func (w *list) cumBefore(seq uint64) int64 {
	if seq == w.base {
		return w.cumBase
	}
	return w.items[seq-w.base-1].cum
}

// behind is how many bytes of items s has yet to read.
func (w *list) behind(s *Subscription) int64 { return w.cumBefore(w.end()) - w.cumBefore(s.next) }

// Subscription is one subscription to a list. Next gives its items.
type Subscription struct {
	hub    *Hub
	list   *list
	start  store.Position // it delivers what comes after
	caller string         // whose share of the catch-up bytes it holds
	charge Charge
	notify chan struct{} // a token when items may have come
	done   chan struct{} // closed when the hub ends it

	// The hub's, under Hub.mu.
	next    uint64         // the next entry of list.items to read
	joined  store.Position // where the list's buffer covers it from: records up to it come from the store
	knownAt bool           // joined is known
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
	head, err := h.cfg.Store.FeedHead(ctx)
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
	s := &Subscription{hub: h, start: at, resume: at, caller: start.Caller, charge: start.Charge, notify: make(chan struct{}, 1), done: make(chan struct{})}
	if start.Since != nil {
		s.since = keys.TimestampPrefix(max(*start.Since, 0))
	}
	if err := h.join(ctx, s, l, head); err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { h.leave(s) })
	return s, nil
}

// join adds s to its list's subscriptions, watching the list if none did,
// and the feed from head if no list was watched. What the hub read before
// s started comes from the store.
func (h *Hub) join(ctx context.Context, s *Subscription, l store.List, head store.Position) error {
	h.mu.Lock()
	defer h.unlock()
	if h.closed {
		return ErrClosed
	}
	key := l.ID()
	w := h.lists[key]
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
		h.lists[key] = w
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
	h.active.Add(ctx, 1)
	return nil
}

// watchedBefore says, for the read r, whether a list was watched when it
// began: what the store asks as it reads the feed, with no lock of its own
// held. A list watched during the read is left out of it whole.
func (h *Hub) watchedBefore(r uint64) func(store.ListID) bool {
	return func(id store.ListID) bool {
		h.mu.Lock()
		defer h.unlock()
		w := h.lists[id]
		return w != nil && w.born < r
	}
}

// follow reads the feed into the watched lists while any is watched, from
// New until Close.
func (h *Hub) follow() {
	defer h.workers.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.stop
		cancel()
	}()
	failing := time.Time{}
	for {
		h.mu.Lock()
		at, run, watching := h.cursor, h.run, len(h.lists) > 0
		if watching {
			h.reads++
			h.reading = true
		}
		r := h.reads
		h.unlock()
		if !watching {
			select {
			case <-h.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		changes, reached, err := h.cfg.Store.ReadFeed(ctx, at, h.watchedBefore(r), readBytes)
		if err != nil {
			current := h.take(r, run, nil, at) // nothing read: the cursor stays
			if ctx.Err() != nil {
				return
			}
			if !current {
				continue // the new run is read from its start, at once
			}
			if time.Since(failing) > time.Minute {
				failing = time.Now()
				h.cfg.Log.Warn("reading the change feed failed; retrying (logged once a minute)", "err", err)
			}
			if !sleep(ctx, h.cfg.Tick) {
				return
			}
			continue
		}
		current := h.take(r, run, changes, reached)
		h.records.Add(ctx, int64(len(changes)))
		if !current {
			continue // a read of an earlier run: the new one is read from its start, at once
		}
		if n := len(changes); n > 0 && reached.Record == changes[n-1].Record {
			continue // stopped at its bound: more to read
		}
		wait, stop := h.waitContext(ctx, run)
		err = h.cfg.Store.WaitFeed(wait, reached)
		stop()
		if err != nil && ctx.Err() != nil {
			return
		}
	}
}

// waitContext is the context of a wait for the feed past the cursor of
// the run: a new run, whose records may come before the position waited
// for, cancels it (join).
func (h *Hub) waitContext(ctx context.Context, run uint64) (context.Context, context.CancelFunc) {
	wait, stop := context.WithCancel(ctx)
	h.mu.Lock()
	if run == h.run {
		h.waiting = stop
	} else {
		stop() // it began while the read ended
	}
	h.unlock()
	return wait, stop
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// take ends the read r: it puts the records read into their lists,
// unless the hub stopped watching since the read began, and enforces the
// bounds; the lists first watched during the read are covered from where
// the next read begins. It returns false for a read of an earlier run:
// what it reached says nothing of the run begun since.
func (h *Hub) take(r, run uint64, changes []store.Change, reached store.Position) bool {
	h.mu.Lock()
	defer h.unlock()
	h.reading = false
	defer h.cover(r)
	if run != h.run {
		return false
	}
	h.cursor = reached
	now := time.Now()
	touched := map[*list]struct{}{}
	for _, c := range changes {
		w := h.lists[c.List]
		if w == nil || w.born >= r {
			continue
		}
		for i, it := range c.Items {
			h.push(w, entry{Item: it, at: c.After(i)})
		}
		touched[w] = struct{}{}
	}
	for w := range touched {
		for s := range w.subs {
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
		h.enforce(w, now)
	}
	h.enforceTotal()
	h.buffered.Store(h.total)
	return true
}

// cover sets the coverage of the lists first watched during the read r,
// which left them out: every record after the cursor reaches their
// buffers; their subscriptions read the rest from the store. h.mu is held.
func (h *Hub) cover(r uint64) {
	for _, w := range h.lists {
		if w.ready || w.born != r {
			continue
		}
		w.ready = true
		for s := range w.subs {
			if !s.knownAt {
				s.joined, s.knownAt = h.cursor, true
				select {
				case s.notify <- struct{}{}:
				default:
				}
			}
		}
	}
}

// push appends an item to a list's buffer.
func (h *Hub) push(w *list, e entry) {
	b := entryBytes(e.Item)
	e.cum = w.cumBefore(w.end()) + b
	if len(w.items) == cap(w.items) {
		w.dead = 0 // append moves the live entries to a new array
	}
	w.items = append(w.items, e)
	w.bytes += b
	h.total += b
}

// enforce ends the subscriptions of w too far behind for too long, and,
// past the list's bound, those furthest behind. The list holds no item
// every subscription has read (read drops them): its bytes are unread.
func (h *Hub) enforce(w *list, now time.Time) {
	for s := range w.subs {
		if s.held > 0 && !s.asked.IsZero() && now.Sub(s.asked) > h.cfg.SlowAfter {
			// Its client does not read the catch-up page it holds.
			h.end(s, ErrTooSlow, endedTooSlow)
			continue
		}
		switch b := w.behind(s); {
		case b > h.cfg.SubscriptionBytes && !s.over.IsZero() && now.Sub(s.over) > h.cfg.SlowAfter:
			h.end(s, ErrTooSlow, endedTooSlow)
		case b > h.cfg.SubscriptionBytes && s.over.IsZero():
			s.over = now
		case b <= h.cfg.SubscriptionBytes:
			s.over = time.Time{}
		}
	}
	for w.bytes > h.cfg.ListBytes && len(w.subs) > 0 {
		h.end(furthestBehind(w), ErrTooSlow, endedTooSlow)
	}
}

// enforceTotal ends, while the items kept for every list pass TotalBytes,
// the subscription furthest behind of any list.
func (h *Hub) enforceTotal() {
	for h.total > h.cfg.TotalBytes {
		var worst *Subscription
		var most int64
		for _, w := range h.lists {
			if len(w.items) == 0 {
				continue
			}
			if s := furthestBehind(w); s != nil && w.behind(s) > most {
				worst, most = s, w.behind(s)
			}
		}
		if worst == nil {
			return
		}
		h.end(worst, ErrTooSlow, endedTooSlow)
	}
}

// furthestBehind is the subscription of w with the most items to read.
func furthestBehind(w *list) *Subscription {
	var slowest *Subscription
	for s := range w.subs {
		if slowest == nil || s.next < slowest.next {
			slowest = s
		}
	}
	return slowest
}

// deadSlack is how many dropped entries a list's array may hold before
// its live ones are moved to an array of their own, whatever their number.
const deadSlack = 64

// trim drops the items every subscription of w has read. It costs what it
// drops, not what is kept: the entries dropped are cleared, so that the
// array keeps none of their values, and items moves past them; append
// copies only the live ones when it grows. Once the array holds more
// dropped entries than live ones (and more than deadSlack), the live ones
// are moved, so that a list whose slowest reader stalls does not keep a
// burst's array: a copy of fewer entries than were dropped since the last.
func (h *Hub) trim(w *list) {
	low, at := w.end(), 0
	for s := range w.subs {
		switch {
		case s.next < low:
			low, at = s.next, 1
		case s.next == low:
			at++
		}
	}
	w.atBase = at
	n := int(low - w.base)
	if n == 0 {
		return
	}
	freed := w.items[n-1].cum - w.cumBase
	w.cumBase = w.items[n-1].cum
	clear(w.items[:n])
	w.items = w.items[n:]
	if w.dead += n; w.dead > max(len(w.items), deadSlack) {
		w.items, w.dead = append([]entry(nil), w.items...), 0
	}
	w.base = low
	w.bytes -= freed
	h.total -= freed
	h.buffered.Store(h.total)
}

// read moves s past the next item of its list; once no subscription is
// left at the list's base, what every one has read is dropped. h.mu is
// held.
func (h *Hub) read(s *Subscription) {
	w := s.list
	wasAtBase := s.next == w.base
	s.next++
	if wasAtBase {
		h.leftBase(w)
	}
}

// leftBase tells that one of the subscriptions at w's base has read on or
// ended. h.mu is held.
func (h *Hub) leftBase(w *list) {
	if w.atBase--; w.atBase == 0 {
		h.trim(w)
	}
}

// unwatch forgets a list that has no subscription left, and its items.
func (h *Hub) unwatch(w *list) {
	h.total -= w.bytes
	w.items, w.dead, w.bytes = nil, 0, 0
	delete(h.lists, w.key)
	h.watched.Add(context.Background(), -1)
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
	h.active.Add(context.Background(), -1)
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
				for s := range w.subs {
					h.end(s, err, endedNotFound)
				}
			} else if len(w.items) > 0 || w.holding > 0 {
				h.enforce(w, now) // an idle list costs nothing here
			}
			h.buffered.Store(h.total)
			h.unlock()
		}
	}
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

// nextCatchUp gives the next item of the catch-up, ok false when the page
// is done and another may be read. It holds one page at a time, within
// the hub's catch-up bytes.
func (s *Subscription) nextCatchUp(ctx context.Context) (Delivery, bool, error) {
	h := s.hub
	h.mu.Lock()
	err := s.ended()
	if err == nil && len(s.page) > 0 {
		d := s.page[0]
		s.page = s.page[1:]
		s.asked = time.Now()
		if len(s.page) == 0 {
			h.setHeld(s, 0) // the page is given
		}
		h.unlock()
		h.delivered.Add(ctx, 1)
		return d, true, nil
	}
	h.unlock()
	if err != nil {
		s.page = nil // let go of it at once: ending gave back its bytes
		return Delivery{}, false, err
	}
	read := s.readFeed
	if s.since != "" {
		read = s.readSince
	}
	if err := read(ctx); err != nil {
		s.keep(nil) // no page: let go of the bytes held for it
		return Delivery{}, false, err
	}
	return Delivery{}, false, nil
}

// hold takes a page's worst case of catch-up bytes, waiting for room in
// its caller's share, then in the pool.
func (s *Subscription) hold(ctx context.Context) error {
	h := s.hub
	hold, err := h.catchUp.Wait(ctx, s.caller, h.pageNeed)
	if err != nil {
		return ctx.Err() // the pool refuses only once ctx ends
	}
	h.mu.Lock()
	if err := s.ended(); err != nil { // ended while it waited
		h.unlock()
		hold.Release()
		return err
	}
	s.taken = hold
	h.setHeld(s, h.pageNeed)
	s.asked = time.Time{} // the gateway reads the page: not the client's time
	h.unlock()
	return nil
}

// keep sets the bytes held to what the page holds, and the page.
func (s *Subscription) keep(page []Delivery) {
	var bytes int64
	for _, d := range page {
		bytes += entryBytes(d.Item)
	}
	h := s.hub
	h.mu.Lock()
	if bytes < s.held || len(page) == 0 {
		h.setHeld(s, bytes)
	}
	s.asked = time.Now() // the client's time from here on
	h.unlock()
	s.page = page
}

// readSince reads the next page of the list from since on: items of the
// list itself, at the subscription's start.
func (s *Subscription) readSince(ctx context.Context) error {
	h := s.hub
	if err := s.hold(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
	read, err := h.cfg.Store.Since(rctx, s.list.l, s.since, h.cfg.CatchUpPage)
	cancel()
	if err != nil {
		return s.readFailed(ctx, rctx, err)
	}
	items := read.Items
	s.since = read.Next
	if s.sent += len(items); s.sent > h.cfg.MaxCatchUp {
		return fmt.Errorf("%w since: more than %d items to send before the new ones (--max-count); subscribe with a later since", errkind.Invalid, h.cfg.MaxCatchUp)
	}
	if err := s.pay(ctx, len(items), 0); err != nil {
		return err
	}
	page := make([]Delivery, len(items))
	for i, it := range items {
		page[i] = Delivery{Item: it, Position: s.start}
	}
	s.keep(page)
	return nil
}

// readFeed reads the next page of the list's records the hub had read
// before the subscription started, after its start.
func (s *Subscription) readFeed(ctx context.Context) error {
	h := s.hub
	if err := s.hold(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, h.cfg.ReadTimeout)
	changes, reached, looked, err := h.cfg.Store.ListFeed(rctx, s.list.l, s.from, s.to, int(h.pageNeed))
	cancel()
	if err != nil {
		return s.readFailed(ctx, rctx, err)
	}
	var page []Delivery
	for _, c := range changes {
		for i, it := range c.Items {
			if s.start.Before(c.Record, i) {
				page = append(page, Delivery{Item: it, Position: c.After(i)})
			}
		}
	}
	if !s.from.Less(reached) {
		reached = s.to // nothing more below to
	}
	s.from = reached
	if s.sent += len(page); s.sent > h.cfg.MaxCatchUp {
		return store.PositionExpired(fmt.Sprintf("more than %d items were added after this position (--max-count)", h.cfg.MaxCatchUp))
	}
	if err := s.pay(ctx, len(page), looked); err != nil {
		return err
	}
	s.keep(page)
	return nil
}

// readFailed is the error of a catch-up's store read, made under read: one
// that ran past ReadTimeout ends the subscription UNAVAILABLE, naming
// where to resume (the store was slow, not the client). It wraps no
// deadline error: that would say the operation's deadline passed.
func (s *Subscription) readFailed(ctx, read context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(read.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w: the list store did not give a catch-up page within %s (%v)", errkind.Unavailable, s.hub.cfg.ReadTimeout, err)
		return &EndError{Err: err, Position: s.resume}
	}
	return err
}

// pay charges a page read to the caller's budget.
func (s *Subscription) pay(ctx context.Context, items, looked int) error {
	if s.charge == nil {
		return nil
	}
	if err := s.charge(ctx, items, looked); err != nil {
		return &EndError{Err: err, Position: s.resume}
	}
	return nil
}

// setHeld sets the catch-up bytes s holds, letting go of any it no longer
// does; h.mu is held.
func (h *Hub) setHeld(s *Subscription, held int64) {
	if s.taken != nil && held < s.held {
		h.letGo = append(h.letGo, letGo{s.taken, held})
		if held == 0 {
			s.taken = nil
		}
	}
	switch {
	case s.held == 0 && held > 0:
		s.list.holding++
	case s.held > 0 && held == 0:
		s.list.holding--
	}
	s.held = held
}

// letGo is catch-up bytes let go of under Hub.mu: of hold, all but keep.
type letGo struct {
	hold *pool.Hold
	keep int64
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
