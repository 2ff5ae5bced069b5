package lists

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// The bytes of answers are a pool (Config.Answers, --max-in-flight-
// response-bytes) that every query and mutation takes from as its answer is
// built and gives back once it is written, within its caller's share: the
// memory a caller's answers hold, whatever their clients read, is bounded
// by what its share holds, where their complexity says nothing of bytes.
// A page reserves, before it is read, twice what it may hold (its limit
// times the largest item its feature's pages held so far, or
// --max-value-bytes before any: the page, and the answer it is written
// into), waiting for room until the operation's deadline, and keeps twice
// what it holds once read; once the answer is built it holds the bytes it
// writes (the endpoint settles it, Settle), until the endpoint says it is
// written (Answered).

// itemOverhead is what an item read holds beyond its key and value.
const itemOverhead = 64

// uncounted is what an operation holds before it takes of the pool: most
// answers are smaller, taking would cost a small read more than it bounds,
// and --max-in-flight operations hold at most 16 MiB so.
const uncounted = 64 << 10

// answer is what one operation holds of the answers' bytes.
type answer struct {
	mu     sync.Mutex // guards what follows
	caller string     // whose share it takes, set before it runs (SetCaller)
	small  int64      // what it holds while that is at most uncounted, not taken
	hold   *pool.Hold // what it holds past uncounted, all taken; nil until then
}

// SetCaller says whose share of the answers' bytes the operation in ctx
// takes.
func SetCaller(ctx context.Context, caller string) {
	if r := readsFrom(ctx); r != nil {
		r.answer.mu.Lock()
		r.answer.caller = caller
		r.answer.mu.Unlock()
	}
}

// Answered gives back what the operation in ctx holds of the answers'
// bytes: its answer is written, or will not be.
func Answered(ctx context.Context) {
	if r := readsFrom(ctx); r != nil {
		r.answer.mu.Lock()
		h := r.answer.hold
		r.answer.hold, r.answer.small = nil, 0
		r.answer.mu.Unlock()
		if h != nil {
			h.Release()
		}
	}
}

// grow has the operation hold n more: past uncounted, all it holds is
// taken of p, waiting until ctx ends (or at once, with ctx nil); refused,
// it holds what it did.
func (a *answer) grow(ctx context.Context, p *pool.Pool, n int64) error {
	a.mu.Lock()
	if a.hold == nil && a.small+n <= uncounted {
		a.small += n
		a.mu.Unlock()
		return nil
	}
	small := a.small
	if a.hold == nil {
		a.hold, _ = p.Take(a.caller, 0) // nothing is always there
		a.small = 0
	}
	h := a.hold
	a.mu.Unlock()
	var err error
	if ctx == nil {
		err = h.Grow(small + n)
	} else {
		err = h.GrowWait(ctx, small+n)
	}
	if err != nil && small > 0 {
		a.mu.Lock()
		a.small += small // still held, if not counted
		a.mu.Unlock()
	}
	return err
}

// give has the operation hold n less.
func (a *answer) give(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hold == nil {
		a.small = max(a.small-n, 0)
		return
	}
	a.hold.Give(n)
}

// reserve takes n of the answers' bytes for the operation of req, waiting
// for room in its caller's share and in the pool until ctx ends.
func (s *Service) reserve(ctx context.Context, req *Reads, n int64) error {
	if s.answers == nil || req == nil {
		return nil
	}
	if err := req.answer.grow(ctx, s.answers, n); err != nil {
		return s.answersRefused(err, true)
	}
	return nil
}

// settle sets what the operation of req holds for a read from reserved to
// read: a page keeps what it holds, not what it reserved. More is taken at
// once, or refused.
func (s *Service) settle(req *Reads, reserved, read int64) error {
	if s.answers == nil || req == nil {
		return nil
	}
	if read <= reserved {
		req.answer.give(reserved - read)
		return nil
	}
	if err := req.answer.grow(nil, s.answers, read-reserved); err != nil {
		req.answer.give(reserved) // the page is not shown
		return s.answersRefused(err, false)
	}
	return nil
}

// Settle has the operation in ctx hold n bytes of answers, what its answer
// writes, once it is built: what its reads held past that is given back,
// and what it writes past them is taken as a page's bytes are, waiting for
// room until ctx ends, or refused (the answer is then that error alone,
// not counted). Its reads have ended: nothing else changes what it holds
// meanwhile.
func (s *Service) Settle(ctx context.Context, n int) error {
	req := readsFrom(ctx)
	if s.answers == nil || req == nil {
		return nil
	}
	a := &req.answer
	a.mu.Lock()
	held := a.small
	if a.hold != nil {
		held = a.hold.Held()
	}
	a.mu.Unlock()
	if int64(n) <= held {
		a.give(held - int64(n))
		return nil
	}
	if err := a.grow(ctx, s.answers, int64(n)-held); err != nil {
		return s.answersRefused(err, ctx.Err() != nil)
	}
	return nil
}

// ErrAnswersShare is wrapped by the refusal of a caller at its share of
// the answers' bytes: a THROTTLED error.
var ErrAnswersShare = fmt.Errorf("%w", errkind.Throttled)

// answersRefused is the error of a field, or an answer, the answers' bytes
// had no room for: its caller holds its share (THROTTLED), or the gateway
// all of them (UNAVAILABLE), at once or until the deadline.
func (s *Service) answersRefused(err error, waited bool) error {
	until := ""
	if waited {
		until = " until this operation's deadline (--request-timeout)"
	}
	if errors.Is(err, pool.ErrShare) {
		return fmt.Errorf("%w: this caller's answers being built and written held its share of the %d bytes this gateway holds for them (--caller-max-in-flight-share of --max-in-flight-response-bytes, less while other callers hold the rest)%s: read them, or retry in 1 s", ErrAnswersShare, s.answers.Size(), until)
	}
	return fmt.Errorf("%w: the answers being built and written held the %d bytes this gateway holds for them (--max-in-flight-response-bytes)%s; retry", errkind.Refused, s.answers.Size(), until)
}

// itemSizes are, by feature, the largest item a page of the feature held
// (its key, its value, and itemOverhead): what each item of its next page
// is reserved. A feature whose pages were not read yet is reserved
// --max-value-bytes an item.
type itemSizes struct {
	worst int64
	mu    sync.RWMutex
	by    map[featureName]*atomic.Int64 // guarded by mu; one per feature, never removed
}

type featureName struct{ entityType, name, version string }

func newItemSizes(maxValueBytes int) *itemSizes {
	return &itemSizes{worst: int64(maxValueBytes + keys.ItemKeyLen + itemOverhead), by: map[featureName]*atomic.Int64{}}
}

// of is what an item of f's next page is reserved.
func (z *itemSizes) of(f *store.Feature) int64 {
	z.mu.RLock()
	size := z.by[featureName{f.EntityType, f.Name, f.Version}]
	z.mu.RUnlock()
	if size == nil {
		return z.worst
	}
	return size.Load()
}

// learn records the items of a page of f, and returns what they hold.
func (z *itemSizes) learn(f *store.Feature, items []store.Item) int64 {
	var total, largest int64
	for _, it := range items {
		n := int64(len(it.Key) + len(it.Value) + itemOverhead)
		total += n
		largest = max(largest, n)
	}
	name := featureName{f.EntityType, f.Name, f.Version}
	z.mu.RLock()
	size := z.by[name]
	z.mu.RUnlock()
	if size == nil {
		if len(items) == 0 {
			return 0
		}
		z.mu.Lock()
		if size = z.by[name]; size == nil {
			size = new(atomic.Int64)
			z.by[name] = size
		}
		z.mu.Unlock()
	}
	for {
		seen := size.Load()
		if largest <= seen || size.CompareAndSwap(seen, largest) {
			return total
		}
	}
}
