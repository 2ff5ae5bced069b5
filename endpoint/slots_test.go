package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
)

func testSlots(t *testing.T, n, share int) *slots {
	t.Helper()
	s, err := newSlots(n, share, noop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// whole reports whether every slot is back and no caller is remembered.
func (s *slots) whole() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.all) != 0 || len(s.byCaller) != 0 || s.waiting.Load() != 0 {
		return fmt.Errorf("%d slots held, %d callers remembered, %d waiting", len(s.all), len(s.byCaller), s.waiting.Load())
	}
	return nil
}

// Over HTTP a slot is taken at once or refused: THROTTLED past the
// caller's share, UNAVAILABLE when every slot is held.
func TestSlotsTakeAtOnce(t *testing.T) {
	s := testSlots(t, 4, 2)
	var releases []func()
	take := func(caller string, want error) {
		t.Helper()
		release, err := s.take(caller)
		if !errors.Is(err, want) {
			t.Fatalf("take for %s: %v, want %v", caller, err, want)
		}
		if err == nil {
			releases = append(releases, release)
		}
	}
	take("a", nil)
	take("a", nil)
	take("a", errShareSlots)
	take("b", nil)
	take("b", nil)
	take("c", errAllSlots)
	releases[0]()
	take("c", nil)
	for _, release := range releases[1:] {
		release()
	}
	if err := s.whole(); err != nil {
		t.Fatal(err)
	}
}

// A waiter gives up when its context ends, holding nothing then: neither
// a slot nor a place in its caller's share.
func TestSlotsWaitUntilTheContextEnds(t *testing.T) {
	s := testSlots(t, 2, 1)
	ra, err := s.take("a")
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.wait(ended, "a"); !errors.Is(err, errShareSlots) {
		t.Fatalf("waiting for a's share: %v", err)
	}
	rb, err := s.wait(context.Background(), "b") // not held up by a's waiter
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.wait(ended, "c"); !errors.Is(err, errAllSlots) {
		t.Fatalf("waiting for a slot: %v", err)
	}
	ra()
	rb()
	if err := s.whole(); err != nil {
		t.Fatal(err)
	}
}

// Hundreds of operations of a few callers waiting at once all get a slot
// in turn, never more than the slots at once, nor more than its share for
// one caller.
func TestSlotsWaitInTurn(t *testing.T) {
	const n, share, callers, each = 4, 2, 3, 200
	s := testSlots(t, n, share)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var holding atomic.Int64
	byCaller := make([]atomic.Int64, callers)
	errs := make(chan error, callers*each)
	var wg sync.WaitGroup
	for c := range callers {
		for range each {
			wg.Go(func() {
				release, err := s.wait(ctx, fmt.Sprint(c))
				if err != nil {
					errs <- err
					return
				}
				if h, mine := holding.Add(1), byCaller[c].Add(1); h > n || mine > share {
					errs <- fmt.Errorf("%d slots held, %d by caller %d", h, mine, c)
				}
				holding.Add(-1)
				byCaller[c].Add(-1)
				release()
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.whole(); err != nil {
		t.Fatal(err)
	}
}
