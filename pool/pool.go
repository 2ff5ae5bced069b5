// Package pool is a bounded quantity that callers share (the slots of
// --max-in-flight, the open WebSockets, the bytes of catch-up pages and of
// answers): at most its size held in all, at most its share by one caller,
// and a headroom that only callers within their floor may take, so that
// neither one caller nor several hold what a new one needs. It is a leaf:
// its methods take its own lock alone and call nothing back, so they may
// be called from under another component's lock.
package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Why a caller got nothing of a pool.
var (
	ErrFull = errors.New("the pool is held in full")
	// ErrShare: the caller holds its share, or it is past its floor and
	// what is left is the headroom kept for callers within theirs.
	ErrShare = errors.New("the caller holds its share of the pool")
)

// Parts are how a pool is shared. A share alone stops one caller, not two:
// two callers at a share of half hold it all. So the last Headroom of the
// pool is kept for what callers take within their Floor: takes past a
// caller's floor hold at most Size - Headroom together, whoever takes
// them, and a new caller's first Floor finds room while fewer than
// Headroom/Floor callers hold theirs. A headroom, not a share that shrinks
// as callers come: what callers took before another came (a WebSocket, a
// catch-up page its client does not read) is not given back for it.
type Parts struct {
	Size     int64 // held in all, at most
	Share    int64 // held by one caller, at most
	Floor    int64 // what one caller takes before it is past its floor
	Headroom int64 // of Size, what only takes within a floor may hold
}

// PartsOf are the parts of a pool of size of which one caller holds at
// most share: a floor of a sixteenth of the share, at least floor (the
// most one take asks, when a floor must hold one), and a headroom of eight
// floors, at most what the share leaves (none with a share of the whole).
func PartsOf(size, share, floor int64) Parts {
	size = max(size, 1)
	share = min(max(share, 1), size)
	floor = min(max(floor, share/16, 1), share)
	return Parts{Size: size, Share: share, Floor: floor, Headroom: min(8*floor, size-share)}
}

// Past says whether a take of n by a caller that holds floor within its
// floor is past it, and so may not take the headroom. A take larger than
// what takes past a floor may hold is not: it could never be had.
func (p Parts) Past(floor, n int64) bool {
	return floor+n > p.Floor && n <= p.Size-p.Headroom
}

// Pool is a quantity callers hold parts of. Waiters are served first come,
// first served (golang.org/x/sync/semaphore: a release wakes only the
// waiters it makes room for, so thousands may wait at once), and a caller
// waiting for room in its own share, or past its floor, holds none of the
// pool meanwhile: a caller at its share never holds up another.
type Pool struct {
	parts   Parts
	all     *semaphore.Weighted // of Size
	past    *semaphore.Weighted // of Size - Headroom: what takes past a floor hold
	waiting atomic.Int64        // waiters for the pool, past the floors, or for their caller's share

	mu       sync.Mutex
	used     int64            // guarded by mu: held in all, as Available sees it
	pastUsed int64            // guarded by mu: held past floors, as Available sees it
	byCaller map[string]*part // guarded by mu; callers holding or waiting
}

// part is one caller's part of a pool.
type part struct {
	held *semaphore.Weighted // of the pool's share
	// Guarded by Pool.mu.
	users int   // holds and waiters
	used  int64 // held, as Available sees it
	floor int64 // held within its floor, and asked so by its waiters
}

// New returns a pool of size of which one caller holds at most share
// (PartsOf, whose floor holds one take of 1).
func New(size, share int64) *Pool { return NewFloor(size, share, 1) }

// NewFloor is New for a pool whose floor must hold one take of floor.
func NewFloor(size, share, floor int64) *Pool {
	parts := PartsOf(size, share, floor)
	return &Pool{parts: parts, all: semaphore.NewWeighted(parts.Size), past: semaphore.NewWeighted(parts.Size - parts.Headroom),
		byCaller: map[string]*part{}}
}

// Size is the pool's size.
func (p *Pool) Size() int64 { return p.parts.Size }

// Share is the most one caller holds.
func (p *Pool) Share() int64 { return p.parts.Share }

// Used is what is held of the pool.
func (p *Pool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Waiting is how many wait for the pool or for their caller's share.
func (p *Pool) Waiting() int64 { return p.waiting.Load() }

// Take takes n for caller at once, or says why it cannot: the pool is held
// in full (ErrFull), or the caller holds its share or is past its floor
// with the headroom alone left (ErrShare).
func (p *Pool) Take(caller string, n int64) (*Hold, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.join(caller)
	h := &Hold{p: p, caller: caller, part: c}
	if err := p.tryTake(h, n); err != nil {
		p.forget(caller, c)
		return nil, err
	}
	return h, nil
}

// Grow takes n more for the hold's caller at once, as Take does; a
// released hold takes nothing (ErrFull).
func (h *Hold) Grow(n int64) error {
	p := h.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.part == nil {
		return ErrFull
	}
	return p.tryTake(h, n)
}

// tryTake takes n into h at once; p.mu is held.
func (p *Pool) tryTake(h *Hold, n int64) error {
	if n <= 0 {
		return nil // a semaphore refuses even 0 while others wait
	}
	c := h.part
	if !p.all.TryAcquire(n) {
		return ErrFull
	}
	if !c.held.TryAcquire(n) {
		p.all.Release(n)
		return ErrShare
	}
	past := p.parts.Past(c.floor, n)
	if past && !p.past.TryAcquire(n) {
		c.held.Release(n)
		p.all.Release(n)
		return ErrShare
	}
	p.add(h, n, past)
	return nil
}

// Wait takes n for caller, waiting first for room in its share, then, past
// its floor, for room past the floors, then for room in the pool, until
// ctx ends; the error then says which it was waiting for (ErrShare for
// either of the first two).
func (p *Pool) Wait(ctx context.Context, caller string, n int64) (*Hold, error) {
	p.mu.Lock()
	c := p.join(caller)
	p.mu.Unlock()
	h := &Hold{p: p, caller: caller, part: c}
	if err := h.wait(ctx, c, n); err != nil {
		p.mu.Lock()
		p.forget(caller, c)
		p.mu.Unlock()
		return nil, err
	}
	return h, nil
}

// GrowWait takes n more for the hold's caller, waiting as Wait does; a
// released hold takes nothing (ErrFull).
func (h *Hold) GrowWait(ctx context.Context, n int64) error {
	h.p.mu.Lock()
	c := h.part
	h.p.mu.Unlock()
	if c == nil {
		return ErrFull
	}
	return h.wait(ctx, c, n)
}

// wait takes n into h, of its caller's part c, waiting as Wait says.
func (h *Hold) wait(ctx context.Context, c *part, n int64) error {
	p := h.p
	if n <= 0 {
		return nil
	}
	if !p.acquire(ctx, c.held, n) {
		return ErrShare
	}
	p.mu.Lock()
	past := p.parts.Past(c.floor, n)
	if !past {
		c.floor += n // asked within its floor: its other waiters see it
	}
	p.mu.Unlock()
	var err error
	switch {
	case past && !p.acquire(ctx, p.past, n):
		err = ErrShare
	case !p.acquire(ctx, p.all, n):
		err = ErrFull
		if past {
			p.past.Release(n)
		}
	}
	p.mu.Lock()
	if !past {
		c.floor -= n // add counts it again, as held
	}
	if err == nil && h.part == nil {
		err = ErrFull // released meanwhile
		p.all.Release(n)
		if past {
			p.past.Release(n)
		}
	}
	if err == nil {
		p.add(h, n, past)
	}
	p.mu.Unlock()
	if err != nil {
		c.held.Release(n)
	}
	return err
}

// Available says, taking nothing, whether caller could take n at once:
// nil, ErrFull or ErrShare. What others do meanwhile may change it.
func (p *Pool) Available(caller string, n int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.byCaller[caller]
	if c == nil {
		c = &part{}
	}
	switch {
	case p.used+n > p.parts.Size:
		return ErrFull
	case c.used+n > p.parts.Share:
		return ErrShare
	case p.parts.Past(c.floor, n) && p.pastUsed+n > p.parts.Size-p.parts.Headroom:
		return ErrShare
	}
	return nil
}

// acquire takes n of sem, waiting until ctx ends.
func (p *Pool) acquire(ctx context.Context, sem *semaphore.Weighted, n int64) bool {
	if sem.TryAcquire(n) {
		return true
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	return sem.Acquire(ctx, n) == nil
}

// join counts one more hold or waiter of caller; p.mu is held.
func (p *Pool) join(caller string) *part {
	c := p.byCaller[caller]
	if c == nil {
		c = &part{held: semaphore.NewWeighted(p.parts.Share)}
		p.byCaller[caller] = c
	}
	c.users++
	return c
}

// forget counts one hold or waiter of caller fewer, forgetting a caller
// with none; p.mu is held.
func (p *Pool) forget(caller string, c *part) {
	if c.users--; c.users == 0 {
		delete(p.byCaller, caller)
	}
}

// add records n taken into h, past its caller's floor or within it; p.mu
// is held.
func (p *Pool) add(h *Hold, n int64, past bool) {
	p.used += n
	h.part.used += n
	if past {
		p.pastUsed += n
		h.past += n
	} else {
		h.part.floor += n
		h.floor += n
	}
}

// Hold is what one caller holds of a pool, until Release. Its methods may
// be called from any goroutine, and more than once.
type Hold struct {
	p      *Pool
	caller string
	part   *part // nil once released; guarded by Pool.mu
	// Guarded by Pool.mu: what it holds within its caller's floor, and
	// past it.
	floor, past int64
}

// Held is what the hold holds.
func (h *Hold) Held() int64 {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.floor + h.past
}

// Keep gives back what the hold has past n.
func (h *Hold) Keep(n int64) {
	h.p.mu.Lock()
	c, all, past := h.takeBack(h.floor + h.past - max(n, 0))
	h.p.mu.Unlock()
	h.p.give(c, all, past)
}

// Give gives back n of what the hold has, at most all of it.
func (h *Hold) Give(n int64) {
	h.p.mu.Lock()
	c, all, past := h.takeBack(n)
	h.p.mu.Unlock()
	h.p.give(c, all, past)
}

// Release gives back all the hold has; after it, the hold is nothing.
func (h *Hold) Release() {
	p := h.p
	p.mu.Lock()
	c, all, past := h.takeBack(h.floor + h.past)
	if c != nil {
		h.part = nil
		p.forget(h.caller, c)
	}
	p.mu.Unlock()
	p.give(c, all, past)
}

// takeBack takes n off the hold, past its caller's floor first, and says
// what to give back of the caller's share, of the pool and of what takes
// past a floor hold; p.mu is held.
func (h *Hold) takeBack(n int64) (c *part, all, past int64) {
	p, c := h.p, h.part
	all = min(max(n, 0), h.floor+h.past)
	past = min(all, h.past)
	h.past -= past
	h.floor -= all - past
	if c == nil {
		return nil, 0, 0 // released: given back then
	}
	p.used -= all
	p.pastUsed -= past
	c.used -= all
	c.floor -= all - past
	return c, all, past
}

// give gives back all of caller's part c and of the pool, past of it
// taken past a floor.
func (p *Pool) give(c *part, all, past int64) {
	if c == nil || all == 0 {
		return
	}
	c.held.Release(all)
	if past > 0 {
		p.past.Release(past)
	}
	p.all.Release(all)
}
