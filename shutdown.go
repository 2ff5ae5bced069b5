package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// shutdownGrace is how long past --shutdown-timeout the teardown may run
// (the store closing, telemetry flushing) before serve stops waiting.
const shutdownGrace = 5 * time.Second

// teardown is what serve stops when it ends, in the reverse of the order
// it started them. Each step is named, so that one that does not stop
// (a store call that never returns, a hub that never stops) can be named
// when serve gives up waiting for it.
type teardown struct {
	steps []teardownStep // in the order they were added
}

type teardownStep struct {
	name string // what the step stops, as an error names it
	stop func(ctx context.Context) error
}

// add adds a step, to run before the ones added earlier.
func (t *teardown) add(name string, stop func(ctx context.Context) error) {
	t.steps = append(t.steps, teardownStep{name, stop})
}

// run runs the steps, the last added first, one after another, each with
// a context that ends timeout after run began; it waits for them until
// grace after that. Steps that have not stopped by then are left behind,
// running or never begun, and the error names them: a process told to
// stop ends, whatever is stuck.
func (t *teardown) run(ctx context.Context, timeout, grace time.Duration) error {
	stepCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	var at atomic.Int64 // the step under way, counted from the last added
	var errs []error    // written by the steps' goroutine; read once done is closed
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		for i := range t.steps {
			at.Store(int64(i))
			errs = append(errs, t.steps[len(t.steps)-1-i].stop(stepCtx))
		}
	}()
	wait := time.NewTimer(timeout + grace)
	defer wait.Stop()
	select {
	case <-done:
		return errors.Join(errs...)
	case <-wait.C:
	}
	i := len(t.steps) - 1 - int(at.Load())
	var left []string
	for j := i - 1; j >= 0; j-- {
		left = append(left, t.steps[j].name)
	}
	err := fmt.Errorf("shutting down: %s did not stop within %s (--shutdown-timeout and %s); exiting with it still running", t.steps[i].name, timeout+grace, grace)
	if len(left) > 0 {
		err = fmt.Errorf("%w; not stopped: %s", err, strings.Join(left, ", "))
	}
	return err
}

// earlyStep is a step begun early, beside another one, and waited for
// in its own turn.
type earlyStep struct {
	stop  func(ctx context.Context)
	begun sync.Once
	done  chan struct{}
}

func newEarlyStep(stop func(ctx context.Context)) *earlyStep {
	return &earlyStep{stop: stop, done: make(chan struct{})}
}

// begin starts the step, once, on a goroutine of its own.
func (s *earlyStep) begin(ctx context.Context) {
	s.begun.Do(func() {
		go func() {
			defer close(s.done)
			s.stop(ctx)
		}()
	})
}

// wait begins the step if nothing began it, and waits for it to stop.
func (s *earlyStep) wait(ctx context.Context) error {
	s.begin(ctx)
	<-s.done
	return nil
}
