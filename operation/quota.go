package operation

import (
	"math"
	"time"
)

// Quota is a caller's budget as one operation found it.
type Quota struct {
	Requested int64         // the operation's cost; 0 when it was not charged
	Limit     int64         // the bucket's size
	Remaining int64         // points left
	Reset     time.Duration // until the bucket is full again
	Rate      float64       // points a second it fills at
	Window    time.Duration // to fill it from empty
	Throttled time.Duration // when over: until the operation's cost fits
}

// Off reports whether no budget applies.
func (q Quota) Off() bool { return q.Limit == 0 }

// RetrySeconds is how long to wait before the operation fits, in whole
// seconds, at least 1, as Retry-After gives it.
func (q Quota) RetrySeconds() int64 { return max(1, int64(math.Ceil(q.Throttled.Seconds()))) }
