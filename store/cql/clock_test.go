package cql

import (
	"strings"
	"testing"
	"time"
)

// fakeMono is a monotonic clock a test moves.
type fakeMono struct {
	base    time.Time
	elapsed time.Duration
}

func (f *fakeMono) now() time.Time { return f.base.Add(f.elapsed) }

// readNode is a sample of a node whose clock is `ahead` of the true time,
// read at the fake clock's now (true time: the gateway's own is off by
// `off`) with a round trip rtt.
func readNode(c *clock, f *fakeMono, ahead, off, rtt time.Duration) sample {
	mid := c.since() // the fake clock stands still through the round trip
	truth := c.baseWall - int64(off) + mid
	server := time.Unix(0, truth+int64(ahead)).Truncate(time.Millisecond)
	const half = int64(time.Millisecond / 2)
	return sample{at: mid, offset: server.UnixNano() + half - (c.baseWall + mid), err: int64(rtt/2) + half}
}

// The numbers: node clocks 15 ms ahead of and behind the true
// time, two gateways 0.5 ms from each, whose own clocks are off by a
// second either way. Each measures every node, so both take the middle:
// a subscription's head on one comes after what the other stamps before
// it, and before what it stamps after the call returns.
func TestGatewaysAgreeWhateverNodeAnswersFastest(t *testing.T) {
	start := time.Now()
	clocks := map[string]*clock{}
	fakes := map[string]*fakeMono{}
	for name, off := range map[string]time.Duration{"g1": time.Second, "g2": -time.Second} {
		f := &fakeMono{base: start}
		c := newClock(f.now, f.now(), DefaultMaxClockOffset)
		c.baseWall += int64(off) // this gateway's wall clock is off
		f.elapsed = time.Second
		c.update([]string{"n1", "n2"}, map[string]sample{
			"n1": readNode(c, f, 15*time.Millisecond, off, 500*time.Microsecond),
			"n2": readNode(c, f, -15*time.Millisecond, off, 500*time.Microsecond),
		})
		clocks[name], fakes[name] = c, f
	}
	truth := func(name string) time.Time { return start.Add(fakes[name].elapsed) }
	g1, g2 := clocks["g1"], clocks["g2"]
	for _, c := range []*clock{g1, g2} {
		u, ok := c.Uncertainty()
		if !ok || u < 15*time.Millisecond || u > 17*time.Millisecond {
			t.Fatalf("uncertainty %v (counts %v), want about 15.75 ms: half the 30 ms spread, and the error", u, ok)
		}
		if d := c.Now().Sub(truth("g1")); d < -2*time.Millisecond || d > 2*time.Millisecond {
			t.Fatalf("Now is %v from the true time, want the middle of the nodes' clocks", d)
		}
	}
	// A subscription on g1: head the margin ahead, returned the margin
	// past it. Adds on g2 begun 1 µs before the call and 1 µs after the
	// return.
	margin, err := g1.Margin()
	if err != nil {
		t.Fatal(err)
	}
	head := g1.Now().Add(margin)
	before := g2.Now().Add(-time.Microsecond)
	returnsAfter := head.Add(margin).Sub(g1.Now())
	for _, f := range fakes {
		f.elapsed += returnsAfter + time.Microsecond
	}
	after := g2.Now()
	if !before.Before(head) || !after.After(head) {
		t.Fatalf("head %v: an add on g2 before the call is stamped %v, one after the return %v", head, before, after)
	}
}

// The measure counts only over a majority of the ring: two gateways that
// each measured a minority might share no node.
func TestClockCountsOnlyOverAMajority(t *testing.T) {
	f := &fakeMono{base: time.Now()}
	c := newClock(f.now, f.now(), DefaultMaxClockOffset)
	if _, err := c.Margin(); err == nil {
		t.Fatal("before any measure: a margin, want ClockSkew")
	}
	ring := []string{"n1", "n2", "n3"}
	c.update(ring, map[string]sample{"n1": readNode(c, f, 0, 0, time.Millisecond)})
	if _, ok := c.Uncertainty(); ok {
		t.Fatal("one node of three measured: the measure counts")
	}
	f.elapsed += clockEvery
	c.update(ring, map[string]sample{"n2": readNode(c, f, 0, 0, time.Millisecond)})
	if u, ok := c.Uncertainty(); !ok {
		t.Fatalf("two nodes of three measured: uncertainty %v does not count", u)
	}
	// n1's sample ages out; n3 never answers.
	f.elapsed += sampleLife
	c.update(ring, map[string]sample{"n2": readNode(c, f, 0, 0, time.Millisecond)})
	if _, ok := c.Uncertainty(); ok {
		t.Fatal("one node of three measured within the sample life: the measure counts")
	}
}

// Past half of the stated maximum, the measure does not count, and the
// error names the flag; the spread and the error of measuring both count.
func TestClockRefusesPastTheMaximum(t *testing.T) {
	f := &fakeMono{base: time.Now()}
	c := newClock(f.now, f.now(), 100*time.Millisecond)
	ring := []string{"n1", "n2"}
	c.update(ring, map[string]sample{"n1": readNode(c, f, 40*time.Millisecond, 0, time.Millisecond), "n2": readNode(c, f, -40*time.Millisecond, 0, time.Millisecond)})
	if u, ok := c.Uncertainty(); !ok {
		t.Fatalf("nodes 80 ms apart under a maximum of 100 ms: uncertainty %v does not count", u)
	}
	f.elapsed += clockEvery
	c.update(ring, map[string]sample{"n1": readNode(c, f, 60*time.Millisecond, 0, time.Millisecond), "n2": readNode(c, f, -60*time.Millisecond, 0, time.Millisecond)})
	_, err := c.Margin()
	if err == nil || !containsAll(err.Error(), "--max-clock-offset", "apart") {
		t.Fatalf("nodes 120 ms apart: %v, want ClockSkew naming --max-clock-offset", err)
	}
}

// A node whose clock steps is bounded by its newest sample alone; samples
// that agree narrow it; time since the samples widens it.
func TestClockFollowsAStepAndWidensWithTime(t *testing.T) {
	f := &fakeMono{base: time.Now()}
	c := newClock(f.now, f.now(), DefaultMaxClockOffset)
	ring := []string{"n1"}
	c.update(ring, map[string]sample{"n1": readNode(c, f, 0, 0, 10*time.Millisecond)})
	wide, _ := c.Uncertainty()
	f.elapsed += clockEvery
	c.update(ring, map[string]sample{"n1": readNode(c, f, 0, 0, time.Millisecond)})
	narrow, _ := c.Uncertainty()
	if narrow >= wide || narrow > 2*time.Millisecond {
		t.Fatalf("a 1 ms round trip after a 10 ms one: uncertainty %v, then %v", wide, narrow)
	}
	f.elapsed += clockEvery
	c.update(ring, map[string]sample{"n1": readNode(c, f, 200*time.Millisecond, 0, time.Millisecond)})
	if d := c.Now().Sub(f.base.Add(f.elapsed)); d < 199*time.Millisecond || d > 201*time.Millisecond {
		t.Fatalf("after the node's clock stepped 200 ms: Now is %v from the true time, want the step", d)
	}
	u0, _ := c.Uncertainty()
	f.elapsed += 10 * time.Second
	if u1, _ := c.Uncertainty(); u1-u0 != time.Duration(float64(10*time.Second)*maxDrift) {
		t.Fatalf("10 s later the uncertainty grew from %v to %v, want by the drift bound", u0, u1)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
