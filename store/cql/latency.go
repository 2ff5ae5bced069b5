package cql

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// latencies is a histogram of recent read latencies in two windows of
// latencyWindow, the current and the one before: counts in buckets four
// to a power of two (each at most 19 % wide), from 16 µs to 2 s. Its
// counts are atomics; a window is replaced whole.
type latencies struct {
	cur, prev atomic.Pointer[latencyCounts]
}

const (
	latencyMinLog  = 14 // 2^14 ns, 16 µs: the first bucket holds less
	latencyBuckets = (31-latencyMinLog)*4 + 1
)

type latencyCounts struct {
	start   int64 // mono ns
	total   atomic.Int64
	buckets [latencyBuckets]atomic.Int64
}

func (l *latencies) init(now int64) {
	l.cur.Store(&latencyCounts{start: now})
	l.prev.Store(&latencyCounts{start: now})
}

// add counts a sample, and says whether the measure should be read again:
// every 64 samples, and when a window begins.
func (l *latencies) add(now int64, d time.Duration) bool {
	c := l.cur.Load()
	rotated := false
	if now-c.start >= int64(latencyWindow) {
		next := &latencyCounts{start: now}
		if l.cur.CompareAndSwap(c, next) {
			l.prev.Store(c)
			rotated = true
		}
		c = l.cur.Load()
	}
	c.buckets[latencyBucket(d)].Add(1)
	return c.total.Add(1)%64 == 0 || rotated
}

// latencyBucket is the bucket of d.
func latencyBucket(d time.Duration) int {
	if d < 1<<latencyMinLog {
		return 0
	}
	e := bits.Len64(uint64(d)) - 1
	i := (e-latencyMinLog)*4 + int(uint64(d)>>(e-2)&3) + 1
	return min(i, latencyBuckets-1)
}

// latencyUpper is the upper bound of bucket i.
func latencyUpper(i int) time.Duration {
	if i == 0 {
		return 1 << latencyMinLog
	}
	e, sub := (i-1)/4+latencyMinLog, (i-1)%4
	return time.Duration(uint64(5+sub) << (e - 2))
}

// quantile is the upper bound of the bucket holding the q quantile of the
// samples of the current window and the one before (none older than two
// windows), and how many samples it read.
func (l *latencies) quantile(now int64, q float64) (time.Duration, int64) {
	var counts [latencyBuckets]int64
	var n int64
	for _, c := range []*latencyCounts{l.cur.Load(), l.prev.Load()} {
		if now-c.start >= 2*int64(latencyWindow) {
			continue
		}
		for i := range counts {
			v := c.buckets[i].Load()
			counts[i] += v
			n += v
		}
	}
	if n == 0 {
		return 0, 0
	}
	rank := int64(float64(n) * q)
	var seen int64
	for i, v := range counts {
		seen += v
		if seen > rank {
			return latencyUpper(i), n
		}
	}
	return latencyUpper(latencyBuckets - 1), n
}
