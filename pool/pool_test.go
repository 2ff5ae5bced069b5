package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// whole reports whether everything is back and no caller is remembered.
func (p *Pool) whole() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.all.TryAcquire(p.size) || p.used != 0 || len(p.byCaller) != 0 || p.waiting.Load() != 0 {
		return fmt.Errorf("%d held, %d callers remembered, %d waiting", p.used, len(p.byCaller), p.waiting.Load())
	}
	p.all.Release(p.size)
	return nil
}

// Take takes at once or refuses: ErrShare past the caller's share, ErrFull
// when the pool is held in full; Available says the same, taking nothing.
func TestTakeAtOnce(t *testing.T) {
	p := New(4, 2)
	var holds []*Hold
	take := func(caller string, want error) {
		t.Helper()
		if err := p.Available(caller, 1); !errors.Is(err, want) {
			t.Fatalf("available for %s: %v, want %v", caller, err, want)
		}
		h, err := p.Take(caller, 1)
		if !errors.Is(err, want) {
			t.Fatalf("take for %s: %v, want %v", caller, err, want)
		}
		if err == nil {
			holds = append(holds, h)
		}
	}
	take("a", nil)
	take("a", nil)
	take("a", ErrShare)
	take("b", nil)
	take("b", nil)
	take("c", ErrFull)
	holds[0].Release()
	holds[0].Release() // once is enough
	take("c", nil)
	for _, h := range holds[1:] {
		h.Release()
	}
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}

// A waiter gives up when its context ends, holding nothing then: neither
// part of the pool nor a place in its caller's share.
func TestWaitUntilTheContextEnds(t *testing.T) {
	p := New(2, 1)
	a, err := p.Take("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ended, "a", 1); !errors.Is(err, ErrShare) {
		t.Fatalf("waiting for a's share: %v", err)
	}
	b, err := p.Wait(context.Background(), "b", 1) // not held up by a's waiter
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ended, "c", 1); !errors.Is(err, ErrFull) {
		t.Fatalf("waiting for the pool: %v", err)
	}
	a.Release()
	b.Release()
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}

// A caller waiting for room in its share is not in the pool's queue: while
// a's waiters wait for a's holds to end, b takes what is left at once.
func TestWaiterForItsShareHoldsUpNoOne(t *testing.T) {
	p := New(10, 4)
	a, err := p.Take("a", 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan *Hold)
	for range 3 {
		go func() {
			h, err := p.Wait(ctx, "a", 2)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); p.Waiting() != 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting after 10 s, want 3", p.Waiting())
		}
	}
	b, err := p.Wait(ctx, "b", 4) // 6 are free; a's waiters want a's share
	if err != nil {
		t.Fatal(err)
	}
	a.Keep(2) // room for one of a's waiters
	first := <-got
	a.Release()
	second := <-got
	first.Release()
	second.Release()
	third := <-got
	third.Release()
	b.Release()
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}

// Keep gives back what a hold has past what it keeps, once: a Keep after a
// Release gives nothing more back.
func TestKeepGivesBackThePart(t *testing.T) {
	p := New(10, 10)
	h, err := p.Take("a", 8)
	if err != nil {
		t.Fatal(err)
	}
	h.Keep(3)
	if err := p.Available("b", 7); err != nil {
		t.Fatalf("after keeping 3 of 8: %v", err)
	}
	h.Keep(5) // more than it has: nothing changes
	if err := p.Available("b", 8); !errors.Is(err, ErrFull) {
		t.Fatalf("8 more after keeping 3: %v", err)
	}
	h.Release()
	h.Keep(0)
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}

// Hundreds of holders of a few callers waiting at once all get their turn,
// never more than the pool at once, nor more than its share for one
// caller.
func TestWaitInTurn(t *testing.T) {
	const n, share, callers, each = 4, 2, 3, 200
	p := New(n, share)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var holding atomic.Int64
	byCaller := make([]atomic.Int64, callers)
	errs := make(chan error, callers*each)
	var wg sync.WaitGroup
	for c := range callers {
		for range each {
			wg.Go(func() {
				h, err := p.Wait(ctx, fmt.Sprint(c), 1)
				if err != nil {
					errs <- err
					return
				}
				if all, mine := holding.Add(1), byCaller[c].Add(1); all > n || mine > share {
					errs <- fmt.Errorf("%d held, %d by caller %d", all, mine, c)
				}
				holding.Add(-1)
				byCaller[c].Add(-1)
				h.Release()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}
