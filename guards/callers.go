package guards

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/operation"
)

// Callers holds each caller's cost budget on this process: a bucket of
// complexity points that fills at Rate a second up to Burst. An operation
// takes its complexity from its caller's bucket before it runs, or is
// refused (THROTTLED) until it fits. A caller's API key or JWT may name a
// budget of its own.
type Callers struct {
	rate, burst float64 // the gateway's; a rate of 0 is no budget
	now         func() time.Time

	mu      sync.Mutex
	buckets *simplelru.LRU[string, *bucket]

	spent, throttled metric.Int64Counter
}

// maxCallers bounds the buckets kept: past it the least recently seen
// caller's is dropped, and starts full again when it comes back.
const maxCallers = 100_000

type bucket struct {
	tokens float64
	at     time.Time
	// want is the cost of the caller's last operation refused, until one
	// runs: while the bucket holds less, Blocked refuses the caller's
	// requests before their documents are even read.
	want float64
}

// left is the points the bucket holds: none while it is in debt.
func (b *bucket) left() int64 { return max(int64(b.tokens), 0) }

// NewCallers returns the budgets of rate points a second, burst at once;
// rate 0 charges no one.
func NewCallers(rate, burst float64, now func() time.Time, meter metric.Meter) (*Callers, error) {
	buckets, err := simplelru.NewLRU[string, *bucket](maxCallers, nil)
	if err != nil {
		return nil, err
	}
	c := &Callers{rate: rate, burst: burst, now: now, buckets: buckets}
	if c.spent, err = meter.Int64Counter("listgate.caller.cost.spent",
		metric.WithDescription("Complexity points operations took from their callers' budgets, by caller: an API key's name, or jwt or address for the others.")); err != nil {
		return nil, err
	}
	if c.throttled, err = meter.Int64Counter("listgate.caller.throttled",
		metric.WithDescription("Operations refused THROTTLED, by caller (as listgate_caller_cost_spent_total) and reason: cost (its budget) or share (its share of the in-flight slots or complexity).")); err != nil {
		return nil, err
	}
	return c, nil
}

// AtZero puts the callers' metrics at zero, from the start, for each
// caller (as auth.Authenticator.Callers names them) and reason: a
// dashboard shows 0, not "No data".
func (c *Callers) AtZero(callers []string) {
	for _, caller := range callers {
		label := metric.WithAttributeSet(attribute.NewSet(attribute.String("caller", CallerLabel(caller))))
		c.spent.Add(context.Background(), 0, label)
		for _, reason := range []metric.AddOption{reasonCost, reasonShare} {
			c.throttled.Add(context.Background(), 0, label, reason)
		}
	}
}

// budget is the caller's rate and burst.
func (c *Callers) budget(p *auth.Principal) (rate, burst float64) {
	rate, burst = c.rate, c.burst
	if p != nil && p.Cost.Rate > 0 {
		rate, burst = p.Cost.Rate, p.Cost.Burst
	}
	return rate, burst
}

// Charge takes cost from caller's bucket, or says how long until it fits
// (Throttled); an operation costing more than the bucket holds runs when
// it is full, and leaves it empty.
func (c *Callers) Charge(ctx context.Context, caller string, p *auth.Principal, cost int64) operation.Quota {
	rate, burst := c.budget(p)
	if rate <= 0 {
		return operation.Quota{}
	}
	c.mu.Lock()
	b := c.fill(caller, rate, burst)
	need := min(float64(cost), burst)
	q := operation.Quota{Requested: cost, Limit: int64(burst), Rate: rate, Window: seconds(burst / rate)}
	if b.tokens >= need {
		b.tokens -= need
		b.want = 0
	} else {
		q.Throttled = seconds((need - b.tokens) / rate)
		b.want = need
	}
	q.Remaining, q.Reset = b.left(), seconds((burst-b.tokens)/rate)
	c.mu.Unlock()
	label := metric.WithAttributeSet(attribute.NewSet(attribute.String("caller", CallerLabel(caller))))
	if q.Throttled > 0 {
		c.throttled.Add(ctx, 1, label, reasonCost)
	} else {
		c.spent.Add(ctx, cost, label)
	}
	return q
}

// BytesPerPoint is what an answer writes for each point of its cost before
// what it writes is charged as well: a point a KiB past it.
const BytesPerPoint = 1 << 10

// ChargeAnswer charges an operation whose answer of n bytes is made what
// it writes past its cost, a point a KiB: a page of large values costs
// what it sends, not its items alone. The answer is made, so the points
// are taken whatever the bucket holds, leaving it in debt by at most one
// burst, which the caller's next operations wait out. It returns q, the
// operation's quota, with them added.
func (c *Callers) ChargeAnswer(ctx context.Context, caller string, p *auth.Principal, q operation.Quota, cost int64, n int) operation.Quota {
	extra := (int64(n)+BytesPerPoint-1)/BytesPerPoint - cost
	rate, burst := c.budget(p)
	if extra <= 0 || rate <= 0 || q.Off() || q.Throttled > 0 {
		return q
	}
	c.mu.Lock()
	b := c.fill(caller, rate, burst)
	b.tokens = max(b.tokens-float64(extra), -burst)
	q.Requested += extra
	q.Remaining, q.Reset = b.left(), seconds((burst-b.tokens)/rate)
	c.mu.Unlock()
	c.spent.Add(ctx, extra, metric.WithAttributeSet(attribute.NewSet(attribute.String("caller", CallerLabel(caller)))))
	return q
}

// Refund gives back what Charge took for an operation that did not run.
func (c *Callers) Refund(caller string, p *auth.Principal, q operation.Quota) {
	if q.Off() || q.Throttled > 0 {
		return
	}
	rate, burst := c.budget(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.fill(caller, rate, burst)
	b.tokens = min(burst, b.tokens+min(float64(q.Requested), burst))
}

// Blocked refuses a caller whose last operation was refused for as long
// as its bucket holds less than that one cost, and a caller in debt
// (ChargeAnswer) until it is paid: a client retrying without waiting costs
// the gateway little.
func (c *Callers) Blocked(ctx context.Context, caller string, p *auth.Principal) (operation.Quota, error) {
	rate, burst := c.budget(p)
	if rate <= 0 {
		return operation.Quota{}, nil
	}
	c.mu.Lock()
	b := c.fill(caller, rate, burst)
	q := operation.Quota{Requested: int64(b.want), Limit: int64(burst), Remaining: b.left(), Rate: rate,
		Reset: seconds((burst - b.tokens) / rate), Window: seconds(burst / rate)}
	blocked, debt := b.tokens < b.want, int64(math.Ceil(-b.tokens))
	if blocked {
		q.Throttled = seconds((b.want - b.tokens) / rate)
	}
	c.mu.Unlock()
	if !blocked {
		return q, nil
	}
	c.throttled.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("caller", CallerLabel(caller)))), reasonCost)
	if q.Requested == 0 {
		return q, fmt.Errorf("%w: this caller's answers wrote more than its budget held (a point a KiB past their cost): it owes %d points of its %d, refilling at %d a second: retry in %d s (--caller-cost-rate, --caller-cost-burst, or the caller's own budget)",
			errkind.Throttled, debt, q.Limit, int64(q.Rate), q.RetrySeconds())
	}
	return q, fmt.Errorf("%w: this caller's last operation cost %d points, more than the %d left of its %d, refilling at %d a second: retry in %d s (--caller-cost-rate, --caller-cost-burst, or the caller's own budget)",
		errkind.Throttled, q.Requested, q.Remaining, q.Limit, int64(q.Rate), q.RetrySeconds())
}

// Peek is caller's budget, nothing taken.
func (c *Callers) Peek(caller string, p *auth.Principal) operation.Quota {
	rate, burst := c.budget(p)
	if rate <= 0 {
		return operation.Quota{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.fill(caller, rate, burst)
	return operation.Quota{Limit: int64(burst), Remaining: b.left(), Reset: seconds((burst - b.tokens) / rate), Rate: rate, Window: seconds(burst / rate)}
}

// fill brings caller's bucket up to now; c.mu is held.
func (c *Callers) fill(caller string, rate, burst float64) *bucket {
	now := c.now()
	b, ok := c.buckets.Get(caller)
	if !ok {
		b = &bucket{tokens: burst, at: now}
		c.buckets.Add(caller, b)
	}
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = min(burst, b.tokens+elapsed*rate)
		b.at = now
	}
	return b
}

// Shared counts an operation refused for its caller's share.
func (c *Callers) Shared(ctx context.Context, caller string) {
	c.throttled.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("caller", CallerLabel(caller)))), reasonShare)
}

var (
	reasonCost  = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "cost")))
	reasonShare = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "share")))
)

// CallerLabel is a caller as a metric label, of bounded cardinality: an API
// key's own name (there are as many as the keys file holds), "jwt" for
// every JWT subject, "address" for every unauthenticated address.
func CallerLabel(caller string) string {
	switch kind, name, _ := strings.Cut(caller, ":"); kind {
	case "key":
		return name
	case "jwt":
		return "jwt"
	default:
		return "address"
	}
}

func seconds(s float64) time.Duration {
	if s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return 0
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// throttled is the error of an operation refused for its caller's budget.
func throttled(q operation.Quota) error {
	return fmt.Errorf("%w: this operation costs %d points, and its caller has %d of its %d left, refilling at %d a second: retry in %d s (--caller-cost-rate, --caller-cost-burst, or the caller's own budget)",
		errkind.Throttled, q.Requested, q.Remaining, q.Limit, int64(q.Rate), q.RetrySeconds())
}
