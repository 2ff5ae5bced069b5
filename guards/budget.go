package guards

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/metric"
)

// Budget is the complexity the operations running may hold together
// (--max-in-flight-complexity): memory follows what the operations running
// may return, so many large reads at once wait their turn instead of
// growing the heap past what the process has. Unlike a FIFO semaphore, a
// waiting operation never holds up one that fits: a small query runs at
// once while a large one waits for room.
type Budget struct {
	mu      sync.Mutex
	used    int64
	waiting int64 // operations waiting for room
	max     int64
	changed chan struct{} // closed, and replaced, at every release
}

// NewBudget returns a budget of max points, whose use is the gauge
// listgate_inflight_complexity, and its waiting operations
// listgate_inflight_complexity_waiting.
func NewBudget(max int64, meter metric.Meter) (*Budget, error) {
	b := &Budget{max: max, changed: make(chan struct{})}
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

// acquire waits until n fits, or ctx ends.
func (b *Budget) acquire(ctx context.Context, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
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
			return ctx.Err()
		}
		b.mu.Lock()
	}
	b.used += n
	return nil
}

func (b *Budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}
