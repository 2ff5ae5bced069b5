// A watched list's buffer: the items its slowest subscription has not
// read, once, and the bounds on them (enforce). A list and its entries are
// guarded by Hub.mu: every function here is called with it held.

package watch

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
)

// listName is a list as the hub watches it: of one feature key and
// entity, whatever the feature's creation (store.ListID.Has).
type listName struct{ feature, entity string }

func nameOf(id store.ListID) listName { return listName{id.Feature, id.EntityID} }

// changed is why a subscription to the feature was ends, now that it is
// now, and the error that ends it, or nil if now is no later: created
// again (NOT_FOUND), or made not live and live again (POSITION_EXPIRED),
// as Config.Current would say.
func changed(was, now *store.Feature) (metric.AddOption, error) {
	switch {
	case now.CreatedAt.After(was.CreatedAt):
		return endedNotFound, fmt.Errorf("feature %s: %w: it was deleted, or created again, since the subscription began; subscribe again", was.Key(), errkind.NotFound)
	case now.CreatedAt.Equal(was.CreatedAt) && now.LiveSince.After(was.LiveSince):
		return endedExpired, store.PositionExpired(fmt.Sprintf("feature %s was made not live and live again since the subscription began, and the adds made while it was not live were not recorded", was.Key()))
	}
	return nil, nil
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
	delete(h.lists, nameOf(w.key))
	h.watched.Add(context.Background(), -1)
}
