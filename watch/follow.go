// The hub's feed reader: one goroutine (follow) reads the change feed
// into the watched lists while any is watched. It calls the store with no
// lock held; what it reads is taken into the lists under Hub.mu (take,
// cover).

package watch

import (
	"context"
	"errors"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
)

// readBytes bounds the items one read of the feed gives.
const readBytes = 4 << 20

// watchedBefore says, for the read r, whether a list was watched when it
// began: what the store asks as it reads the feed, with no lock of its own
// held. A list watched during the read is left out of it whole.
func (h *Hub) watchedBefore(r uint64) func(store.ListID) bool {
	return func(id store.ListID) bool {
		h.mu.Lock()
		defer h.unlock()
		w := h.lists[nameOf(id)]
		return w != nil && w.born < r && w.key.Has(id)
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
			if errors.Is(err, errkind.PositionExpired) {
				h.expire(ctx, run, at, err)
				continue
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
		w := h.lists[nameOf(c.List)]
		if w == nil || w.born >= r || !w.key.Has(c.List) {
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

// expire handles a read of the feed after the cursor at, of the run, that
// the feed no longer keeps (the gateway fell behind it by the retention):
// the subscriptions that need what came after at end with err, saying
// so; those that started after it, at a place the feed keeps, go on, and
// the cursor moves to the earliest of their starts. The store is asked
// with no lock held.
func (h *Hub) expire(ctx context.Context, run uint64, at store.Position, err error) {
	h.mu.Lock()
	var starts []store.Position
	if run == h.run {
		for _, w := range h.lists {
			for s := range w.subs {
				if !s.start.Less(at) {
					starts = append(starts, s.start)
				}
			}
		}
	}
	h.unlock()
	kept := map[store.Position]bool{}
	for _, p := range starts {
		if _, ok := kept[p]; !ok {
			kept[p] = h.cfg.Store.CheckPosition(ctx, p) == nil
		}
	}
	h.mu.Lock()
	defer h.unlock()
	if run != h.run {
		return
	}
	var next *store.Position
	for _, w := range h.lists {
		for s := range w.subs {
			// One that joined meanwhile started at the head, after at.
			if ok, checked := kept[s.start]; s.start.Less(at) || checked && !ok {
				h.end(s, err, endedExpired)
			} else if next == nil || s.start.Less(*next) {
				next = &s.start
			}
		}
	}
	if next != nil {
		h.cursor = *next
	}
}
