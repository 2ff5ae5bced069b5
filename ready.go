package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/store"
)

// readiness is the check of /readyz and listgate_ready: the gateway can
// serve, so it should get traffic. It fails until the store is open.
type readiness struct {
	st      atomic.Pointer[store.Instrumented] // nil until the store is open
	opening atomic.Pointer[error]              // why the last attempt to open it failed
	// stuckAfter is how long a store write may run before the write path
	// counts as stuck (stuckAfter).
	stuckAfter time.Duration
}

// check passes when the store is open, no store write has been running
// past stuckAfter and the store answers within 2 s. A stuck write comes
// first: a store whose writes hang may still answer a ping.
func (r *readiness) check(ctx context.Context) error {
	st := r.st.Load()
	if st == nil {
		if err := r.opening.Load(); err != nil {
			return fmt.Errorf("the store is not open yet: %w", *err)
		}
		return errors.New("the store is not open yet")
	}
	if err := stuckWrite(st.OldestWrite(), r.stuckAfter); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return st.Ready(ctx)
}

// stuckAfter is how long a store write may run before the gateway stops
// being ready: a request's writes are given --request-timeout, so one
// still running as long again (at least a second more) does not heed its
// deadline, and the writes after it will not either.
func stuckAfter(requestTimeout time.Duration) time.Duration {
	return requestTimeout + max(requestTimeout, time.Second)
}

// stuckWrite says whether the oldest store write under way, running for
// age, is stuck: running past after.
func stuckWrite(age, after time.Duration) error {
	if age <= after {
		return nil
	}
	return fmt.Errorf("a store write has been running for %s, past %s (--request-timeout, and as long again): the store's writes do not end", age.Round(time.Millisecond), after)
}

// observeReady adds listgate_ready to the metrics: 1 while the readiness
// check passes at the scrape, else 0, so an alert sees a gateway that runs
// but cannot reach its store (or has not yet), or whose writes are stuck.
func observeReady(mp metric.MeterProvider, r *readiness) error {
	_, err := mp.Meter("github.com/listgate/listgate").Int64ObservableGauge("listgate_ready",
		metric.WithDescription("1 while the readiness check of /readyz passes: the store open, no store write stuck past twice --request-timeout, and the store answering within 2 s; else 0."),
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			if r.check(ctx) != nil {
				o.Observe(0)
			} else {
				o.Observe(1)
			}
			return nil
		}))
	if err != nil {
		return fmt.Errorf("listgate_ready: %w", err)
	}
	return nil
}
