package guards

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/pool"
)

// Budget is the complexity the operations running may hold together
// (--max-in-flight-complexity): what they read at once, so that many large
// reads wait their turn. Unlike a FIFO semaphore, a waiting operation
// never holds up one that fits: a small query runs at once while a large
// one waits for room.
//
// It is shared as every pool is (pool.Parts, the same rule): no caller
// holds more than its share (an operation that would take its caller past
// it is refused at once, THROTTLED), and an operation past its caller's
// floor waits while only the headroom is left, so that two or three
// callers never hold the whole budget while another waits.
type Budget struct {
	parts    pool.Parts
	mu       sync.Mutex
	used     int64
	past     int64 // of used, what operations past their caller's floor hold
	waiting  int64 // operations waiting for room
	byCaller map[string]*holding
	changed  chan struct{} // closed, and replaced, at every release
}

// holding is what one caller's operations hold of a budget.
type holding struct {
	held  int64 // by its operations running and waiting: its share
	floor int64 // by its operations running, within its floor
	past  int64 // by its operations running, past it
}

// NewBudget returns a budget of max points, whose use is the gauge
// listgate_inflight_complexity, and its waiting operations
// listgate_inflight_complexity_waiting.
func NewBudget(max int64, share float64, meter metric.Meter) (*Budget, error) {
	b := &Budget{parts: pool.PartsOf(max, int64(share*float64(max)), 1), byCaller: map[string]*holding{}, changed: make(chan struct{})}
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
	c := b.byCaller[caller]
	if c == nil {
		c = &holding{}
		b.byCaller[caller] = c
	}
	if c.held > 0 && c.held+n > b.parts.Share && b.parts.Share < b.parts.Size {
		return errShare
	}
	c.held += n
	if b.take(c, n) {
		return nil
	}
	b.waiting++
	defer func() { b.waiting-- }()
	for !b.take(c, n) {
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			b.mu.Lock()
			b.forget(caller, c, n)
			return ctx.Err()
		}
		b.mu.Lock()
	}
	return nil
}

// take takes n for c if it fits: in all, and, past c's floor, in what
// operations past their floors may hold; b.mu is held.
func (b *Budget) take(c *holding, n int64) bool {
	past := b.parts.Past(c.floor, n)
	if b.used+n > b.parts.Size || past && b.past+n > b.parts.Size-b.parts.Headroom {
		return false
	}
	b.used += n
	if past {
		b.past += n
		c.past += n
	} else {
		c.floor += n
	}
	return true
}

func (b *Budget) release(caller string, n int64) {
	b.mu.Lock()
	c := b.byCaller[caller]
	// What was past the floor is given back first: what is left of the
	// caller's is then within its floor as far as it can be.
	past := min(n, c.past)
	c.past -= past
	c.floor -= n - past
	b.past -= past
	b.used -= n
	b.forget(caller, c, n)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// forget takes n off what caller's operations hold, forgetting a caller
// that holds nothing; b.mu is held.
func (b *Budget) forget(caller string, c *holding, n int64) {
	if c.held -= n; c.held <= 0 {
		delete(b.byCaller, caller)
	}
}
