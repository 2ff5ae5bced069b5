package endpoint

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
)

// slots are the slots of --max-in-flight: one for each operation served
// over HTTP, and one for each subscribe message's operation while it is
// admitted (a subscription gives it back once it is parsed, a query or a
// mutation once it is answered). No caller holds more than its share
// (--caller-max-in-flight-share), so that one caller never holds them all.
//
// Every slot weighs one, so the slots and each caller's share are buffered
// channels: a FIFO semaphore that hands a slot given back to one waiter.
// guards.Budget wakes every waiter at each release, which suits a few
// operations of different weights; for thousands of subscribe messages
// waiting at once it would cost the square of their number.
type slots struct {
	all   chan struct{} // a token per slot held
	share int           // the most one caller holds
	// waiting is how many operations wait for a slot or for their
	// caller's share, the gauge listgate_inflight_waiting.
	waiting atomic.Int64

	mu       sync.Mutex
	byCaller map[string]*callerSlots // guarded by mu; callers holding or waiting for a slot
}

// callerSlots are one caller's slots.
type callerSlots struct {
	held  chan struct{} // a token per slot the caller holds, at most share
	users int           // operations holding or waiting for one; guarded by slots.mu
}

// Why an operation got no slot.
var (
	errAllSlots   = errors.New("every slot of --max-in-flight is held")
	errShareSlots = errors.New("the caller holds its share of --max-in-flight")
)

func newSlots(n, share int, meter metric.Meter) (*slots, error) {
	s := &slots{all: make(chan struct{}, n), share: share, byCaller: map[string]*callerSlots{}}
	_, err := meter.Int64ObservableGauge("listgate.inflight.waiting",
		metric.WithDescription("Operations of WebSocket subscribe messages waiting for a slot of --max-in-flight, or for their caller's share of them."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(s.waiting.Load())
			return nil
		}))
	return s, err
}

// size is --max-in-flight.
func (s *slots) size() int { return cap(s.all) }

// take takes a slot at once, or says why it cannot: every slot is held
// (errAllSlots), or the caller holds its share (errShareSlots).
func (s *slots) take(caller string) (release func(), err error) {
	select {
	case s.all <- struct{}{}:
	default:
		return nil, errAllSlots
	}
	c := s.join(caller)
	select {
	case c.held <- struct{}{}:
	default:
		s.leave(caller, c)
		<-s.all
		return nil, errShareSlots
	}
	return s.releaser(caller, c), nil
}

// wait takes a slot, waiting first for room in the caller's share, then
// for a slot, until ctx ends; the error says which it was waiting for
// then. A waiter for its caller's share holds no slot meanwhile, so a
// caller at its share never holds up another caller.
func (s *slots) wait(ctx context.Context, caller string) (release func(), err error) {
	c := s.join(caller)
	if !s.enter(ctx, c.held) {
		s.leave(caller, c)
		return nil, errShareSlots
	}
	if !s.enter(ctx, s.all) {
		<-c.held
		s.leave(caller, c)
		return nil, errAllSlots
	}
	return s.releaser(caller, c), nil
}

// enter puts a token in tokens, waiting for room until ctx ends.
func (s *slots) enter(ctx context.Context, tokens chan struct{}) bool {
	select {
	case tokens <- struct{}{}:
		return true
	default:
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case tokens <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// releaser gives back a slot of caller's; call it once.
func (s *slots) releaser(caller string, c *callerSlots) func() {
	return func() {
		<-s.all
		<-c.held
		s.leave(caller, c)
	}
}

// join counts one more operation of caller holding or waiting for a slot.
func (s *slots) join(caller string) *callerSlots {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.byCaller[caller]
	if c == nil {
		c = &callerSlots{held: make(chan struct{}, s.share)}
		s.byCaller[caller] = c
	}
	c.users++
	return c
}

// leave counts one operation of caller fewer, forgetting a caller with none.
func (s *slots) leave(caller string, c *callerSlots) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.users--; c.users == 0 {
		delete(s.byCaller, caller)
	}
}
