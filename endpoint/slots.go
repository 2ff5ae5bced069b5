package endpoint

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
)

// The slots of --max-in-flight are a pool (package pool): one slot for
// each operation served over HTTP, and one for each subscribe message's
// operation while it is admitted (a subscription gives it back once it is
// parsed, a query or a mutation once its answer is made, before it is
// written). No caller holds more than its share
// (--caller-max-in-flight-share), and callers past their floor leave the
// pool's headroom to the others (pool.Parts), so that neither one caller
// nor a few hold them all.

// newSlots returns the n slots of --max-in-flight, of which one caller
// holds at most share; the operations waiting for one, or for their
// caller's share, are the gauge listgate_inflight_waiting.
func newSlots(n, share int, meter metric.Meter) (*pool.Pool, error) {
	p := pool.New(int64(n), int64(share))
	_, err := meter.Int64ObservableGauge("listgate.inflight.waiting",
		metric.WithDescription("Operations of WebSocket subscribe messages waiting for a slot of --max-in-flight, or for their caller's share of them."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(p.Waiting())
			return nil
		}))
	return p, err
}

// admit takes a slot of --max-in-flight for an operation over HTTP, or
// refuses it at once rather than queue, so that memory and latency stay
// bounded; the client retries, on another replica behind a load balancer.
// A caller holding its share of the slots is refused THROTTLED.
func (h *Handler) admit(ctx context.Context, caller string) (*pool.Hold, error) {
	slot, err := h.inFlight.Take(caller, 1)
	switch {
	case errors.Is(err, pool.ErrFull):
		h.observer.refused.Add(ctx, 1)
		return nil, fmt.Errorf("%w: the gateway is serving its limit of %d requests (--max-in-flight); retry", errkind.Refused, h.inFlight.Size())
	case errors.Is(err, pool.ErrShare):
		h.callers.Shared(ctx, caller)
		return nil, fmt.Errorf("%w: this caller has its share of the %d requests this gateway serves at once in flight (--caller-max-in-flight-share of --max-in-flight: %d, less while other callers hold the rest); retry in 1 s, or once they answer", errkind.Throttled, h.inFlight.Size(), h.inFlight.Share())
	}
	return slot, nil
}

// admitWaiting takes a slot of --max-in-flight for the operation of a
// WebSocket's subscribe message, waiting for room in the slots and in its
// caller's share until ctx ends, where a request over HTTP is refused at
// once: graphql-ws clients do not retry an operation refused, and after a
// restart or a network blip a fleet of them subscribes again all at once.
// The wait is bounded by the operation's deadline, and by the operations a
// WebSocket may hold; it is refused, and counted, only once that passes. A
// client that ends the operation while it waits gets ctx's error.
func (h *Handler) admitWaiting(ctx context.Context, caller string) (*pool.Hold, error) {
	slot, err := h.inFlight.Wait(ctx, caller, 1)
	switch {
	case err == nil:
		return slot, nil
	case errors.Is(ctx.Err(), context.Canceled):
		return nil, ctx.Err()
	case errors.Is(err, pool.ErrFull):
		h.observer.refused.Add(ctx, 1)
		return nil, fmt.Errorf("%w: the gateway served its limit of %d requests (--max-in-flight) until this operation's deadline (--request-timeout); retry", errkind.Refused, h.inFlight.Size())
	default:
		h.callers.Shared(ctx, caller)
		return nil, fmt.Errorf("%w: this caller had its share of the %d requests this gateway serves at once in flight (--caller-max-in-flight-share of --max-in-flight: %d, less while other callers hold the rest) until this operation's deadline (--request-timeout); retry", errkind.Throttled, h.inFlight.Size(), h.inFlight.Share())
	}
}
