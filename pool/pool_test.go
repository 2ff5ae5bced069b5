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
	pastSize := p.parts.Size - p.parts.Headroom
	if !p.all.TryAcquire(p.parts.Size) || !p.past.TryAcquire(pastSize) || p.used != 0 || p.pastUsed != 0 || len(p.byCaller) != 0 || p.waiting.Load() != 0 {
		return fmt.Errorf("%d held (%d past floors), %d callers remembered, %d waiting", p.used, p.pastUsed, len(p.byCaller), p.waiting.Load())
	}
	p.all.Release(p.parts.Size)
	p.past.Release(pastSize)
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
	p := New(16, 4) // takes past the floors hold 8: a's 4 and b's
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
	b, err := p.Wait(ctx, "b", 4) // 12 are free; a's waiters want a's share
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

// takeAll takes n at a time for caller until the pool refuses, and says
// how much it took and why it stopped.
func takeAll(p *Pool, caller string, n int64) ([]*Hold, int64, error) {
	var holds []*Hold
	for {
		h, err := p.Take(caller, n)
		if err != nil {
			return holds, int64(len(holds)) * n, err
		}
		holds = append(holds, h)
	}
}

// A share stops one caller, and the headroom several: however many callers
// take all they can, each up to its share, a new caller still gets its
// floor at once, in every pool the gateway has, with its default sizes.
// With shares alone, two callers at half held it all.
func TestNewCallerFindsRoom(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		what               string
		size, share, floor int64
		take               int64 // what one take asks
	}{
		{"--max-in-flight", 256, 128, 1, 1},
		{"--max-websockets", 10_000, 5000, 1, 1},
		{"--max-in-flight-complexity, operations of 1,001", 300_000, 150_000, 1, 1001},
		{"--max-in-flight-response-bytes, answers of 1 MiB", 256 * mib, 128 * mib, 1, mib},
		{"--catch-up-bytes, pages of 8.45 MB", 64 * mib, 32 * mib, 8_450_000, 8_450_000},
	} {
		t.Run(c.what, func(t *testing.T) {
			p := NewFloor(c.size, c.share, c.floor)
			var holds []*Hold
			for i := range 3 {
				caller := fmt.Sprint("greedy", i)
				got, took, err := takeAll(p, caller, c.take)
				holds = append(holds, got...)
				if took > p.Share() || !errors.Is(err, ErrShare) {
					t.Fatalf("%s took %d of its share %d, then %v; want ErrShare", caller, took, p.Share(), err)
				}
				t.Logf("%s took %d", caller, took)
			}
			h, err := p.Take("new", c.take)
			if err != nil {
				t.Fatalf("three callers took all they could (%d of %d held): a new caller's take of %d: %v", p.used, c.size, c.take, err)
			}
			holds = append(holds, h)
			for _, h := range holds {
				h.Release()
			}
			if err := p.whole(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Callers waiting past their floor wait for room past the floors, holding
// none of the pool: a new caller's floor is served at once meanwhile.
func TestWaitersPastTheirFloorHoldUpNoNewCaller(t *testing.T) {
	p := New(32, 16) // floor 1, headroom 8: takes past the floors hold 24
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var holds []*Hold
	for _, caller := range []string{"a", "b"} {
		got, _, _ := takeAll(p, caller, 1)
		holds = append(holds, got...)
	}
	got := make(chan *Hold, 2)
	for _, caller := range []string{"a", "b"} { // b is past its floor: it waits
		go func() {
			h, err := p.Wait(ctx, caller, 1)
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); p.Waiting() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting after 10 s, want 2", p.Waiting())
		}
	}
	for _, caller := range []string{"c", "d", "e"} {
		h, err := p.Wait(ctx, caller, 1)
		if err != nil {
			t.Fatalf("%s: %v", caller, err)
		}
		holds = append(holds, h)
	}
	for _, h := range holds {
		h.Release()
	}
	(<-got).Release()
	(<-got).Release()
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}

// Grow takes more into a hold as Take does, Give gives part of it back,
// past the caller's floor first; a released hold grows no more.
func TestGrowAndGive(t *testing.T) {
	p := New(64, 32) // floor 2, headroom 16: takes past the floors hold 48
	h, err := p.Take("a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Grow(30); err != nil {
		t.Fatal(err)
	}
	if err := h.Grow(1); !errors.Is(err, ErrShare) {
		t.Fatalf("past a's share: %v", err)
	}
	h.Give(10)
	if got := h.Held(); got != 22 {
		t.Fatalf("held %d after giving 10 of 32, want 22", got)
	}
	if h.floor != 2 {
		t.Fatalf("%d within the floor: giving back takes past it first", h.floor)
	}
	b, err := p.Take("b", 26) // with a's 20 past its floor, 46 of 48
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Grow(4); !errors.Is(err, ErrShare) {
		t.Fatalf("past the room past floors: %v", err)
	}
	h.Release()
	if err := h.Grow(1); !errors.Is(err, ErrFull) {
		t.Fatalf("a released hold grew: %v", err)
	}
	b.Release()
	if err := p.whole(); err != nil {
		t.Fatal(err)
	}
}

// With a share of the whole there is no headroom. A take larger than
// takes past a floor may hold together (one past its caller's share, which
// a budget that lets a caller's first operation run may take) is taken
// from the whole pool, so that it can be had.
func TestPartsOf(t *testing.T) {
	if got := PartsOf(100, 100, 1); got.Headroom != 0 {
		t.Fatalf("a share of the whole: %+v", got)
	}
	parts := PartsOf(100, 50, 1) // floor 3, headroom 24: past the floors 76
	if parts.Floor != 3 || parts.Headroom != 24 || !parts.Past(0, 76) || parts.Past(0, 77) || parts.Past(0, 3) || !parts.Past(1, 3) {
		t.Fatalf("%+v", parts)
	}
}
