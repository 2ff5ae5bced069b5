package cql

import (
	"context"
	"testing"
	"time"

	"github.com/gocql/gocql"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// fakeNanos is a monotonic clock in ns that a test moves.
type fakeNanos struct{ t int64 }

func (f *fakeNanos) now() int64 { return f.t }

func newTestSpeculation(t *testing.T, cfg SpeculationConfig) (*speculation, *fakeNanos) {
	t.Helper()
	clock := &fakeNanos{t: 1}
	p, err := newSpeculation(cfg, metricnoop.NewMeterProvider().Meter("test"), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	return p, clock
}

// observeMany gives p n reads that took d each.
func observeMany(p *speculation, n int, d time.Duration) {
	for range n {
		p.observe(d)
	}
}

// The delay is the 99th percentile of the reads of the last two windows
// (to its bucket's upper bound, at most 19 % above), within its range;
// with too few reads it stays where it was.
func TestSpeculativeDelayFollowsMeasuredLatency(t *testing.T) {
	p, clock := newTestSpeculation(t, DefaultSpeculation)
	if got := p.Delay(); got != maxSpeculativeDelay {
		t.Fatalf("before any read the delay is %v, want the maximum %v", got, maxSpeculativeDelay)
	}
	observeMany(p, minLatencySamples/2, 2*time.Millisecond)
	if got := p.Delay(); got != maxSpeculativeDelay {
		t.Fatalf("after %d reads the delay is %v, want still %v", minLatencySamples/2, got, maxSpeculativeDelay)
	}
	// 995 reads of 2 ms and 5 of 50 ms: the 99th percentile is 2 ms.
	observeMany(p, 995-minLatencySamples/2, 2*time.Millisecond)
	observeMany(p, 5, 50*time.Millisecond)
	p.refresh()
	within(t, "2 ms reads with 0.5 % of 50 ms", p.Delay(), 2*time.Millisecond)
	// 3 % of reads at 20 ms move it there.
	observeMany(p, 31, 20*time.Millisecond)
	p.refresh()
	within(t, "3 % of reads at 20 ms", p.Delay(), 20*time.Millisecond)

	// Two windows later, only the reads since count.
	clock.t += int64(2 * latencyWindow)
	observeMany(p, 200, 5*time.Millisecond)
	p.refresh()
	within(t, "the reads of the last two windows, at 5 ms", p.Delay(), 5*time.Millisecond)
	// Windows without enough reads keep the delay measured last.
	clock.t += int64(2 * latencyWindow)
	observeMany(p, 10, 100*time.Millisecond)
	p.refresh()
	within(t, "too few reads since", p.Delay(), 5*time.Millisecond)

	// Clamped to its range.
	clock.t += int64(2 * latencyWindow)
	observeMany(p, 500, 10*time.Microsecond)
	p.refresh()
	if got := p.Delay(); got != minSpeculativeDelay {
		t.Errorf("reads of 10 µs: delay %v, want the minimum %v", got, minSpeculativeDelay)
	}
	clock.t += int64(2 * latencyWindow)
	observeMany(p, 500, 3*time.Second)
	p.refresh()
	if got := p.Delay(); got != maxSpeculativeDelay {
		t.Errorf("reads of 3 s: delay %v, want the maximum %v", got, maxSpeculativeDelay)
	}

	fixed, _ := newTestSpeculation(t, SpeculationConfig{Enabled: true, Budget: 0.1, Delay: 7 * time.Millisecond})
	observeMany(fixed, 1000, 40*time.Millisecond)
	if got := fixed.Delay(); got != 7*time.Millisecond {
		t.Errorf("--cql-speculative-delay 7ms: delay %v", got)
	}
}

// within fails unless got is want or at most one bucket (19 %) above.
func within(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got < want || float64(got) > 1.19*float64(want) {
		t.Errorf("%s: delay %v, want %v to %v", what, got, want, time.Duration(1.19*float64(want)))
	}
}

// Every bucket's bounds hold the latencies that fall in it.
func TestLatencyBuckets(t *testing.T) {
	for d := time.Duration(1); d < 4*time.Second; d = d*9/8 + 1 {
		i := latencyBucket(d)
		if d > latencyUpper(i) && i != latencyBuckets-1 {
			t.Fatalf("%v in bucket %d, whose upper bound is %v", d, i, latencyUpper(i))
		}
		if i > 0 && d < latencyUpper(i-1) {
			t.Fatalf("%v in bucket %d, above %v", d, i, latencyUpper(i-1))
		}
		if i > 1 && float64(latencyUpper(i)) > 1.26*float64(latencyUpper(i-1)) {
			t.Fatalf("bucket %d is %v to %v: wider than a quarter of an octave", i, latencyUpper(i-1), latencyUpper(i))
		}
	}
}

// run plays what gocql v1.19.0's executor asks a read's policy: Attempts
// before it arms the timer, Delay, Attempts as it waits, Attempts again if
// the timer fired and it sent one more execution; then pages more pages,
// each asking Attempts once more.
func run(p *speculation, slow bool, pages int) (r *speculativeRead, sent bool, attempts []int) {
	ctx := context.Background()
	r = p.begin(ctx, 3)
	if r == nil {
		return nil, false, nil
	}
	var sp gocql.SpeculativeExecutionPolicy = r
	attempts = append(attempts, sp.Attempts())
	sp.Delay()
	attempts = append(attempts, sp.Attempts())
	if slow {
		attempts = append(attempts, sp.Attempts())
	}
	sent = r.launched()
	p.end(ctx, r)
	for range pages {
		attempts = append(attempts, sp.Attempts())
	}
	return r, sent, attempts
}

// A read's first page may be sent twice, and is charged only if it was;
// its later pages are not speculated.
func TestSpeculativeReadIsChargedOnlyWhenSent(t *testing.T) {
	p, _ := newTestSpeculation(t, DefaultSpeculation)
	_, sent, attempts := run(p, false, 2)
	if sent || p.tokens.Load() != speculativeBurst*milli {
		t.Errorf("a read answered within its delay: sent twice %v, budget %d", sent, p.tokens.Load())
	}
	if want := []int{1, 1, 0, 0}; !equalInts(attempts, want) {
		t.Errorf("Attempts answered %v, want %v", attempts, want)
	}
	_, sent, attempts = run(p, true, 2)
	if !sent || p.tokens.Load() != (speculativeBurst-1)*milli {
		t.Errorf("a read sent twice: sent twice %v, budget %d", sent, p.tokens.Load())
	}
	if want := []int{1, 1, 0, 0, 0}; !equalInts(attempts, want) {
		t.Errorf("Attempts answered %v, want %v", attempts, want)
	}

	off, _ := newTestSpeculation(t, SpeculationConfig{Enabled: false, Budget: 0.1})
	if r := off.begin(context.Background(), 3); r != nil {
		t.Error("speculation off: a read got a policy")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// However slow every read is, the reads sent twice are at most the budget's
// share of reads and its burst; one at a time, that many are.
func TestSpeculativeBudgetBoundsTheExtraReads(t *testing.T) {
	for _, budget := range []float64{0.1, 0.01, 0.5} {
		p, _ := newTestSpeculation(t, SpeculationConfig{Enabled: true, Budget: budget})
		const reads = 20000
		sent := 0
		for range reads {
			if _, twice, _ := run(p, true, 0); twice {
				sent++
			}
		}
		bound := int(budget*reads) + speculativeBurst
		if sent > bound || sent < bound-2 {
			t.Errorf("budget %v: %d of %d reads sent twice, want at most and about %d", budget, sent, reads, bound)
		}
	}

	// Reads admitted at once may spend the budget ahead, by as many as
	// are in flight; the reads after earn it back before any more is sent.
	p, _ := newTestSpeculation(t, DefaultSpeculation)
	var inFlight []*speculativeRead
	for range 50 {
		inFlight = append(inFlight, p.begin(context.Background(), 3))
	}
	for _, r := range inFlight {
		r.Attempts()
		r.Delay()
		r.Attempts()
		r.Attempts()
		p.end(context.Background(), r)
	}
	sent := 50
	for i := range 1000 {
		if _, twice, _ := run(p, true, 0); twice {
			sent++
			if i < 400 {
				t.Fatalf("read %d after 50 sent twice at once was speculated before the budget was earned back", i)
			}
		}
	}
	if bound := int(0.1*1050) + speculativeBurst + 50; sent > bound {
		t.Errorf("%d of 1050 reads sent twice, want at most %d", sent, bound)
	}
}
