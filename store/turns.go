package store

import (
	"context"
	"runtime"
)

// Turns keeps long scans from taking every core: a scan of many rows
// (a count, a search, a distinct page) reads them a stretch at a time, each
// stretch in a turn, of which there are few, and gives the turn back
// between stretches, so that long scans take turns, first come first
// served, and what is left of the machine (of the database, on a cluster)
// serves every other read at once: short reads never wait for a turn. One
// caller's counts run back to back so cost others' reads little, whatever
// its budget lets it run.
type Turns struct{ c chan struct{} }

// NewTurns returns n turns; n < 1 gives half the cores, at least one.
func NewTurns(n int) *Turns {
	if n < 1 {
		n = max(1, runtime.GOMAXPROCS(0)/2)
	}
	return &Turns{c: make(chan struct{}, n)}
}

// Turn is one scan's place among the long scans. Its zero value holds no
// turn; one of nil Turns never waits.
type Turn struct {
	t    *Turns
	held bool
}

// Turn returns a scan's place, holding no turn yet.
func (t *Turns) Turn() Turn { return Turn{t: t} }

// Next gives back the turn the scan holds, if any, and waits for the next,
// or until ctx ends. It first lets the goroutines waiting for a core run:
// the scan the turn goes to would run next on this one, ahead of them.
func (t *Turn) Next(ctx context.Context) error {
	if t.t == nil {
		return ctx.Err()
	}
	runtime.Gosched()
	t.End()
	select {
	case t.t.c <- struct{}{}:
		t.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// End gives back the turn the scan holds, if any.
func (t *Turn) End() {
	if t.held {
		<-t.t.c
		t.held = false
	}
}

// Take takes every turn until release: for tests.
func (t *Turns) Take() (release func()) {
	for range cap(t.c) {
		t.c <- struct{}{}
	}
	return func() {
		for range cap(t.c) {
			<-t.c
		}
	}
}
