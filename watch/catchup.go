// A subscription's catch-up: the pages it reads from the store before its
// live items (after a position, or since a time), one at a time, within
// the hub's catch-up bytes. It runs on the subscription's reader
// goroutine, which owns the page; the bytes held (held, taken, asked) are
// the hub's, under Hub.mu. The store and the pool are called with no lock
// held.

package watch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
)

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
	if len(changes) == 0 && !s.from.Less(reached) {
		// The feed is not settled up to s.to yet: wait for it, holding no
		// catch-up bytes, and read again.
		s.keep(nil)
		return h.cfg.Store.WaitFeed(ctx, s.from)
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
