package cql

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/metric"
)

// Speculative reads. A read whose first host has not answered within a
// delay is sent to the next host of its plan as well, and the first
// answer wins: gocql's speculative execution, which runs only for
// statements marked idempotent, as every read is. The delay is a high
// quantile of this gateway's recent reads, so that a healthy cluster sees
// about one read in a hundred sent twice, and a node that stops answering
// (a GC pause, a frozen VM, a slow link) holds a read up by that delay,
// not by its pause. The reads sent twice are bounded by a budget (a share
// of reads) and counted.
//
// Only the first page of a read is speculated: a read of one page is what
// the request path makes, and so each speculative execution is charged to
// the read that made it. The clock's samples (clock.go) are addressed to
// one host and never speculated; nor are writes but the change feed's
// lease renewal (lease.go), which readers wait on (docs/reliability.md).

// SpeculationConfig says how reads are speculated.
type SpeculationConfig struct {
	// Enabled sends a read that its first host has not answered within
	// the delay to a second host as well.
	Enabled bool
	// Delay, above 0, is the delay of every read; 0: the speculativeQuantile
	// of this gateway's recent reads, within [minSpeculativeDelay,
	// maxSpeculativeDelay].
	Delay time.Duration
	// Budget bounds the reads sent twice to this share of reads, give or
	// take speculativeBurst and the reads in flight; above 0, at most 1.
	Budget float64
}

// DefaultSpeculation speculates reads after the 99th percentile of recent
// reads, at most one read in ten.
var DefaultSpeculation = SpeculationConfig{Enabled: true, Budget: 0.1}

const (
	// speculativeQuantile is the share of recent reads that answer
	// within the measured delay.
	speculativeQuantile = 0.99
	// The measured delay is kept within these: below the minimum a
	// timer's wake-up is most of it; past the maximum a frozen node would
	// still hold a read up longer than anyone waits for a page.
	minSpeculativeDelay = time.Millisecond
	maxSpeculativeDelay = 250 * time.Millisecond
	// minLatencySamples are needed before the measure counts; until then
	// the delay is the maximum, and with fewer later the one before.
	minLatencySamples = 100
	// latencyWindow is how long a window of samples gathers; the measure
	// reads the current one and the one before.
	latencyWindow = 10 * time.Second
	// speculativeBurst is how many speculative executions the budget
	// holds at most, in whole reads.
	speculativeBurst = 10
	// milli is one read in the budget's units.
	milli = 1000
)

// speculation decides which reads are speculated and after how long, and
// counts them. Every field is an atomic or set once by newSpeculation: it
// is called from gocql's goroutines and the observer's.
type speculation struct {
	cfg     SpeculationConfig
	mono    func() int64 // ns, for time elapsed only
	lat     latencies
	delay   atomic.Int64 // ns: the delay of reads begun now
	tokens  atomic.Int64 // the budget, in thousandths of a read; negative: spent ahead
	perRead int64        // thousandths of a read each read adds to the budget

	executions metric.Int64Counter // reads sent to a second host
	refused    metric.Int64Counter // reads not speculated because the budget was spent
}

// newSpeculation makes the speculation of cfg, its metrics on meter.
func newSpeculation(cfg SpeculationConfig, meter metric.Meter, mono func() int64) (*speculation, error) {
	p := &speculation{cfg: cfg, mono: mono, perRead: int64(cfg.Budget * milli)}
	p.lat.init(mono())
	p.tokens.Store(speculativeBurst * milli)
	p.delay.Store(int64(maxSpeculativeDelay))
	p.refresh()
	var err error
	if p.executions, err = meter.Int64Counter("listgate.cql.speculative_executions",
		metric.WithDescription("Reads sent to a second host because the first had not answered within the speculative delay (--cql-speculative-reads): the extra reads speculation costs.")); err != nil {
		return nil, err
	}
	if p.refused, err = meter.Int64Counter("listgate.cql.speculative_refused",
		metric.WithDescription("Reads not speculated because speculative executions had spent their budget (--cql-speculative-budget).")); err != nil {
		return nil, err
	}
	delay, err := meter.Float64ObservableGauge("listgate.cql.speculative_delay", metric.WithUnit("s"),
		metric.WithDescription("How long a read waits for its first host before it is sent to a second: --cql-speculative-delay, or the 99th percentile of this gateway's recent reads."))
	if err != nil {
		return nil, err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(delay, time.Duration(p.delay.Load()).Seconds())
		return nil
	}, delay)
	return p, err
}

// Delay is the delay of reads begun now.
func (p *speculation) Delay() time.Duration { return time.Duration(p.delay.Load()) }

// observe takes the latency of a read that answered.
func (p *speculation) observe(took time.Duration) {
	if p.lat.add(p.mono(), took) {
		p.refresh()
	}
}

// refresh sets the delay as configured, or from the latencies measured:
// with too few of them, it keeps the one measured last (at first, the
// maximum).
func (p *speculation) refresh() {
	d := p.cfg.Delay
	if d <= 0 {
		q, n := p.lat.quantile(p.mono(), speculativeQuantile)
		if n < minLatencySamples {
			return
		}
		d = min(max(q, minSpeculativeDelay), maxSpeculativeDelay)
	}
	p.delay.Store(int64(d))
}

// begin is the policy of one read: nil when it is not speculated (off,
// no second host up, or the budget spent). Every read adds its share to
// the budget.
func (p *speculation) begin(ctx context.Context, hostsUp int) *speculativeRead {
	if !p.cfg.Enabled || hostsUp < 2 {
		return nil
	}
	if !p.earn() {
		p.refused.Add(ctx, 1)
		return nil
	}
	return &speculativeRead{delay: time.Duration(p.delay.Load()), mono: p.mono}
}

// earn adds a read's share to the budget, up to the burst, and says
// whether it holds a whole read.
func (p *speculation) earn() bool {
	for {
		t := p.tokens.Load()
		n := min(t+p.perRead, speculativeBurst*milli)
		if n < t { // past the burst already: leave it
			n = t
		}
		if p.tokens.CompareAndSwap(t, n) {
			return n >= milli
		}
	}
}

// end charges a read's speculative execution, if gocql sent one, once its
// first page has answered. Reads admitted at once may take the budget
// below zero: later reads earn it back before any is speculated.
func (p *speculation) end(ctx context.Context, r *speculativeRead) {
	if r == nil || !r.launched() {
		return
	}
	p.tokens.Add(-milli)
	p.executions.Add(ctx, 1)
}

// speculativeRead is the gocql.SpeculativeExecutionPolicy of one read: one
// more execution, after its delay, for the read's first page only. gocql
// asks Attempts before it arms the delay's timer (Delay), then again
// before it waits for the timer and again each time it has sent one more
// execution; a read's later pages ask Attempts again. Its fields are
// atomics: a later page runs on gocql's goroutine.
type speculativeRead struct {
	delay time.Duration
	mono  func() int64
	armed atomic.Int64 // mono() when gocql armed the timer; 0 before
	asked atomic.Int32 // calls of Attempts since
}

// Attempts is one until the first page's timer is armed, and for the
// call that waits for it; then none: the call after one more execution
// was sent, and every later page's.
func (r *speculativeRead) Attempts() int {
	if r.armed.Load() == 0 || r.asked.Add(1) == 1 {
		return 1
	}
	return 0
}

// Delay is the read's delay; gocql arms its timer with it.
func (r *speculativeRead) Delay() time.Duration {
	r.armed.CompareAndSwap(0, r.mono())
	return r.delay
}

// launched says whether gocql sent the first page a second time: it asked
// Attempts again after the timer fired.
func (r *speculativeRead) launched() bool { return r.armed.Load() != 0 && r.asked.Load() >= 2 }

// iter runs a read's first page, sent to a second host as well when the
// first has not answered within the delay and the budget allows.
func (s *Store) iter(q *gocql.Query) *gocql.Iter {
	ctx := q.Context()
	r := s.spec.begin(ctx, s.slow.Up())
	if r == nil {
		return q.Iter()
	}
	iter := q.Idempotent(true).SetSpeculativeExecutionPolicy(r).Iter()
	s.spec.end(ctx, r)
	return iter
}

// execSpeculated runs an idempotent write as iter runs a read.
func (s *Store) execSpeculated(q *gocql.Query) error {
	ctx := q.Context()
	r := s.spec.begin(ctx, s.slow.Up())
	if r == nil {
		return q.Exec()
	}
	err := q.Idempotent(true).SetSpeculativeExecutionPolicy(r).Exec()
	s.spec.end(ctx, r)
	return err
}

// scan is Query.Scan through iter: the first row into dest, and
// gocql.ErrNotFound when there is none.
func (s *Store) scan(q *gocql.Query, dest ...any) error {
	iter := s.iter(q)
	if !iter.Scan(dest...) {
		if err := iter.Close(); err != nil {
			return err
		}
		return gocql.ErrNotFound
	}
	return iter.Close()
}
