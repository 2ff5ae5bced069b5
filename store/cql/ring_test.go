package cql

import (
	"math"
	"testing"
)

// The ranges cover every token a key can have, from just above -2^63 to
// 2^63-1, each once, in order.
func TestSplitRingCoversTheRing(t *testing.T) {
	for _, n := range []int{1, 2, 3, 64, 1000} {
		r := splitRing(n)
		if len(r) != n || r[0].from != math.MinInt64 || r[n-1].to != math.MaxInt64 {
			t.Fatalf("splitRing(%d) = %d ranges from %d to %d", n, len(r), r[0].from, r[len(r)-1].to)
		}
		for i := range r {
			if r[i].from >= r[i].to || i > 0 && r[i].from != r[i-1].to {
				t.Fatalf("splitRing(%d): range %d is (%d, %d], after (%d, %d]", n, i, r[i].from, r[i].to, r[max(i-1, 0)].from, r[max(i-1, 0)].to)
			}
		}
	}
}
