// Package pool is a bounded quantity that callers share (the slots of
// --max-in-flight, the open WebSockets, the bytes of catch-up pages): at
// most its size held in all, and at most its share by one caller, so that
// one caller never holds what the others need. It is a leaf: its methods
// take its own lock alone and call nothing back, so they may be called
// from under another component's lock.
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
	ErrFull  = errors.New("the pool is held in full")
	ErrShare = errors.New("the caller holds its share of the pool")
)

// Pool is a quantity callers hold parts of. Waiters are served first come,
// first served (golang.org/x/sync/semaphore: a release wakes only the
// waiters it makes room for, so thousands may wait at once), and a caller
// waiting for room in its own share holds none of the pool meanwhile: a
// caller at its share never holds up another.
type Pool struct {
	all     *semaphore.Weighted
	size    int64
	share   int64        // the most one caller holds
	waiting atomic.Int64 // waiters for the pool or for their caller's share

	mu       sync.Mutex
	used     int64            // guarded by mu: held in all, as Available sees it
	byCaller map[string]*part // guarded by mu; callers holding or waiting
}

// part is one caller's part of a pool.
type part struct {
	held *semaphore.Weighted // of the pool's share
	// Guarded by Pool.mu.
	users int   // holds and waiters
	used  int64 // held, as Available sees it
}

// New returns a pool of size, of which one caller holds at most share
// (taken into 1…size).
func New(size, share int64) *Pool {
	size = max(size, 1)
	return &Pool{all: semaphore.NewWeighted(size), size: size, share: min(max(share, 1), size), byCaller: map[string]*part{}}
}

// Size is the pool's size.
func (p *Pool) Size() int64 { return p.size }

// Share is the most one caller holds.
func (p *Pool) Share() int64 { return p.share }

// Waiting is how many wait for the pool or for their caller's share.
func (p *Pool) Waiting() int64 { return p.waiting.Load() }

// Take takes n for caller at once, or says why it cannot: the pool is held
// in full (ErrFull), or the caller holds its share (ErrShare).
func (p *Pool) Take(caller string, n int64) (*Hold, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.all.TryAcquire(n) {
		return nil, ErrFull
	}
	c := p.join(caller)
	if !c.held.TryAcquire(n) {
		p.all.Release(n)
		p.forget(caller, c)
		return nil, ErrShare
	}
	return p.hold(caller, c, n), nil
}

// Wait takes n for caller, waiting first for room in its share, then for
// room in the pool, until ctx ends; the error then says which it was
// waiting for.
func (p *Pool) Wait(ctx context.Context, caller string, n int64) (*Hold, error) {
	p.mu.Lock()
	c := p.join(caller)
	p.mu.Unlock()
	err := ErrShare
	if p.acquire(ctx, c.held, n) {
		if err = ErrFull; !p.acquire(ctx, p.all, n) {
			c.held.Release(n)
		} else {
			err = nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.forget(caller, c)
		return nil, err
	}
	return p.hold(caller, c, n), nil
}

// Available says, taking nothing, whether caller could take n at once:
// nil, ErrFull or ErrShare. What others do meanwhile may change it.
func (p *Pool) Available(caller string, n int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.used+n > p.size:
		return ErrFull
	case p.byCaller[caller] != nil && p.byCaller[caller].used+n > p.share:
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
		c = &part{held: semaphore.NewWeighted(p.share)}
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

// hold records n taken by caller; p.mu is held.
func (p *Pool) hold(caller string, c *part, n int64) *Hold {
	p.used += n
	c.used += n
	return &Hold{p: p, caller: caller, part: c, n: n}
}

// Hold is what one caller holds of a pool, until Release. Its methods may
// be called from any goroutine, and more than once.
type Hold struct {
	p      *Pool
	caller string
	part   *part // nil once released; guarded by Pool.mu
	n      int64 // guarded by Pool.mu
}

// Keep gives back what the hold has past n.
func (h *Hold) Keep(n int64) {
	p := h.p
	p.mu.Lock()
	give, c := max(h.n-max(n, 0), 0), h.part
	h.n -= give
	if c != nil {
		p.used -= give
		c.used -= give
	}
	p.mu.Unlock()
	p.give(c, give)
}

// Release gives back all the hold has; after it, the hold is nothing.
func (h *Hold) Release() {
	p := h.p
	p.mu.Lock()
	give, c := h.n, h.part
	h.n, h.part = 0, nil
	if c != nil {
		p.used -= give
		c.used -= give
		p.forget(h.caller, c)
	}
	p.mu.Unlock()
	p.give(c, give)
}

// give gives back n of caller's part c, and of the pool.
func (p *Pool) give(c *part, n int64) {
	if c == nil || n == 0 {
		return
	}
	c.held.Release(n)
	p.all.Release(n)
}
