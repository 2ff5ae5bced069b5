package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/listgate/listgate/internal/wsclient"
)

// liveResult is one live-lists scenario: subscriptions over WebSockets to
// gateway processes, with the items added, what they received, and what
// the subscribers' gateway spent.
type liveResult struct {
	Scenario        string  `json:"scenario"`
	Store           string  `json:"store"`
	Subscriptions   int     `json:"subscriptions"`
	Lists           int     `json:"lists"`
	Items           int     `json:"items_added"`
	Deliveries      int     `json:"deliveries"`
	Wrong           int     `json:"subscriptions_missing_or_repeating_items"`
	Ended           float64 `json:"subscriptions_ended"`
	Seconds         float64 `json:"measured_seconds"`
	CPUCores        float64 `json:"gateway_cpu_cores"`
	RSSMiB          float64 `json:"gateway_rss_mib"`
	FeedReadsPerSec float64 `json:"change_feed_reads_per_sec"`
	ListReads       float64 `json:"list_reads"`
	Failed          string  `json:"failed,omitempty"` // why the scenario could not be measured
	P50Ms           float64 `json:"latency_p50_ms,omitempty"`
	P99Ms           float64 `json:"latency_p99_ms,omitempty"`
	MaxMs           float64 `json:"latency_max_ms,omitempty"`
}

const liveQuery = `subscription($t: String!, $id: ID!, $f: String!) { listItemsAdded(entityType: $t, entityId: $id, feature: $f) { value } }`

// liveLists runs the live-lists scenarios: idle watched lists on each
// store, a steady flow between two gateways, and a burst.
func liveLists(ctx context.Context, c config, bin, keyspace string) ([]liveResult, error) {
	dir, err := os.MkdirTemp("", "listgate-bench-live")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cqlArgs := []string{"--cql-hosts", c.cqlHosts, "--cql-keyspace", keyspace}
	start := func(store string, args ...string) (*server, error) {
		if store == "embedded" {
			args = append(args, "--data-dir", filepath.Join(dir, fmt.Sprint(time.Now().UnixNano())))
		} else {
			args = append(args, cqlArgs...)
		}
		return startGateway(bin, c.concurrency, args...)
	}
	var out []liveResult
	for _, store := range []string{"embedded", "CQL"} {
		r, err := idleLists(ctx, c, store, start)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	r, err := liveFlow(ctx, c, start)
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	for _, store := range []string{"embedded", "CQL"} {
		r, err := liveBurst(ctx, store, start)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// receiver records what subscriptions received.
type receiver struct {
	mu    sync.Mutex
	got   map[string][]string // by "connection/subscription"
	at    map[string]time.Time
	count int
	other []string
}

// subscribe opens conns WebSockets to g, each with the subscriptions
// subs(conn) gives (id → entity id), and waits until g counts them all.
func (r *receiver) subscribe(ctx context.Context, g *server, conns int, entityType string, subs func(conn int) map[string]string) ([]*wsclient.Conn, error) {
	if r.got == nil {
		r.got, r.at = map[string][]string{}, map[string]time.Time{}
	}
	var open []*wsclient.Conn
	total := 0
	for c := range conns {
		conn, err := wsclient.Dial(ctx, g.base, "")
		if err != nil {
			return open, err
		}
		open = append(open, conn)
		for id, entity := range subs(c) {
			if err := conn.Subscribe(ctx, id, liveQuery, map[string]any{"t": entityType, "id": entity, "f": "live"}); err != nil {
				return open, err
			}
			total++
		}
		go func() {
			for {
				m, err := conn.Read(ctx)
				if err != nil {
					return
				}
				now := time.Now()
				var it wsclient.Item
				json.Unmarshal(m.Payload, &it)
				r.mu.Lock()
				if m.Type == "next" && len(it.Errors) == 0 {
					v := it.Data.ListItemsAdded.Value
					key := fmt.Sprint(c, "/", m.ID)
					r.got[key] = append(r.got[key], v)
					r.at[key+" "+v] = now
					r.count++
				} else {
					r.other = append(r.other, fmt.Sprintf("%s %s %s", m.Type, m.ID, m.Payload))
				}
				r.mu.Unlock()
			}
		}()
	}
	return open, waitFor(ctx, time.Minute, func() (bool, error) {
		n, err := g.metric("listgate_subscriptions_active", "")
		return int(n) == total, err
	})
}

// waitFor polls ok until it holds, fails, or within passes.
func waitFor(ctx context.Context, within time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		done, err := ok()
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %v", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *receiver) received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// createLive creates the feature "live" of a new entity type.
func createLive(ctx context.Context, g *server) (string, error) {
	entityType := fmt.Sprintf("live%d", time.Now().UnixNano()%1e9)
	_, err := g.post(ctx, gql(fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "live", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, entityType), nil))
	return entityType, err
}

func gql(query string, vars map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return b
}

// addLive adds values to a list of the feature "live" in one request.
func addLive(ctx context.Context, g *server, entityType, entity string, values []string) error {
	items := make([]map[string]any, len(values))
	for i, v := range values {
		items[i] = map[string]any{"value": v}
	}
	_, err := g.post(ctx, gql(`mutation($list: ListRefInput!, $items: [ListItemInput!]!) { addListItems(list: $list, items: $items) { added } }`,
		map[string]any{"list": map[string]any{"entityType": entityType, "entityId": entity, "feature": "live"}, "items": items}))
	return err
}

// reads counts a gateway's CQL statements on a table.
func reads(g *server, table string) float64 {
	n, _ := g.metric("listgate_cql_statement_duration_seconds_count", `db_operation_name="SELECT `+table+`"`)
	return n
}

// idleLists: 20,000 watched lists nobody adds to, 200 WebSockets × 100
// subscriptions on one gateway, measured for 10 s once they are all open.
func idleLists(ctx context.Context, c config, store string, start func(string, ...string) (*server, error)) (liveResult, error) {
	const conns, perConn, measure = 200, 100, 10 * time.Second
	res := liveResult{Scenario: "idle watched lists", Store: store, Subscriptions: conns * perConn, Lists: conns * perConn}
	fmt.Fprintf(os.Stderr, "live lists: %d idle watched lists (%s)\n", res.Lists, store)
	// One caller holds them all, and the whole of what they keep of their
	// operations.
	g, err := start(store, "--max-watched-lists", "20000", "--max-subscriptions-per-caller", "20000", "--caller-subscription-operation-bytes-share", "1")
	if err != nil {
		return res, err
	}
	defer g.stop()
	entityType, err := createLive(ctx, g)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var r receiver
	open, err := r.subscribe(ctx, g, conns, entityType, func(c int) map[string]string {
		subs := map[string]string{}
		for j := range perConn {
			subs[fmt.Sprint(j)] = fmt.Sprint("e", c*perConn+j)
		}
		return subs
	})
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	if err != nil {
		active, _ := g.metric("listgate_subscriptions_active", "")
		res.Failed = fmt.Sprintf("%.0f of %d subscriptions open after a minute", active, res.Subscriptions)
		res.RSSMiB = float64(rssOf(g.cmd.Process.Pid)) / (1 << 20)
		res.log()
		return res, nil
	}
	pid := g.cmd.Process.Pid
	feed0, list0, cpu0, t0 := reads(g, "list_changes"), reads(g, "list_items"), processCPU(pid), time.Now()
	<-time.After(measure)
	wall := time.Since(t0).Seconds()
	res.Seconds = wall
	res.CPUCores = (processCPU(pid) - cpu0).Seconds() / wall
	res.FeedReadsPerSec = (reads(g, "list_changes") - feed0) / wall
	res.ListReads = reads(g, "list_items") - list0
	res.RSSMiB = float64(rssOf(pid)) / (1 << 20)
	res.log()
	return res, nil
}

// liveFlow: two gateways on Cassandra; 2,000 subscriptions on B over 200
// lists (20 WebSockets × 100, ten per list) while adds of ten items come
// through A at 1,000 items/s for 10 s. Latency is from an add's
// acknowledgement to each receipt.
func liveFlow(ctx context.Context, c config, start func(string, ...string) (*server, error)) (liveResult, error) {
	const (
		lists, conns, perConn = 200, 20, 100
		addsPerSecond, perAdd = 100, 10
		run                   = 10 * time.Second
	)
	res := liveResult{Scenario: "1,000 items/s through A, to subscriptions on B", Store: "CQL", Subscriptions: conns * perConn, Lists: lists}
	fmt.Fprintf(os.Stderr, "live lists: %s\n", res.Scenario)
	a, err := start("CQL")
	if err != nil {
		return res, err
	}
	defer a.stop()
	b, err := start("CQL", "--max-subscriptions-per-caller", "2000")
	if err != nil {
		return res, err
	}
	defer b.stop()
	entityType, err := createLive(ctx, a)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var r receiver
	open, err := r.subscribe(ctx, b, conns, entityType, func(c int) map[string]string {
		subs := map[string]string{}
		for j := range perConn {
			list := (c%(lists/perConn))*perConn + j
			subs[fmt.Sprint("e", list)] = fmt.Sprint("e", list)
		}
		return subs
	})
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	if err != nil {
		return res, err
	}
	pid := b.cmd.Process.Pid
	feed0, list0, cpu0, t0 := reads(b, "list_changes"), reads(b, "list_items"), processCPU(pid), time.Now()
	n := int(run.Seconds()) * addsPerSecond
	acked := make([]time.Time, n)
	var wg sync.WaitGroup
	var failed sync.Map
	slots := make(chan struct{}, 8)
	tick := time.NewTicker(time.Second / addsPerSecond)
	for i := range n {
		<-tick.C
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			values := make([]string, perAdd)
			for k := range values {
				values[k] = fmt.Sprintf("v%d-%d", i, k)
			}
			if err := addLive(ctx, a, entityType, fmt.Sprint("e", i%lists), values); err != nil {
				failed.Store(i, err)
			}
			acked[i] = time.Now()
		})
	}
	tick.Stop()
	wg.Wait()
	failed.Range(func(k, v any) bool { err = fmt.Errorf("add %v: %v", k, v); return false })
	if err != nil {
		return res, err
	}
	want := n * perAdd * conns / (lists / perConn)
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) { return r.received() >= want, nil }); err != nil {
		fmt.Fprintf(os.Stderr, "  %d of %d deliveries: %v\n", r.received(), want, err) // reported as wrong
	}
	wall := time.Since(t0).Seconds()
	res.Items, res.Seconds = n*perAdd, wall
	res.CPUCores = (processCPU(pid) - cpu0).Seconds() / wall
	res.FeedReadsPerSec = (reads(b, "list_changes") - feed0) / wall
	res.ListReads = reads(b, "list_items") - list0
	res.RSSMiB = float64(rssOf(pid)) / (1 << 20)
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Deliveries = r.count
	var latency []time.Duration
	for key, values := range r.got {
		list := 0
		fmt.Sscanf(key[strings.IndexByte(key, '/')+1:], "e%d", &list)
		seen := map[string]bool{}
		for _, v := range values {
			seen[v] = true
			i := 0
			fmt.Sscanf(v, "v%d-", &i)
			latency = append(latency, r.at[key+" "+v].Sub(acked[i]))
		}
		if len(seen) != len(values) || len(values) != n/lists*perAdd {
			res.Wrong++
		}
	}
	res.P50Ms, res.P99Ms, res.MaxMs = quantilesMs(latency)
	res.log()
	return res, nil
}

// liveBurst: ten subscriptions on one list, each on a WebSocket of its
// own and reading as fast as it can, get ten adds of 1,000 items made one
// after another; measured from the first add to the last receipt.
func liveBurst(ctx context.Context, store string, start func(string, ...string) (*server, error)) (liveResult, error) {
	const subs, adds, perAdd = 10, 10, 1000
	res := liveResult{Scenario: "a burst of 10 × 1,000 items to one list", Store: store, Subscriptions: subs, Lists: 1, Items: adds * perAdd}
	fmt.Fprintf(os.Stderr, "live lists: %s (%s)\n", res.Scenario, store)
	g, err := start(store)
	if err != nil {
		return res, err
	}
	defer g.stop()
	entityType, err := createLive(ctx, g)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var r receiver
	open, err := r.subscribe(ctx, g, subs, entityType, func(int) map[string]string { return map[string]string{"s": "burst"} })
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	if err != nil {
		return res, err
	}
	pid := g.cmd.Process.Pid
	cpu0, t0 := processCPU(pid), time.Now()
	for i := range adds {
		values := make([]string, perAdd)
		for k := range values {
			values[k] = fmt.Sprintf("v%d-%d", i, k)
		}
		if err := addLive(ctx, g, entityType, "burst", values); err != nil {
			return res, err
		}
	}
	if err := waitFor(ctx, 30*time.Second, func() (bool, error) { return r.received() >= subs*adds*perAdd, nil }); err != nil {
		fmt.Fprintf(os.Stderr, "  %d of %d deliveries: %v\n", r.received(), subs*adds*perAdd, err) // reported as wrong
	}
	res.Seconds = time.Since(t0).Seconds()
	res.CPUCores = (processCPU(pid) - cpu0).Seconds() / res.Seconds
	res.RSSMiB = float64(rssOf(pid)) / (1 << 20)
	res.Ended, _ = g.metric("listgate_subscriptions_ended_total", "")
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Deliveries = r.count
	for _, values := range r.got {
		if len(values) != adds*perAdd || len(r.other) > 0 {
			res.Wrong++
		}
	}
	res.log()
	return res, nil
}

func quantilesMs(d []time.Duration) (p50, p99, maxMs float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	q := func(p float64) float64 { return ms(d[min(len(d)-1, int(p*float64(len(d))))]) }
	return q(0.5), q(0.99), q(1)
}

// rssOf is a process's resident memory, in bytes.
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

func (r liveResult) log() {
	if r.Failed != "" {
		fmt.Fprintf(os.Stderr, "  %s (%s): %s\n", r.Scenario, r.Store, r.Failed)
		return
	}
	fmt.Fprintf(os.Stderr, "  %s (%s): %d subscriptions, %d deliveries, %d wrong, %.0f ended; %.3f cores, %.0f MiB, %.1f feed reads/s, %.0f list reads; latency p50 %.0f, p99 %.0f, max %.0f ms\n",
		r.Scenario, r.Store, r.Subscriptions, r.Deliveries, r.Wrong, r.Ended, r.CPUCores, r.RSSMiB, r.FeedReadsPerSec, r.ListReads, r.P50Ms, r.P99Ms, r.MaxMs)
}
