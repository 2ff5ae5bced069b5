package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
)

// Live lists on a cluster whose node clocks are apart: two Cassandra
// nodes whose clocks run 50 ms ahead of and behind the machine's (100 ms
// apart, then 160 ms once one steps 60 ms during the run), two gateway
// processes, a subscription on each, and adds through both begun as soon
// as the subscriptions count as started: every add is delivered once to
// both, and one gateway's adds in their order. With the nodes' clocks
// past --max-clock-offset apart, a new subscription is refused
// CLOCK_SKEW, adds go on, and once they agree again subscriptions start.
func TestClusterLiveListsWithClocksApart(t *testing.T) {
	began := time.Now()
	nodes := cqltest.StartClockedCluster(t, 50*time.Millisecond, -50*time.Millisecond)
	started := time.Since(began)
	env := []string{"LISTGATE_CQL_HOSTS=" + nodes[0].Host() + "," + nodes[1].Host(), "LISTGATE_CQL_KEYSPACE=clocks",
		"LISTGATE_CQL_REPLICATION={'class': 'SimpleStrategy', 'replication_factor': 2}", "LISTGATE_CQL_TIMEOUT=5s"}
	g1 := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...)
	waitReady(t, g1.base, 200, time.Minute)
	g2 := startGateway(t, env...)
	waitReady(t, g2.base, 200, time.Minute)
	createFeature(t, g1, "user")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	const trials, adds = 16, 6
	for trial := range trials {
		if trial == trials/2 {
			nodes[0].SetClockOffset(110 * time.Millisecond) // a step during the run: 160 ms apart
		}
		id := fmt.Sprintf("t%d", trial)
		subs := []*feedSub{subscribeFeed(t, ctx, g1.base, listVars("user", id)), subscribeFeed(t, ctx, g2.base, listVars("user", id))}
		waitActive(t, g1, 1)
		waitActive(t, g2, 1)
		want := map[string]bool{}
		var through2 []string
		for i := range adds {
			v, g := fmt.Sprintf("%s-%d", id, i), g2
			if i%3 == 2 {
				g = g1
			} else {
				through2 = append(through2, v)
			}
			addItems(t, g.base, "", "user", id, "f", [2]string{v, ""})
			want[v] = true
		}
		for i, s := range subs {
			got := values(s.await(adds, time.Minute))
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(maps.Keys(want))) {
				t.Errorf("trial %d, the subscription on gateway %d: %v, want each of %v once", trial, i+1, got, slices.Sorted(maps.Keys(want)))
			}
			if order := slices.DeleteFunc(slices.Clone(got), func(v string) bool { return !slices.Contains(through2, v) }); !slices.Equal(order, through2) {
				t.Errorf("trial %d, the subscription on gateway %d: gateway 2's adds came %v, want them in their order %v", trial, i+1, order, through2)
			}
			s.conn.Close()
		}
		waitActive(t, g1, 0)
		waitActive(t, g2, 0)
	}

	// 450 ms apart: past --max-clock-offset (250 ms) as every gateway
	// measures them.
	nodes[0].SetClockOffset(400 * time.Millisecond)
	waitMetric(t, g1.base, "listgate_clock_usable", 0, time.Minute)
	if errs := refusal(t, ctx, g1, listVars("user", "skewed")); codes(errs) != "CLOCK_SKEW" || !strings.Contains(errs[0].Message, "--max-clock-offset") {
		t.Fatalf("a subscription with the node clocks 450 ms apart: %+v, want CLOCK_SKEW naming --max-clock-offset", errs)
	}
	addItems(t, g1.base, "", "user", "skewed", "f", [2]string{"still-added", ""})
	if n := metric(t, g1.base, "listgate_subscriptions_refused_total", `reason="clock_skew"`); n != 1 {
		t.Errorf("listgate_subscriptions_refused_total{reason=\"clock_skew\"} = %v, want 1", n)
	}
	nodes[0].SetClockOffset(50 * time.Millisecond)
	waitMetric(t, g1.base, "listgate_clock_usable", 1, time.Minute)
	positionOf(t, ctx, g1, "user", "again", "after-the-clocks-agree")
	t.Logf("2 clocked nodes started in %v; %d trials of %d adds through two gateways to a subscription on each; whole test %v",
		started.Round(time.Second), trials, adds, time.Since(began).Round(time.Second))
}
