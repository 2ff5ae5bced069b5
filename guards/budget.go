package guards

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"
)

// Budget is the complexity the operations running may hold together
// (--max-in-flight-complexity): memory follows what the operations running
// may return, so many large reads at once wait their turn instead of
// growing the heap past what the process has. Unlike a FIFO semaphore, a
// waiting operation never holds up one that fits: a small query runs at
// once while a large one waits for room.
//
// No caller holds more than its share: an operation that would take its
// caller past it is refused at once (THROTTLED), so that one caller never
// holds the whole budget while others wait.
type Budget struct {
	mu       sync.Mutex
	used     int64
	waiting  int64 // operations waiting for room
	max      int64
	share    int64            // the most one caller may hold
	byCaller map[string]int64 // what each caller holds
	changed  chan struct{}    // closed, and replaced, at every release
}

// NewBudget returns a budget of max points, whose use is the gauge
// listgate_inflight_complexity, and its waiting operations
// listgate_inflight_complexity_waiting.
func NewBudget(max int64, share float64, meter metric.Meter) (*Budget, error) {
	b := &Budget{max: max, share: int64(share * float64(max)), byCaller: map[string]int64{}, changed: make(chan struct{})}
	_, err := meter.Int64ObservableGauge("listgate.inflight.complexity",
		metric.WithDescription("Complexity held by the operations running, out of --max-in-flight-complexity."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			o.Observe(b.used)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = meter.Int64ObservableGauge("listgate.inflight.complexity.waiting",
		metric.WithDescription("Operations waiting for room in --max-in-flight-complexity."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			o.Observe(b.waiting)
			return nil
		}))
	return b, err
}

// errShare is acquire's refusal of a caller at its share.
var errShare = errors.New("at its share")

// acquire waits until n fits, or ctx ends; it refuses at once (errShare)
// an operation that would take a caller holding some already past its
// share. A share of the whole bounds no caller more than the process.
func (b *Budget) acquire(ctx context.Context, caller string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if held := b.byCaller[caller]; held > 0 && held+n > b.share && b.share < b.max {
		return errShare
	}
	b.byCaller[caller] += n
	if b.used+n <= b.max {
		b.used += n
		return nil
	}
	b.waiting++
	defer func() { b.waiting-- }()
	for b.used+n > b.max {
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			b.mu.Lock()
			b.give(caller, n)
			return ctx.Err()
		}
		b.mu.Lock()
	}
	b.used += n
	return nil
}

func (b *Budget) release(caller string, n int64) {
	b.mu.Lock()
	b.used -= n
	b.give(caller, n)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// give takes n off what caller holds; b.mu is held.
func (b *Budget) give(caller string, n int64) {
	if b.byCaller[caller] -= n; b.byCaller[caller] <= 0 {
		delete(b.byCaller, caller)
	}
}
