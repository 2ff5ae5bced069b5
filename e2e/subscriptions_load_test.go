package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/internal/cqltest"
)

// wsDelivery is an item a load-test subscription received.
type wsDelivery struct {
	conn  int
	sub   string // the subscription's id: the list's entity id
	value string
	at    time.Time
}

// One gateway holds 1,000 subscriptions on 100 lists (10 each) through 30 s
// of steady adds: it polls each list once per interval whatever its
// subscriptions, delivers every item to all 10 subscriptions of its list,
// and its resident memory stays bounded.
func TestThousandSubscriptionsOnOneGateway(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	if _, err := gatewayBinary(); err != nil { // built once for all tests: not this test's time
		t.Fatal(err)
	}
	began := time.Now()
	const (
		lists    = 100
		conns    = 10 // each subscribes once to every list: 10 subscriptions per list, 100 per connection (the default bound)
		interval = time.Second
		run      = 30 * time.Second
		addEvery = 40 * time.Millisecond // 25 adds/s, one item each, round robin: one add per list every 4 s
		// rssBound bounds the gateway's resident memory all along. Here it
		// idles at about 38 MiB on Cassandra, holds the 1,000 subscriptions
		// (each a buffer of 1,000 items and three goroutines) in about
		// 30 MiB more, and peaks at about 95 MiB with the garbage of the
		// run. Twice that leaves room for the collector's timing on a busy
		// machine, while a leak of 16 KiB per delivery (7,500 of them:
		// 117 MiB) passes it.
		rssBound = 192 << 20
	)
	g := startGateway(t, "LISTGATE_CQL_HOSTS="+hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_MIGRATE=true",
		"LISTGATE_SUBSCRIPTION_POLL="+interval.String())
	pid := g.cmd.Process.Pid
	entityType := fmt.Sprintf("load%d", time.Now().UnixNano()%1e9)
	requestAs(t, g.base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`, entityType), nil)
	idle, _ := procStatus(pid, "VmRSS")

	var (
		mu        sync.Mutex
		delivered []wsDelivery
		failures  []string
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readers sync.WaitGroup
	subscribing := time.Now()
	for c := range conns {
		conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			t.Fatal(err)
		}
		conn.SetReadLimit(1 << 20)
		t.Cleanup(func() { conn.CloseNow() })
		write := func(m any) error {
			b, _ := json.Marshal(m)
			return conn.Write(ctx, websocket.MessageText, b)
		}
		if err := write(map[string]any{"type": "connection_init", "payload": map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		if _, b, err := conn.Read(ctx); err != nil || !strings.Contains(string(b), `"connection_ack"`) {
			t.Fatalf("connection_init: %s %v", b, err)
		}
		for l := range lists {
			err := write(map[string]any{"id": fmt.Sprint("e", l), "type": "subscribe", "payload": map[string]any{
				"query": listItemsAdded, "variables": map[string]any{"t": entityType, "id": fmt.Sprint("e", l), "f": "f"}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				_, b, err := conn.Read(ctx)
				if err != nil {
					return // the test ended it
				}
				at := time.Now()
				var m struct {
					ID      string `json:"id"`
					Type    string `json:"type"`
					Payload struct {
						Data struct {
							ListItemsAdded struct{ Value string } `json:"listItemsAdded"`
						} `json:"data"`
						Errors []any `json:"errors"`
					} `json:"payload"`
				}
				if err := json.Unmarshal(b, &m); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("connection %d: %s: %v", c, b, err))
					mu.Unlock()
					continue
				}
				mu.Lock()
				switch {
				case m.Type == "ping":
					go write(map[string]any{"type": "pong"})
				case m.Type == "next" && len(m.Payload.Errors) == 0:
					delivered = append(delivered, wsDelivery{c, m.ID, m.Payload.Data.ListItemsAdded.Value, at})
				case m.Type != "pong":
					failures = append(failures, fmt.Sprintf("connection %d: %s", c, b))
				}
				mu.Unlock()
			}
		}()
	}
	waitMetric(t, g.base, "listgate_subscriptions_active", lists*conns, 30*time.Second)
	if w := metric(t, g.base, "listgate_subscription_lists_watched"); w != lists {
		t.Fatalf("the gateway watches %v lists, want %d", w, lists)
	}
	subscribed, _ := procStatus(pid, "VmRSS")
	subscribeTook := time.Since(subscribing)

	// Steady adds through the API, each in its own request, at most 8 at
	// once so that a slow answer does not slow the rate.
	type add struct {
		list        int
		sent, acked time.Time
		err         string
	}
	polls0, cpu0, t0 := metric(t, g.base, "listgate_subscription_polls_total"), cpuOf(t, pid), time.Now()
	var adds []*add
	var adders sync.WaitGroup
	slots := make(chan struct{}, 8)
	tick := time.NewTicker(addEvery)
	for i := 0; time.Since(t0) < run; i++ {
		<-tick.C
		a := &add{list: i % lists}
		adds = append(adds, a)
		slots <- struct{}{}
		adders.Add(1)
		go func() {
			defer func() { <-slots; adders.Done() }()
			a.sent = time.Now()
			r := g.do(`mutation($list: ListRefInput!, $v: ListValue!) { addListItems(list: $list, items: [{value: $v}]) { added } }`,
				map[string]any{"list": map[string]any{"entityType": entityType, "entityId": fmt.Sprint("e", a.list), "feature": "f"}, "v": fmt.Sprint("v", i)})
			a.acked = time.Now()
			if p := r.Problem(); p != "" {
				a.err = p
			}
		}()
	}
	tick.Stop()
	adders.Wait()
	// Every item is delivered within an interval or two of its add.
	for deadline := time.Now().Add(2*interval + 5*time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := len(delivered)
		mu.Unlock()
		if n >= len(adds)*conns {
			break
		}
	}
	polls1, cpu1, t1 := metric(t, g.base, "listgate_subscription_polls_total"), cpuOf(t, pid), time.Now()
	peak, samples := g.mem.peak()
	active, watched := metric(t, g.base, "listgate_subscriptions_active"), metric(t, g.base, "listgate_subscription_lists_watched")
	cancel()
	readers.Wait()

	wall := t1.Sub(t0)
	pollsPerSecond := (polls1 - polls0) / wall.Seconds()
	if want := float64(lists) / interval.Seconds(); pollsPerSecond < 0.85*want || pollsPerSecond > 1.15*want {
		t.Errorf("%.1f polls/s, want %.0f ± 15%% (one per watched list per interval)", pollsPerSecond, want)
	}
	failed := 0
	for _, a := range adds {
		if a.err != "" {
			if failed++; failed <= 3 {
				t.Errorf("add to e%d: %s", a.list, a.err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d adds failed", failed, len(adds))
	}
	for _, f := range failures[:min(len(failures), 5)] {
		t.Errorf("a message not an item: %s", f)
	}
	// Each item to each connection once, on its list's subscription.
	got := map[string][]int{} // value -> connections it reached
	var latency []time.Duration
	for _, d := range delivered {
		i := 0
		fmt.Sscanf(d.value, "v%d", &i)
		if i < 0 || i >= len(adds) || d.sub != fmt.Sprint("e", adds[i].list) {
			t.Errorf("connection %d's subscription %s received %q, not an item of its list", d.conn, d.sub, d.value)
			continue
		}
		got[d.value] = append(got[d.value], d.conn)
		latency = append(latency, d.at.Sub(adds[i].acked))
	}
	var every []int
	for c := range conns {
		every = append(every, c)
	}
	missing := 0
	for i, a := range adds {
		v := fmt.Sprint("v", i)
		if !slices.Equal(slices.Sorted(slices.Values(got[v])), every) {
			if missing++; missing <= 5 {
				t.Errorf("%s (added to e%d) reached connections %v, want each of the 10 once", v, a.list, got[v])
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d items did not reach each of their list's 10 subscriptions once", missing, len(adds))
	}
	if active != lists*conns || watched != lists {
		t.Errorf("after the run: %v subscriptions active, %v lists watched; want %d and %d", active, watched, lists*conns, lists)
	}
	if peak > rssBound {
		t.Errorf("the gateway's RSS peaked at %d MiB, past %d MiB", peak>>20, rssBound>>20)
	}
	slices.Sort(latency)
	pct := func(p float64) time.Duration {
		if len(latency) == 0 {
			return 0
		}
		return latency[min(len(latency)-1, int(p*float64(len(latency))))].Round(time.Millisecond)
	}
	if p99 := pct(0.99); p99 > 2*interval {
		t.Errorf("99th percentile of the latency from an add to its receipt: %v, past two poll intervals", p99)
	}
	cpu := cpu1 - cpu0
	t.Logf("%d subscriptions on %d lists over %d connections: all active %v after the first dial", lists*conns, lists, conns, subscribeTook.Round(time.Millisecond))
	t.Logf("%d adds in %v (%.1f/s), %d deliveries", len(adds), run, float64(len(adds))/run.Seconds(), len(delivered))
	t.Logf("polls: %.0f in %v = %.1f/s (want %d/s)", polls1-polls0, wall.Round(time.Millisecond), pollsPerSecond, lists)
	t.Logf("gateway CPU: %v in %v = %.1f%% of one core", cpu, wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds())
	t.Logf("gateway RSS: %d MiB idle, %d MiB with the subscriptions open, peak %d MiB (%d samples; bound %d MiB)", idle>>20, subscribed>>20, peak>>20, samples, rssBound>>20)
	t.Logf("latency from an add's acknowledgement to receipt: p50 %v, p99 %v, max %v", pct(0.5), pct(0.99), pct(1))
	t.Logf("the test took %v (building the listgate binary aside)", time.Since(began).Round(time.Millisecond))
}

// cpuOf is a process's CPU time so far.
func cpuOf(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := cpuTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
