package embedded

import (
	"context"
	"runtime"
)

// turns keeps long scans from taking every core: past its first
// checkEvery rows a scan reads only while it holds a turn, of which there
// are one fewer than the cores (at least one), and gives it back every
// checkEvery rows, so that long scans take turns, first come first
// served, and a core is left to the short reads of every other caller.
// One caller's counts, searches and distinct pages, run back to back, cost
// others' reads a wait of a few rows at most.
type turns chan struct{}

func newTurns() turns { return make(turns, max(1, runtime.GOMAXPROCS(0)-1)) }

// next gives back the turn a scan holds, if it holds one, and waits for
// the next, or until ctx ends.
func (t turns) next(ctx context.Context, held *bool) error {
	if *held {
		<-t
		*held = false
	}
	select {
	case t <- struct{}{}:
		*held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// done gives back the turn a scan holds, if it holds one.
func (t turns) done(held bool) {
	if held {
		<-t
	}
}
