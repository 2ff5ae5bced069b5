package store

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// writesInFlight keeps the start of every store write under way, so that
// a readiness check can tell a write path that is stuck from one that is
// slow: a write still running long after its request's deadline. It is
// on the path of every add, so a write takes a slot of its own, at random,
// with one compare-and-swap, and gives it back with one store: writes on
// two cores share no lock and no cache line. Only oldest, called at a
// readiness check, looks at every slot.
type writesInFlight struct {
	base  time.Time // what starts are counted from: their monotonic clock
	slots [writeSlots]writeSlot
	// overflow keeps the writes that found no free slot among the few
	// they tried: rare, as long as fewer than writeSlots run at once.
	overflow overflowWrites
}

// writeSlots bounds the writes kept without a lock.
const writeSlots = 256

// writeProbes is how many slots a write tries before the overflow.
const writeProbes = 4

type writeSlot struct {
	start atomic.Int64 // ns after base, plus one, that its write began; 0: free
	_     [56]byte     // a cache line of its own
}

func newWritesInFlight(base time.Time) *writesInFlight {
	return &writesInFlight{base: base}
}

// begin records a write that began at start, and returns what end takes.
func (w *writesInFlight) begin(start time.Time) int {
	t := int64(start.Sub(w.base)) + 1
	i := rand.IntN(writeSlots)
	for range writeProbes {
		if w.slots[i].start.CompareAndSwap(0, t) {
			return i
		}
		i = (i + 1) % writeSlots
	}
	return writeSlots + w.overflow.begin(t)
}

// end records that the write begin returned slot for is over.
func (w *writesInFlight) end(slot int) {
	if slot < writeSlots {
		w.slots[slot].start.Store(0)
		return
	}
	w.overflow.end(slot - writeSlots)
}

// oldest is how long, at now, the oldest write under way has been
// running; 0 when none is.
func (w *writesInFlight) oldest(now time.Time) time.Duration {
	first := w.overflow.first()
	for i := range w.slots {
		if t := w.slots[i].start.Load(); t != 0 && (first == 0 || t < first) {
			first = t
		}
	}
	if first == 0 {
		return 0
	}
	return now.Sub(w.base.Add(time.Duration(first - 1)))
}

// overflowWrites keeps writes under a lock, in slots that are reused.
type overflowWrites struct {
	mu     sync.Mutex // guards starts and free; held for a few slice operations, never across a call
	starts []int64    // by slot, as writeSlot.start
	free   []int      // slots free for the next write
}

func (o *overflowWrites) begin(t int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.free); n > 0 {
		slot := o.free[n-1]
		o.free = o.free[:n-1]
		o.starts[slot] = t
		return slot
	}
	o.starts = append(o.starts, t)
	return len(o.starts) - 1
}

func (o *overflowWrites) end(slot int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.starts[slot] = 0
	o.free = append(o.free, slot)
}

// first is the earliest start kept, 0 when none is.
func (o *overflowWrites) first() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	var first int64
	for _, t := range o.starts {
		if t != 0 && (first == 0 || t < first) {
			first = t
		}
	}
	return first
}
