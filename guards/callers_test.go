package guards

import (
	"context"
	"strings"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/auth"
)

// A caller's bucket holds burst points, fills at rate a second, and refuses
// an operation that does not fit, saying when it will; callers do not share
// buckets; a principal's own budget wins; a refund gives back a charge; an
// operation costing more than the bucket holds runs when it is full.
func TestCallerBudgets(t *testing.T) {
	now := time.Now()
	c, err := NewCallers(100, 1000, func() time.Time { return now }, metricnoop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if q := c.Charge(ctx, "key:a", nil, 600); q.Throttled != 0 || q.Remaining != 400 || q.Limit != 1000 || q.Reset != 6*time.Second || q.Window != 10*time.Second {
		t.Fatalf("first charge: %+v", q)
	}
	q := c.Charge(ctx, "key:a", nil, 600)
	if q.Throttled != 2*time.Second || q.Remaining != 400 || q.RetrySeconds() != 2 {
		t.Fatalf("a charge past the budget: %+v", q)
	}
	if msg := throttled(q).Error(); !strings.Contains(msg, "costs 600 points") || !strings.Contains(msg, "400 of its 1000 left") || !strings.Contains(msg, "retry in 2 s") {
		t.Fatalf("the message: %s", msg)
	}
	if q := c.Charge(ctx, "key:b", nil, 600); q.Throttled != 0 {
		t.Fatalf("another caller: %+v", q)
	}
	now = now.Add(2 * time.Second)
	if q := c.Charge(ctx, "key:a", nil, 600); q.Throttled != 0 || q.Remaining != 0 {
		t.Fatalf("after 2 s: %+v", q)
	}
	now = now.Add(time.Second)
	q = c.Charge(ctx, "key:a", nil, 50)
	c.Refund("key:a", nil, q)
	if p := c.Peek("key:a", nil); p.Remaining != 100 {
		t.Fatalf("after a refund: %+v", p)
	}
	own := &auth.Principal{Cost: auth.CostBudget{Rate: 1, Burst: 10}}
	if q := c.Charge(ctx, "key:own", own, 20); q.Throttled != 0 || q.Remaining != 0 || q.Limit != 10 {
		t.Fatalf("an operation costing more than its own budget, on a full bucket: %+v", q)
	}
	if q := c.Charge(ctx, "key:own", own, 1); q.Throttled != time.Second {
		t.Fatalf("then: %+v", q)
	}
	off, _ := NewCallers(0, 0, time.Now, metricnoop.NewMeterProvider().Meter(""))
	if q := off.Charge(ctx, "key:a", nil, 1<<40); !q.Off() {
		t.Fatalf("without a budget: %+v", q)
	}
	for caller, label := range map[string]string{"key:reader": "reader", "jwt:https://idp/u1": "jwt", "addr:10.0.0.1": "address"} {
		if got := CallerLabel(caller); got != label {
			t.Errorf("CallerLabel(%s) = %s, want %s", caller, got, label)
		}
	}
}

// One caller holding its share of the in-flight budget is refused more at
// once; another caller still fits, and waits only for room in all, or,
// past its floor, for room past the floors (pool.Parts: 76 of 100 here).
func TestBudgetShares(t *testing.T) {
	b, err := NewBudget(100, 0.5, metricnoop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.acquire(ctx, "a", 40); err != nil {
		t.Fatal(err)
	}
	if err := b.acquire(ctx, "a", 20); err != errShare {
		t.Fatalf("past a's share: %v", err)
	}
	if err := b.acquire(ctx, "b", 26); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := b.acquire(short, "c", 20); err != context.DeadlineExceeded {
		t.Fatalf("waiting for room: %v", err)
	}
	if err := b.acquire(ctx, "c", 3); err != nil {
		t.Fatalf("c within its floor: %v", err)
	}
	b.release("c", 3)
	b.release("a", 40)
	if err := b.acquire(ctx, "a", 50); err != nil {
		t.Fatalf("a caller holding nothing fits its share again: %v", err)
	}
	b.release("a", 50)
	b.release("b", 26)
	if b.used != 0 || b.past != 0 || len(b.byCaller) != 0 {
		t.Fatalf("after every release: used %d, past %d, by caller %v", b.used, b.past, b.byCaller)
	}
}

// Three callers each holding all they may of the in-flight budget leave a
// fourth its floor: it runs at once.
func TestBudgetNewCallerRuns(t *testing.T) {
	b, err := NewBudget(300_000, 0.5, metricnoop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	full, cancel := context.WithCancel(context.Background())
	cancel() // an operation that would wait fails at once: only one that fits runs
	for _, caller := range []string{"a", "b", "c"} {
		for b.acquire(full, caller, 1001) == nil {
		}
	}
	if err := b.acquire(full, "d", 1001); err != nil {
		t.Fatalf("a fourth caller (%d of 300,000 held): %v", b.used, err)
	}
}

// With a share of the whole, a caller waits for room as the process's
// budget has it wait, never refused for its share.
func TestBudgetShareOfTheWhole(t *testing.T) {
	b, err := NewBudget(100, 1, metricnoop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.acquire(ctx, "a", 60); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := b.acquire(short, "a", 50); err != context.DeadlineExceeded {
		t.Fatalf("past the whole budget: %v, want to wait for room", err)
	}
	b.release("a", 60)
	if err := b.acquire(ctx, "a", 100); err != nil {
		t.Fatal(err)
	}
}
