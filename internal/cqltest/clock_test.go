package cqltest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// Two nodes whose clocks run 50 ms ahead of the machine's and 50 ms behind
// it: what a CQL client reads as each node's time (now(), a cell's
// WRITETIME) is that far off, one node stepped 200 ms further is seen to
// move, and an idle node does not spin (as one under libfaketime does).
func TestClusterClocksApart(t *testing.T) {
	began := time.Now()
	ahead, behind := 50*time.Millisecond, -50*time.Millisecond
	// Ports of its own: go test ./... runs this package beside e2e, whose
	// TestClusterLiveListsWithClocksApart starts StartClockedCluster's nodes.
	nodes := startClockedCluster(t, clockedPorts{9045, 7003, 7307}, ahead, behind)
	started := time.Since(began)
	sessions := make([]*gocql.Session, len(nodes))
	for i, n := range nodes {
		sessions[i] = n.Session(t)
	}

	var offsets []interval
	for i, n := range nodes {
		got := serverOffset(t, sessions[i])
		if !got.holds(n.ClockOffset()) {
			t.Errorf("%s, %v off: its now() is %v off", n.Addr, n.ClockOffset(), got)
		}
		offsets = append(offsets, got)
	}
	apart := interval{offsets[0].lo - offsets[1].hi, offsets[0].hi - offsets[1].lo}
	if !apart.holds(ahead - behind) {
		t.Errorf("the nodes' now() are %v apart, not %v", apart, ahead-behind)
	}

	if err := sessions[0].Query(`CREATE KEYSPACE IF NOT EXISTS clocked WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`).Exec(); err != nil {
		t.Fatalf("creating the keyspace: %v", err)
	}
	if err := sessions[0].Query(`CREATE TABLE IF NOT EXISTS clocked.cells (k text PRIMARY KEY, v int)`).Exec(); err != nil {
		t.Fatalf("creating the table: %v", err)
	}
	var writes []string
	for i, n := range nodes {
		got := writeTimeOffset(t, sessions[i], n.Addr)
		if !got.holds(n.ClockOffset()) {
			t.Errorf("%s, %v off: a write it coordinates is timed %v off", n.Addr, n.ClockOffset(), got)
		}
		writes = append(writes, got.String())
	}

	// A step: the node follows within its clock's 50 ms check.
	const step = 200 * time.Millisecond
	stepped := time.Now()
	nodes[0].SetClockOffset(ahead + step)
	var after interval
	for deadline := stepped.Add(5 * time.Second); ; {
		if after = serverOffset(t, sessions[0]); after.holds(ahead+step) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	followed := time.Since(stepped)
	if !after.holds(ahead + step) {
		t.Errorf("%s stepped to %v off: its now() is %v off after %v", nodes[0].Addr, ahead+step, after, followed.Round(time.Millisecond))
	}
	afterWrite := writeTimeOffset(t, sessions[0], nodes[0].Addr)
	if !afterWrite.holds(ahead + step) {
		t.Errorf("%s stepped to %v off: a write it coordinates is timed %v off", nodes[0].Addr, ahead+step, afterWrite)
	}
	if got := serverOffset(t, sessions[1]); !got.holds(behind) {
		t.Errorf("%s, not stepped, %v off: its now() is %v off", nodes[1].Addr, behind, got)
	}

	// Idle: what the test's sessions send (heartbeats) is nothing.
	const idle = 3 * time.Second
	before := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		before[i] = cpuTime(t, n.PID())
	}
	time.Sleep(idle)
	var cpu []string
	for i, n := range nodes {
		share := float64(cpuTime(t, n.PID())-before[i]) / float64(idle)
		if share > 0.5 {
			t.Errorf("%s used %.0f%% of a core over %v idle: its clock spins", n.Addr, 100*share, idle)
		}
		cpu = append(cpu, fmt.Sprintf("%s %.1f%%", n.Addr, 100*share))
	}
	t.Logf("%d nodes started in %v; set %v and %v off: now() %v and %v off, %v apart, WRITETIME %s off; "+
		"stepped %v: now() %v off, seen after %v, WRITETIME %v off; idle CPU of a core over %v: %s; whole test %v",
		len(nodes), started.Round(100*time.Millisecond), ahead, behind, offsets[0], offsets[1], apart, strings.Join(writes, " and "),
		step, after, followed.Round(time.Millisecond), afterWrite, idle, strings.Join(cpu, ", "), time.Since(began).Round(100*time.Millisecond))
}

// interval bounds an offset measured across a round trip.
type interval struct{ lo, hi time.Duration }

func (i interval) holds(d time.Duration) bool { return i.lo <= d && d <= i.hi }

func (i interval) String() string {
	return fmt.Sprintf("[%v, %v]", i.lo.Round(100*time.Microsecond), i.hi.Round(100*time.Microsecond))
}

// serverOffset bounds how far the node's clock runs from this machine's:
// a reading s of its millisecond clock, taken between local times t0 and
// t1, puts the offset in [s-t1, s+1ms-t0]. The bounds of several readings
// narrow it to less than 20 ms, or the test fails.
func serverOffset(t *testing.T, s *gocql.Session) interval {
	t.Helper()
	return narrow(t, func() (interval, error) {
		var at time.Time
		t0 := time.Now()
		err := s.Query(`SELECT toTimestamp(now()) FROM system.local`).Scan(&at)
		t1 := time.Now()
		return interval{at.Sub(t1), at.Add(time.Millisecond).Sub(t0)}, err
	})
}

// writeTimeOffset bounds, as serverOffset does, how far the WRITETIME the
// node gives a write it coordinates is from this machine's clock.
func writeTimeOffset(t *testing.T, s *gocql.Session, key string) interval {
	t.Helper()
	return narrow(t, func() (interval, error) {
		t0 := time.Now()
		if err := s.Query(`INSERT INTO clocked.cells (k, v) VALUES (?, 1)`, key).Exec(); err != nil {
			return interval{}, err
		}
		t1 := time.Now()
		var micros int64
		if err := s.Query(`SELECT WRITETIME(v) FROM clocked.cells WHERE k = ?`, key).Scan(&micros); err != nil {
			return interval{}, err
		}
		at := time.UnixMicro(micros)
		return interval{at.Sub(t1), at.Add(time.Millisecond).Sub(t0)}, nil
	})
}

// narrow intersects the intervals of readings until it is narrower than
// 20 ms, within 10 s.
func narrow(t *testing.T, read func() (interval, error)) interval {
	t.Helper()
	got := interval{-time.Hour, time.Hour}
	for deadline := time.Now().Add(10 * time.Second); got.hi-got.lo >= 20*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("no narrower bound than %v in 10 s: the round trips are too slow", got)
		}
		r, err := read()
		if err != nil {
			t.Fatalf("reading a node's time: %v", err)
		}
		got = interval{max(got.lo, r.lo), min(got.hi, r.hi)}
	}
	return got
}

// cpuTime is the CPU time, user and system, the process has used so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading a node's CPU time: %v", err)
	}
	// The fields after the command, which may hold spaces, in parentheses:
	// state is the third field of the line; utime and stime the 14th and
	// 15th, in clock ticks, which /proc counts at 100 a second (USER_HZ).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %q", pid, b)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
