package cql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

// fixedPlan is a host selection policy whose plan is always its hosts, in
// order.
type fixedPlan struct {
	gocql.HostSelectionPolicy
	hosts []*gocql.HostInfo
}

type pickedHost struct{ h *gocql.HostInfo }

func (p pickedHost) Info() *gocql.HostInfo { return p.h }
func (p pickedHost) Token() gocql.Token    { return nil }
func (p pickedHost) Mark(error)            {}

func (fixedPlan) AddHost(*gocql.HostInfo)    {}
func (fixedPlan) RemoveHost(*gocql.HostInfo) {}

func (p fixedPlan) Pick(gocql.ExecutableQuery) gocql.NextHost {
	i := 0
	return func() gocql.SelectedHost {
		if i >= len(p.hosts) {
			return nil
		}
		i++
		return pickedHost{p.hosts[i-1]}
	}
}

func testHosts(n int) []*gocql.HostInfo {
	var hosts []*gocql.HostInfo
	for i := range n {
		h := gocql.HostInfoBuilder{HostId: fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1)}.Build()
		hosts = append(hosts, &h)
	}
	return hosts
}

// plan is the order of the hosts (by index) slowHosts picks.
func plan(s *slowHosts, hosts []*gocql.HostInfo) []int {
	var out []int
	next := s.Pick(nil)
	for h := next(); h != nil; h = next() {
		for i, x := range hosts {
			if x == h.Info() {
				out = append(out, i)
			}
		}
	}
	return out
}

// A host whose attempt was overtaken after the delay, or timed out, goes
// to the back of every plan, until it answers within the delay or
// avoidHostFor passes; a caller's own cancellation, an overtaken attempt
// shorter than the delay, and a slow answer move nothing.
func TestSlowHostsGoToTheBack(t *testing.T) {
	hosts := testHosts(3)
	clock := &fakeNanos{t: 1}
	delay := 10 * time.Millisecond
	s := newSlowHosts(fixedPlan{hosts: hosts}, clock.now, func() time.Duration { return delay })
	ctx := context.Background()
	canceled := fmt.Errorf("attempt: %w", context.Canceled)
	check := func(what string, want ...int) {
		t.Helper()
		if got := plan(s, hosts); !equalInts(got, want) {
			t.Errorf("%s: plan %v, want %v", what, got, want)
		}
	}
	check("at first", 0, 1, 2)

	s.observe(ctx, hosts[0], 3*delay, nil)
	check("after a slow answer", 0, 1, 2)
	s.observe(ctx, hosts[0], delay/2, canceled)
	check("after an attempt overtaken within the delay", 0, 1, 2)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	s.observe(gone, hosts[0], 3*delay, canceled)
	check("after its caller went away", 0, 1, 2)

	s.observe(ctx, hosts[0], delay+time.Millisecond, canceled)
	check("after an attempt overtaken past the delay", 1, 2, 0)
	s.observe(ctx, hosts[1], 2*time.Second, fmt.Errorf("attempt: %w", gocql.ErrTimeoutNoResponse))
	check("after a timeout too", 2, 0, 1)
	if n := s.avoiding(); n != 2 {
		t.Errorf("avoiding %d hosts, want 2", n)
	}
	s.observe(ctx, hosts[0], delay/2, nil)
	check("once the first answered within the delay", 0, 2, 1)
	clock.t += int64(avoidHostFor)
	check("avoidHostFor later", 0, 1, 2)
	if n := s.avoiding(); n != 0 {
		t.Errorf("avoiding %d hosts, want none", n)
	}
}

// A read is speculated only while a second host is up: gocql's speculative
// execution with no host left fails at once, and that is the read's answer.
func TestSpeculationNeedsASecondHost(t *testing.T) {
	hosts := testHosts(2)
	s := newSlowHosts(fixedPlan{hosts: hosts}, (&fakeNanos{t: 1}).now, func() time.Duration { return time.Millisecond })
	s.AddHosts(hosts)
	if s.Up() != 2 {
		t.Fatalf("%d hosts up, want 2", s.Up())
	}
	s.RemoveHost(hosts[1])
	if s.Up() != 1 {
		t.Fatalf("%d hosts up, want 1", s.Up())
	}
	p, _ := newTestSpeculation(t, DefaultSpeculation)
	if r := p.begin(context.Background(), s.Up()); r != nil {
		t.Error("a read was speculated with one host up")
	}
}

// The retry policy sends a failed attempt to the next host: it is no
// LWTRetryPolicy, whose lightweight transactions (every statement, as gocql
// v1.19.0 marks them on Cassandra) are retried on the host that failed
// them.
func TestRetriesGoToTheNextHost(t *testing.T) {
	var p gocql.RetryPolicy = retryNextHost{&gocql.ExponentialBackoffRetryPolicy{NumRetries: 2}}
	if _, ok := p.(gocql.LWTRetryPolicy); ok {
		t.Fatal("the retry policy retries lightweight transactions on their host")
	}
	if got := p.GetRetryType(gocql.ErrTimeoutNoResponse); got != gocql.RetryNextHost {
		t.Errorf("a timed out attempt is retried by %v, want on the next host", got)
	}
	if !conditional("UPDATE ks.list_features SET deleted_at = ? WHERE entity_type = ? IF deleted_at = null") || conditional("SELECT item_key FROM ks.list_items WHERE feature_key = ?") {
		t.Error("conditional tells lightweight transactions apart wrongly")
	}
}

// A statement is a lightweight transaction to the token-aware policy only
// if it has a condition or a serial consistency, whatever gocql's mark.
func TestOnlyConditionsAreLightweightTransactions(t *testing.T) {
	for _, tc := range []struct {
		stmt string
		cl   gocql.Consistency
		want bool
	}{
		{"SELECT item_key FROM ks.list_items WHERE feature_key = ? AND entity_id = ?", gocql.LocalQuorum, false},
		{"INSERT INTO ks.list_features (entity_type, name, version) VALUES (?, ?, ?) IF NOT EXISTS", gocql.LocalQuorum, true},
		{"UPDATE ks.list_features SET deleted_at = ? WHERE entity_type = ? IF deleted_at = null", gocql.LocalQuorum, true},
		{"SELECT live FROM ks.list_features WHERE entity_type = ?", gocql.LocalSerial, true},
	} {
		if got := (routed{markedLWT{stmt: tc.stmt, cl: tc.cl}}).IsLWT(); got != tc.want {
			t.Errorf("%s at %v: IsLWT %v, want %v", tc.stmt, tc.cl, got, tc.want)
		}
	}
	var s gocql.Session
	if _, ok := gocql.ExecutableQuery(s.Query("SELECT 1")).(interface{ Statement() string }); !ok {
		t.Error("a *gocql.Query has no Statement method")
	}
}

// markedLWT is a statement gocql marked a lightweight transaction, as it
// marks every one on Cassandra.
type markedLWT struct {
	gocql.ExecutableQuery
	stmt string
	cl   gocql.Consistency
}

func (q markedLWT) IsLWT() bool                       { return true }
func (q markedLWT) Statement() string                 { return q.stmt }
func (q markedLWT) GetConsistency() gocql.Consistency { return q.cl }
