package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/wsclient"
)

// live is what the subscriptions of some WebSockets received.
type live struct {
	mu    sync.Mutex
	items map[string][]liveItem // by "connection/subscription id"
	other []string              // every message that is not an item
	count int
}

type liveItem struct {
	value, timestamp string
	at               time.Time
}

// subscribeMany opens conns WebSockets to base, each with the
// subscriptions subs(conn) gives (id → variables of listItemsAdded), and
// records what they receive until ctx ends. It returns once the gateway
// counts them all active.
func subscribeMany(t *testing.T, ctx context.Context, base string, conns int, subs func(conn int) map[string]map[string]any) *live {
	t.Helper()
	l := &live{items: map[string][]liveItem{}}
	total := 0
	for c := range conns {
		conn, err := wsclient.Dial(ctx, base, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		for id, vars := range subs(c) {
			if err := conn.Subscribe(ctx, id, listItemsAdded, vars); err != nil {
				t.Fatal(err)
			}
			total++
		}
		go func() {
			for {
				m, err := conn.Read(ctx)
				if err != nil {
					return // the test ended it
				}
				at := time.Now()
				var it wsclient.Item
				json.Unmarshal(m.Payload, &it)
				l.mu.Lock()
				if m.Type == "next" && len(it.Errors) == 0 {
					key := fmt.Sprint(c, "/", m.ID)
					l.items[key] = append(l.items[key], liveItem{it.Data.ListItemsAdded.Value, it.Data.ListItemsAdded.Timestamp, at})
					l.count++
				} else {
					l.other = append(l.other, fmt.Sprintf("connection %d: %s %s %s", c, m.Type, m.ID, m.Payload))
				}
				l.mu.Unlock()
			}
		}()
	}
	waitMetric(t, base, "listgate_subscriptions_active", float64(total), time.Minute)
	return l
}

// await waits until n items in all came, or fails past within.
func (l *live) await(t *testing.T, n int, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		got, other := l.count, slices.Clone(l.other)
		l.mu.Unlock()
		if len(other) > 0 {
			t.Fatalf("a message not an item: %s", other[0])
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items came within %v, want %d", got, within, n)
		}
	}
}

// percentiles shows the 50th and 99th percentiles and the maximum of d.
func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	slices.Sort(d)
	p := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))].Round(time.Millisecond) }
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d)", p(0.5), p(0.99), p(1), len(d))
}

// Two gateways on Cassandra: 2,000 subscriptions on B over 200 lists (ten
// each, on 20 WebSockets) while adds of ten items come through A at 1,000
// items/s. Every item reaches each of its list's subscriptions once, the
// adds of a list in the order they were made; B reads no list at all (the
// items come with the change feed), and the feed costs it a handful of
// reads per interval however many lists it watches.
func TestLiveListsAcrossTwoGateways(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	const (
		lists, conns, perConn = 200, 20, 100
		addsPerSecond, perAdd = 100, 10
		run                   = 5 * time.Second
	)
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet"}
	a := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...)
	b := startGateway(t, append(env, "LISTGATE_MAX_SUBSCRIPTIONS_PER_CALLER=2000")...)
	entityType := fmt.Sprintf("live%d", time.Now().UnixNano()%1e9)
	requestAs(t, a.base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, entityType), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := subscribeMany(t, ctx, b.base, conns, func(c int) map[string]map[string]any {
		subs := map[string]map[string]any{}
		for j := range perConn {
			list := (c%(lists/perConn))*perConn + j // even connections the first 100 lists, odd ones the others
			subs[fmt.Sprint("e", list)] = map[string]any{"t": entityType, "id": fmt.Sprint("e", list), "f": "f"}
		}
		return subs
	})

	feedReads := func() float64 {
		return metric(t, b.base, "listgate_cql_statement_duration_seconds_count", `db_operation_name="SELECT list_changes"`)
	}
	listReads := func() float64 {
		return metric(t, b.base, "listgate_cql_statement_duration_seconds_count", `db_operation_name="SELECT list_items"`)
	}
	feed0, list0, t0 := feedReads(), listReads(), time.Now()
	type add struct {
		list  int
		acked time.Time
	}
	var (
		mu   sync.Mutex
		adds []add
	)
	var adders sync.WaitGroup
	slots := make(chan struct{}, 8)
	tick := time.NewTicker(time.Second / addsPerSecond)
	for i := 0; i < int(run.Seconds())*addsPerSecond; i++ {
		<-tick.C
		slots <- struct{}{}
		adders.Go(func() {
			defer func() { <-slots }()
			items := make([]map[string]any, perAdd)
			for k := range items {
				items[k] = map[string]any{"value": fmt.Sprintf("v%d-%d", i, k)}
			}
			list := i % lists
			r := a.do(`mutation($list: ListRefInput!, $items: [ListItemInput!]!) { addListItems(list: $list, items: $items) { added } }`,
				map[string]any{"list": map[string]any{"entityType": entityType, "entityId": fmt.Sprint("e", list), "feature": "f"}, "items": items})
			if p := r.Problem(); p != "" {
				t.Errorf("add %d: %s", i, p)
			}
			mu.Lock()
			defer mu.Unlock()
			for len(adds) <= i {
				adds = append(adds, add{})
			}
			adds[i] = add{list, time.Now()}
		})
	}
	tick.Stop()
	adders.Wait()
	n := len(adds)
	got.await(t, n*perAdd*conns/(lists/perConn), time.Minute)
	wall := time.Since(t0)
	feedPerSecond := (feedReads() - feed0) / wall.Seconds()
	if d := listReads() - list0; d != 0 {
		t.Errorf("B read lists %v times: the items should come with the feed", d)
	}

	var latency []time.Duration
	got.mu.Lock()
	defer got.mu.Unlock()
	for key, items := range got.items {
		list := 0
		fmt.Sscanf(key[strings.IndexByte(key, '/')+1:], "e%d", &list)
		var want []string
		for i, a := range adds {
			if a.list == list {
				for k := range perAdd {
					want = append(want, fmt.Sprintf("v%d-%d", i, k))
				}
			}
		}
		var values []string
		last := -1
		for _, it := range items {
			values = append(values, it.value)
			i := 0
			fmt.Sscanf(it.value, "v%d-", &i)
			if i < last {
				t.Errorf("%s: %s came after an item of a later add", key, it.value)
			}
			last = i
			latency = append(latency, it.at.Sub(adds[i].acked))
		}
		if slices.Sort(values); !slices.Equal(values, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s received %d items, want each of its list's %d once", key, len(values), len(want))
		}
	}
	if len(got.items) != conns*perConn {
		t.Errorf("%d subscriptions received items, want %d", len(got.items), conns*perConn)
	}
	t.Logf("%d items in %d adds through A in %v, %d deliveries through B", n*perAdd, n, run, got.count)
	t.Logf("latency from an add's acknowledgement to receipt: %s", percentiles(latency))
	t.Logf("B read the change feed %.1f times a second, and no list", feedPerSecond)
}

// Gateways whose clocks run 30 s behind and ahead of the others' write
// items stamped by their own clocks: a subscription through a third
// gateway, and one through the gateway ahead, get every item once, in the
// order added; each gateway shows the offset it corrects.
func TestWritersWithWrongClocks(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet"}
	reader := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...)
	behind := startGateway(t, append(env, "LISTGATE_TEST_CLOCK_OFFSET=-30s")...)
	ahead := startGateway(t, append(env, "LISTGATE_TEST_CLOCK_OFFSET=30s")...)
	for _, g := range []struct {
		g    *gateway
		want float64
	}{{behind, 30}, {ahead, -30}, {reader, 0}} {
		if off := metric(t, g.g.base, "listgate_clock_offset_seconds"); math.Abs(off-g.want) > 1 {
			t.Errorf("%s shows a clock offset of %.3f s, want %v ± 1", g.g.base, off, g.want)
		}
	}
	entityType := fmt.Sprintf("skew%d", time.Now().UnixNano()%1e9)
	requestAs(t, reader.base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, entityType), nil)
	vars := map[string]any{"t": entityType, "id": "u1", "f": "f"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onReader := subscribeMany(t, ctx, reader.base, 1, func(int) map[string]map[string]any { return map[string]map[string]any{"s": vars} })
	onAhead := subscribeMany(t, ctx, ahead.base, 1, func(int) map[string]map[string]any { return map[string]map[string]any{"s": vars} })
	var want []string
	for i := range 20 {
		w := []*gateway{behind, ahead}[i%2]
		v := fmt.Sprint("v", i)
		addItems(t, w.base, "", entityType, "u1", "f", [2]string{v, ""})
		want = append(want, v)
	}
	for _, l := range []*live{onReader, onAhead} {
		l.await(t, len(want), 30*time.Second)
		l.mu.Lock()
		var values []string
		for _, it := range l.items["0/s"] {
			values = append(values, it.value)
		}
		l.mu.Unlock()
		if !slices.Equal(values, want) {
			t.Errorf("received %q, want %q", values, want)
		}
	}
	// Their timestamps are the writers' own.
	onReader.mu.Lock()
	defer onReader.mu.Unlock()
	first, _ := time.Parse(time.RFC3339Nano, onReader.items["0/s"][0].timestamp)
	second, _ := time.Parse(time.RFC3339Nano, onReader.items["0/s"][1].timestamp)
	if d := second.Sub(first); d < 50*time.Second {
		t.Errorf("the item added through the gateway ahead is stamped %v after the one added through the gateway behind, want about 60 s", d)
	}
}

// A SIGTERM while clients subscribe, end their subscriptions and
// subscribe again, as fast as they can: the gateway ends every
// subscription and exits 0 within its shutdown timeout.
func TestShutdownWhileClientsResubscribe(t *testing.T) {
	const shutdownTimeout = 5 * time.Second
	g := startGateway(t, "LISTGATE_SHUTDOWN_TIMEOUT="+shutdownTimeout.String())
	requestAs(t, g.base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	cycles := 0
	for c := range 8 {
		conn, err := wsclient.Dial(ctx, g.base, "")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Four lists, two clients each: subscriptions join lists others
		// are leaving.
		vars := map[string]any{"t": "user", "id": fmt.Sprint("u", c%4), "f": "f"}
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprint(i)
				if conn.Subscribe(ctx, id, listItemsAdded, vars) != nil || conn.Complete(ctx, id) != nil {
					return // the gateway closed the socket
				}
				mu.Lock()
				cycles++
				mu.Unlock()
			}
		})
		go func() {
			for {
				if _, err := conn.Read(ctx); err != nil {
					return
				}
			}
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := cycles
		mu.Unlock()
		if n >= 2000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscribe and complete cycles in 30 s", n)
		}
	}
	g.sigterm(shutdownTimeout)
	wg.Wait()
	if s := g.stderr.String(); strings.Contains(s, "panic") || strings.Contains(s, "DATA RACE") {
		t.Fatalf("the gateway's log:\n%s", s)
	}
}

// One WebSocket subscribes 100 times with since to a list of 2,000 items
// of 32 KB (64 MB), then never reads: the gateway sends each catch-up a
// page at a time within --catch-up-bytes, ends the subscriptions its
// client does not read with TOO_SLOW, and its resident memory stays
// within the bound docs/live-lists.md states; a client that reads meanwhile catches up.
func TestNonReadingClientStaysBounded(t *testing.T) {
	const (
		items, valueBytes = 2000, 32 << 10
		// What the subscriptions hold live is within --catch-up-bytes (64
		// MiB; no live item comes here), well under the memory limit, so
		// the collector keeps the heap within it; 64 MiB more is for the
		// rest of the process (stacks, sockets, the store's own memory).
		// Each subscription holding a page of its own (100 × 3.2 MB) would
		// not fit.
		memoryLimit = 256 << 20
		rssBound    = memoryLimit + 64<<20
	)
	g := startGateway(t, "LISTGATE_SUBSCRIPTION_SLOW_TIMEOUT=2s", "LISTGATE_MEMORY_LIMIT=256MiB")
	requestAs(t, g.base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	began := time.Now().Add(-10 * time.Minute)
	for i := 0; i < items; i += 25 {
		var batch [][2]string
		for k := i; k < i+25; k++ {
			v := fmt.Sprintf("%05d%s", k, strings.Repeat("x", valueBytes-5))
			batch = append(batch, [2]string{v, began.Add(time.Duration(k) * time.Millisecond).Format(time.RFC3339Nano)})
		}
		addItems(t, g.base, "", "user", "u1", "f", batch...)
	}
	before, _ := procStatus(g.Cmd.Process.Pid, "VmRSS")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	vars := map[string]any{"t": "user", "id": "u1", "f": "f", "since": began.Add(-time.Second).Format(time.RFC3339Nano)}
	stalled, err := wsclient.Dial(ctx, g.base, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	for i := range 100 {
		if err := stalled.Subscribe(ctx, fmt.Sprint(i), listItemsAdded, vars); err != nil {
			t.Fatal(err)
		}
	}
	waitMetric(t, g.base, "listgate_subscriptions_active", 100, 30*time.Second)
	// A reader meanwhile: its catch-up waits for room, then comes whole.
	reader := subscribeMany(t, ctx, g.base, 1, func(int) map[string]map[string]any { return map[string]map[string]any{"r": vars} })
	reader.await(t, items, 90*time.Second)
	waitMetric(t, g.base, "listgate_subscriptions_active", 1, 90*time.Second)
	// Those not ended too_slow went with the socket, closed when a write
	// to it could not finish within --request-timeout.
	ended := metric(t, g.base, "listgate_subscriptions_ended_total", `reason="too_slow"`)
	if ended < 1 {
		t.Errorf("no subscription ended too_slow")
	}
	peak, samples := g.mem.peak()
	if peak > rssBound {
		t.Errorf("the gateway's RSS reached %d MiB, more than %d MiB", peak>>20, rssBound>>20)
	}
	t.Logf("RSS %d MiB before the subscriptions, peak %d MiB (%d samples); %v of the stalled subscriptions ended too_slow", before>>20, peak>>20, samples, ended)
}

// 20,000 watched lists nobody adds to (200 WebSockets × 100
// subscriptions), on either store: the gateway reads no list for them,
// reads the change feed a few times per interval (on Cassandra), and uses
// a few percent of a core and bounded memory. The bench measures the same
// (make bench --only live); the bounds here leave room for a loaded
// machine.
func TestIdleWatchedListsCostLittle(t *testing.T) {
	const (
		conns, perConn = 200, 100
		measure        = 10 * time.Second
		cpuBound       = 0.25      // of one core; about 0.01 measured
		rssBound       = 450 << 20 // the bound; about 320 MiB measured
	)
	for _, backend := range []string{"embedded", "cassandra"} {
		t.Run(backend, func(t *testing.T) {
			// One caller holds them all: its share of what they keep of
			// their operations (about 3 KB each) is the whole.
			env := []string{"LISTGATE_MAX_WATCHED_LISTS=20000", "LISTGATE_MAX_SUBSCRIPTIONS_PER_CALLER=20000", "LISTGATE_CALLER_SUBSCRIPTION_OPERATION_BYTES_SHARE=1"}
			if backend == "cassandra" {
				env = append(env, "LISTGATE_CQL_HOSTS="+strings.Join(cqltest.Hosts(t), ","), "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_MIGRATE=true")
			}
			g := startGateway(t, env...)
			entityType := fmt.Sprintf("idle%d", time.Now().UnixNano()%1e9)
			requestAs(t, g.base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, entityType), nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			subscribeMany(t, ctx, g.base, conns, func(c int) map[string]map[string]any {
				subs := map[string]map[string]any{}
				for j := range perConn {
					subs[fmt.Sprint(j)] = map[string]any{"t": entityType, "id": fmt.Sprint("e", c*perConn+j), "f": "f"}
				}
				return subs
			})
			if w := metric(t, g.base, "listgate_subscription_lists_watched"); w != conns*perConn {
				t.Fatalf("%v lists watched, want %d", w, conns*perConn)
			}
			reads := func(table string) float64 {
				return metric(t, g.base, "listgate_cql_statement_duration_seconds_count", `db_operation_name="SELECT `+table+`"`)
			}
			pid := g.Cmd.Process.Pid
			feed0, list0, cpu0, t0 := reads("list_changes"), reads("list_items"), cpuOf(t, pid), time.Now()
			<-time.After(measure) // the window the idle gateway is measured over
			feed1, list1, cpu1, t1 := reads("list_changes"), reads("list_items"), cpuOf(t, pid), time.Now()
			wall := t1.Sub(t0).Seconds()
			cores := (cpu1 - cpu0).Seconds() / wall
			rss, _ := procStatus(pid, "VmRSS")
			peak, _ := g.mem.peak()
			t.Logf("%d idle watched lists: %.3f of a core, RSS %d MiB (peak %d MiB), %.1f change feed reads/s, %v list reads",
				conns*perConn, cores, rss>>20, peak>>20, (feed1-feed0)/wall, list1-list0)
			if list1 != list0 {
				t.Errorf("the gateway read lists %v times", list1-list0)
			}
			if f := (feed1 - feed0) / wall; f > 25 {
				t.Errorf("%.1f change feed reads a second, want at most about 20", f)
			}
			if cores > cpuBound {
				t.Errorf("the gateway used %.3f of a core, more than %v", cores, cpuBound)
			}
			if peak > rssBound {
				t.Errorf("the gateway's RSS peaked at %d MiB, past %d MiB", peak>>20, rssBound>>20)
			}
		})
	}
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

// Two gateways on Cassandra whose catalogs may lag by --feature-refresh: a
// feature is made live through A while B, which already knows it as not
// live, adds to it without recording. A subscription is refused, CONFLICT
// with the seconds to wait, until --feature-staleness and the clock skew
// allowance after the switch; then one on B and one on A get every item
// added through B after they started, and nothing added before.
func TestMadeLiveAcrossTwoGateways(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_FEATURE_STALENESS=6s", "LISTGATE_FEATURE_REFRESH=2s"}
	a := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...)
	b := startGateway(t, env...)
	entityType := fmt.Sprintf("made%d", time.Now().UnixNano()%1e9)
	requestAs(t, a.base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 3600}) { live } }`, entityType), nil)
	addItems(t, b.base, "", entityType, "u1", "f", [2]string{"before", ""}) // B knows it, not live
	requestAs(t, a.base, "", fmt.Sprintf(`mutation { setListFeatureLive(entityType: %q, name: "f", live: true) { live } }`, entityType), nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vars := map[string]any{"t": entityType, "id": "u1", "f": "f"}
	conn, err := wsclient.Dial(ctx, a.base, "")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Subscribe(ctx, "early", listItemsAdded, vars); err != nil {
		t.Fatal(err)
	}
	m, err := conn.Read(ctx)
	refused := time.Now()
	if err != nil || !strings.Contains(string(m.Payload), "CONFLICT") || !strings.Contains(string(m.Payload), "subscribe in ") {
		t.Fatalf("a subscription just after the switch: %s %s, %v; want CONFLICT and the seconds to wait", m.Type, m.Payload, err)
	}
	var wait int
	if _, err := fmt.Sscanf(string(m.Payload)[strings.Index(string(m.Payload), "subscribe in ")+len("subscribe in "):], "%d", &wait); err != nil || wait < 1 || wait > 11 {
		t.Fatalf("the wait in %s: %d, %v; want 1 to 11 s (--feature-staleness 6 s and 5 s of skew)", m.Payload, wait, err)
	}
	// B adds without recording for as long as its snapshot predates the
	// switch: what the wait covers.
	for deadline := refused.Add(time.Duration(wait) * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		addItems(t, b.base, "", entityType, "u1", "f", [2]string{"meanwhile", ""})
	}
	subs := map[string]map[string]any{"s": vars}
	onB := subscribeMany(t, ctx, b.base, 1, func(int) map[string]map[string]any { return subs })
	onA := subscribeMany(t, ctx, a.base, 1, func(int) map[string]map[string]any { return subs })
	want := []string{"after 1", "after 2", "after 3"}
	for _, v := range want {
		addItems(t, b.base, "", entityType, "u1", "f", [2]string{v, ""})
	}
	for _, l := range []*live{onB, onA} {
		l.await(t, len(want), 30*time.Second)
		l.mu.Lock()
		var got []string
		for _, it := range l.items["0/s"] {
			got = append(got, it.value)
		}
		l.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("received %q, want %q", got, want)
		}
	}
}
