package cql

import (
	"testing"
	"time"
)

// A record's time never steps back by less than maxStepBack, so adds one
// after another are recorded in order when a measurement moves the offset
// back a little; a larger step back is followed.
func TestStampsKeepOrderThroughSmallStepsBack(t *testing.T) {
	base := time.Now()
	c := clock{raw: func() time.Time { return base }}
	first := c.stamp()
	c.offset.Store(int64(-5 * time.Millisecond))
	second := c.stamp()
	if !second.After(first) {
		t.Fatalf("after a step back of 5 ms: %v, then %v", first, second)
	}
	c.offset.Store(int64(-time.Second))
	if third := c.stamp(); !third.Equal(base.Add(-time.Second)) {
		t.Fatalf("after a step back of 1 s: %v, want the clock's %v", third, base.Add(-time.Second))
	}
}
