package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/listgate/listgate/store"
)

// comparison is one scenario measured on the baseline and through the
// gateway (or two ways of doing one thing through the gateway: "baseline"
// is the first), with the medians of the runs.
type comparison struct {
	Name            string    `json:"name"`
	Database        string    `json:"database"`
	InFlight        int       `json:"requests_in_flight"`
	BaseItemsPerSec float64   `json:"baseline_items_per_sec"`
	GWItemsPerSec   float64   `json:"gateway_items_per_sec"`
	BaseReqPerSec   float64   `json:"baseline_requests_per_sec"`
	GWReqPerSec     float64   `json:"gateway_requests_per_sec"`
	Ratio           float64   `json:"gateway_to_baseline_items_ratio"`
	RunRatios       []float64 `json:"run_ratios"`
	BaseP50Ms       float64   `json:"baseline_p50_ms"`
	BaseP99Ms       float64   `json:"baseline_p99_ms"`
	BaseP999Ms      float64   `json:"baseline_p999_ms"`
	GWP50Ms         float64   `json:"gateway_p50_ms"`
	GWP99Ms         float64   `json:"gateway_p99_ms"`
	GWP999Ms        float64   `json:"gateway_p999_ms"`
	GWCPUPerReqUs   float64   `json:"gateway_cpu_us_per_request"`
	// CPU per request, in µs, of the load generator (the gocql or HTTP
	// client), the gateway and the database, on each side.
	BaseCPU [3]float64 `json:"baseline_cpu_us_per_request_client_gateway_database"`
	GWCPU   [3]float64 `json:"gateway_cpu_us_per_request_client_gateway_database"`
	Errors  int        `json:"errors"`
}

func newComparison(name, db string, inFlight int, bases, gws []result) comparison {
	b, g := median(bases), median(gws)
	c := comparison{
		Name: name, Database: db, InFlight: inFlight,
		BaseItemsPerSec: b.itemsPerSec(), GWItemsPerSec: g.itemsPerSec(),
		BaseReqPerSec: b.opsPerSec(), GWReqPerSec: g.opsPerSec(),
		BaseP50Ms: ms(b.percentile(0.5)), BaseP99Ms: ms(b.percentile(0.99)), BaseP999Ms: ms(b.percentile(0.999)),
		GWP50Ms: ms(g.percentile(0.5)), GWP99Ms: ms(g.percentile(0.99)), GWP999Ms: ms(g.percentile(0.999)),
	}
	if b.itemsPerSec() > 0 {
		c.Ratio = g.itemsPerSec() / b.itemsPerSec()
	}
	for i := range bases {
		if bases[i].itemsPerSec() > 0 {
			c.RunRatios = append(c.RunRatios, gws[i].itemsPerSec()/bases[i].itemsPerSec())
		}
		c.Errors += bases[i].errors + gws[i].errors
	}
	c.BaseCPU[0], c.BaseCPU[1], c.BaseCPU[2] = b.perOp()
	c.GWCPU[0], c.GWCPU[1], c.GWCPU[2] = g.perOp()
	c.GWCPUPerReqUs = c.GWCPU[1]
	return c
}

type report struct {
	Machine     string `json:"machine"`
	Date        string `json:"date"`
	Command     string `json:"command"`
	Concurrency int    `json:"concurrency"`
	Duration    string `json:"duration_per_run"`
	Runs        int    `json:"runs"`
	Took        string `json:"took"`
	// The peer table: each server by page size and requests in flight.
	PeerDuration string       `json:"peer_duration_per_run,omitempty"`
	Peers        []peerResult `json:"peers,omitempty"`
	PeerFanOut   *peerFanOut  `json:"peer_fan_out,omitempty"`
	Comparisons  []comparison `json:"comparisons"`
	// Two ways of doing one thing, both through the gateway.
	Alternatives []comparison     `json:"through_gateway"`
	FanOut       []fanOutResult   `json:"fan_out"`
	Removes      []removeResult   `json:"remove_by_value"`
	Live         []liveResult     `json:"live_lists,omitempty"`
	Tenants      []tenantResult   `json:"two_callers,omitempty"`
	SlowNode     []slowNodeResult `json:"slow_node,omitempty"`
}

// add records a comparison of the gateway with its baseline.
func (r *report) add(c comparison) {
	r.Comparisons = append(r.Comparisons, c)
	c.log()
}

// addAlternative records a comparison of two ways through the gateway.
func (r *report) addAlternative(c comparison) {
	r.Alternatives = append(r.Alternatives, c)
	c.log()
}

func (c comparison) log() {
	fmt.Fprintf(os.Stderr, "  %s (%s): %.0f vs %.0f items/s, ratio %.2f, gateway CPU %.0f vs %.0f µs/request, errors %d\n",
		c.Name, c.Database, c.GWItemsPerSec, c.BaseItemsPerSec, c.Ratio, c.GWCPU[1], c.BaseCPU[1], c.Errors)
}

// runRatios are the ratios of each run, as the report writes them.
func (c comparison) runRatios() string {
	var runs []string
	for _, x := range c.RunRatios {
		runs = append(runs, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(runs, ", ")
}

// grouped writes n with commas between groups of three digits, as the
// report's prose does.
func grouped(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// perItem is the CPU per item of a side of c, given its CPU per request.
func perItem(cpuPerRequest, itemsPerSec, requestsPerSec float64) float64 {
	if itemsPerSec == 0 {
		return 0
	}
	return cpuPerRequest * requestsPerSec / itemsPerSec
}

func (r *report) write(mdPath, jsonPath string) error {
	for i := range r.FanOut {
		r.FanOut[i].RatioTo1EntityP50 = r.FanOut[i].OneRequestP50Ms / r.FanOut[0].OneRequestP50Ms
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(js, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nThe latest full run of `%s` (bench/, about %s). Machine: %s. Run on %s.\n\n", r.Command, r.Took, r.Machine, r.Date[:10])
	r.writePeers(&b)
	b.WriteString("## The gateway against its store\n\n")
	fmt.Fprintf(&b, "Every figure is the median of %d runs of %s each, baseline and gateway alternating; throughput runs keep %d requests in flight, on loopback, with the load generator, the gateway and the database sharing the machine's cores. The baseline is the same single-partition statement issued directly with gocql (CQL), or the embedded store's own call; the gateway is the GraphQL endpoint of a separate `listgate` process. Reads (of the embedded store; of CQL, see the peer table above) ask for 100 items (`items { value timestamp cursor }`) of a list drawn Zipf-like (s = 1.1); adds write to 1,000 lists drawn the same way. `listContains` asks for 1,000 values, half of them in the list (on 10-item lists its 10 and 990 others), so that the whole list is read, and `listCount` counts a whole list: both read the list's keys only, their baseline is that key-only query (`SELECT item_key`, paged by 5,000 rows) issued with gocql, and their items are the keys read.\n\n", r.Runs, r.Duration, r.Concurrency)
	b.WriteString("On one machine the load generator, the gateway and the database share the cores, so every microsecond of CPU the gateway and its HTTP client spend is taken from the database: the last two columns show where each request's CPU goes (from /proc, per process). The database's CPU per request also grows as its request rate falls (fewer requests share each wake-up), so a slower client costs it more per request. Gateway and database on their own hosts, as in production, are what these ratios understate.\n\n")
	b.WriteString("| scenario | store | baseline items/s | gateway items/s | gateway / baseline (runs) | baseline p50 / p99 / p99.9 ms | gateway p50 / p99 / p99.9 ms | CPU µs/request, baseline: client + db | CPU µs/request, gateway: client + gateway + db |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Comparisons {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | **%.2f** (%s) | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.0f + %.0f | %.0f + %.0f + %.0f |\n",
			c.Name, c.Database, c.BaseItemsPerSec, c.GWItemsPerSec, c.Ratio, c.runRatios(),
			c.BaseP50Ms, c.BaseP99Ms, c.BaseP999Ms, c.GWP50Ms, c.GWP99Ms, c.GWP999Ms,
			c.BaseCPU[0], c.BaseCPU[2], c.GWCPU[0], c.GWCPU[1], c.GWCPU[2])
	}
	b.WriteString("\n## Two ways through the gateway\n\nBoth sides are requests to the same gateway process on the CQL store, measured as above; the first named is the baseline. CPU per item is CPU per request ÷ items per request; the database's is its whole process's.\n\n")
	b.WriteString("- Distinct reads: every value of the seeded lists is distinct, so the distinct page and the plain one hold the same 100 items; the difference is what `distinct` costs.\n")
	fmt.Fprintf(&b, "- Adds with a cap: the lists of %d entities, of a feature with `maxItems: %d` and of one without, each seeded with %s items, drawn Zipf-like; an add of n items trims with probability n/%d, and then first reads the list's newest %s keys.\n",
		capped.lists, listCap, grouped(listCap), store.TrimSlack(listCap), grouped(listCap))
	b.WriteString("- Batch: one `addListItemsBatch` of 10 items to each of 100 distinct lists of the 1,000 write lists, against 100 `addListItems` of 10 items to the same lists sent at once; one request (or set of 100) at a time, as the fan-out below.\n\n")
	b.WriteString("| scenario | in flight | items/s: baseline / measured (ratio; runs) | p50 / p99 ms: baseline | p50 / p99 ms: measured | gateway CPU µs/request: baseline / measured | gateway CPU µs/item: baseline / measured (ratio) | database CPU µs/item: baseline / measured |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Alternatives {
		baseItem, gwItem := perItem(c.BaseCPU[1], c.BaseItemsPerSec, c.BaseReqPerSec), perItem(c.GWCPU[1], c.GWItemsPerSec, c.GWReqPerSec)
		ratio := 0.0
		if baseItem > 0 {
			ratio = gwItem / baseItem
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f / %.0f (%.2f; %s) | %.2f / %.2f | %.2f / %.2f | %.0f / %.0f | %.1f / %.1f (**%.2f**) | %.1f / %.1f |\n",
			c.Name, c.InFlight, c.BaseItemsPerSec, c.GWItemsPerSec, c.Ratio, c.runRatios(),
			c.BaseP50Ms, c.BaseP99Ms, c.GWP50Ms, c.GWP99Ms, c.BaseCPU[1], c.GWCPU[1], baseItem, gwItem, ratio,
			perItem(c.BaseCPU[2], c.BaseItemsPerSec, c.BaseReqPerSec), perItem(c.GWCPU[2], c.GWItemsPerSec, c.GWReqPerSec))
	}
	b.WriteString("\n## One request for many entities' lists\n\nOne `entities(…) { list(limit: 10) }` request against the same lists read by as many `listItems` requests sent at once; one request at a time, CQL store.\n\n")
	b.WriteString("| entities | one request p50 / p99 ms | separate requests p50 / p99 ms | CQL statements per request | p50 / 1-entity p50 | CPU ms per one request: gateway + database |\n|---|---|---|---|---|---|\n")
	for _, f := range r.FanOut {
		fmt.Fprintf(&b, "| %d | %.2f / %.2f | %.2f / %.2f | %.0f | %.2f | %.2f + %.2f |\n", f.Entities, f.OneRequestP50Ms, f.OneRequestP99Ms, f.SeparateP50Ms, f.SeparateP99Ms, f.StatementsPerReq, f.RatioTo1EntityP50, f.GatewayCPUMs, f.DatabaseCPUMs)
	}
	b.WriteString("\n## Remove List Items with Value\n\nOne call at a time through the store (one key-only read of the list, then the deletes), removing a value held at three timestamps.\n\n| list size | p50 ms | p99 ms |\n|---|---|---|\n")
	for _, x := range r.Removes {
		fmt.Fprintf(&b, "| %d | %.2f | %.2f |\n", x.ListSize, x.P50Ms, x.P99Ms)
	}
	if len(r.Live) > 0 {
		b.WriteString("\n## Live lists\n\nSubscriptions over WebSockets (`listItemsAdded`) to separate `listgate` processes with default settings; CPU, memory and reads are the subscribers' gateway's, from /proc and its /metrics. Idle: 20,000 watched lists (200 WebSockets × 100 subscriptions) nobody adds to, measured for 10 s once all are open. Flow: two gateways on Cassandra, adds of 10 items through A at 1,000 items/s for 10 s, 2,000 subscriptions on B over 200 lists; latency is from an add's acknowledgement to each receipt, and a subscription is wrong unless it got each item of its list once. Burst: ten adds of 1,000 items, one after another, to one list with ten subscriptions reading as fast as they can; its time is from the first add to the last receipt.\n\n")
		b.WriteString("| scenario | store | subscriptions / lists | items added / deliveries | wrong / ended | seconds | gateway CPU (cores) | gateway RSS MiB | change feed reads/s | list reads | latency p50 / p99 / max ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range r.Live {
			if x.Failed != "" {
				fmt.Fprintf(&b, "| %s | %s | %s / %s | not measured: %s | | | | | | | |\n", x.Scenario, x.Store, grouped(x.Subscriptions), grouped(x.Lists), x.Failed)
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s / %s | %s / %s | %d / %.0f | %.1f | %.3f | %.0f | %.1f | %.0f | %.0f / %.0f / %.0f |\n",
				x.Scenario, x.Store, grouped(x.Subscriptions), grouped(x.Lists), grouped(x.Items), grouped(x.Deliveries), x.Wrong, x.Ended,
				x.Seconds, x.CPUCores, x.RSSMiB, x.FeedReadsPerSec, x.ListReads, x.P50Ms, x.P99Ms, x.MaxMs)
		}
	}
	r.writeTenants(&b)
	r.writeSlowNode(&b)
	fmt.Fprintf(&b, "\nRaw figures: [bench/results.json](bench/results.json).\n")
	return os.WriteFile(mdPath, []byte(b.String()), 0o644)
}

func (r *report) writeTenants(b *strings.Builder) {
	if len(r.Tenants) == 0 {
		return
	}
	b.WriteString("\n## Two callers\n\nOne gateway with its default limits and two API keys. A runs the heaviest operation its budget allows, back to back: nine `listCount` fields over one list (90,000 points; one at a time, more than half of the in-flight complexity a caller may hold), waiting as `Retry-After` says when throttled. B reads one list of 10 items (`limit: 10`, `items { value }`), one request at a time, alone and beside A. CPU is per heavy operation answered, while A ran.\n\n")
	b.WriteString("| store | A's list | B p50 / p99 ms alone | B p50 / p99 ms beside A | p99 beside / alone | A served / throttled / failed, p50 ms | CPU ms per heavy: gateway + database |\n|---|---|---|---|---|---|---|\n")
	for _, x := range r.Tenants {
		if x.Failed != "" {
			fmt.Fprintf(b, "| %s | %s × %d B | not measured: %s | | | | |\n", x.Store, grouped(x.Items), x.ValueBytes, x.Failed)
			continue
		}
		fmt.Fprintf(b, "| %s | %s × %d B | %.2f / %.2f | %.2f / %.2f | **%.1f** | %d / %d / %d, %.0f | %.0f + %.0f |\n",
			x.Store, grouped(x.Items), x.ValueBytes, x.AloneP50Ms, x.AloneP99Ms, x.BesideP50Ms, x.BesideP99Ms, x.P99Ratio,
			x.HeavyServed, x.HeavyThrottled, x.HeavyFailed, x.HeavyMs, x.GatewayCPUMs, x.DatabaseCPUMs)
	}
}

func (r *report) writeSlowNode(b *strings.Builder) {
	if len(r.SlowNode) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## A slow node\n\nThree Cassandra nodes of the benchmark's own (RF 3, `LOCAL_QUORUM`), one gateway with its defaults but `--cql-speculative-reads`, `listItems` of 10 items (`items { value }`) of %d lists drawn at random, one request at a time, for %.0f s per row after 3 s of warm-up, with the third node healthy, frozen (SIGSTOP) 4 s out of every 6, or behind a proxy that holds what the gateway sends it for 200 ms. Sent twice: the reads the gateway sent to a second node (`listgate_cql_speculative_executions_total`), and their share of the reads.\n\n", slowNodeLists, r.SlowNode[0].Seconds)
	b.WriteString("| third node | speculative reads | reads | p50 / p99 / max ms | sent twice (share) | delay ms | errors |\n|---|---|---|---|---|---|---|\n")
	for _, x := range r.SlowNode {
		fmt.Fprintf(b, "| %s | %s | %s | %.1f / %.1f / %.0f | %.0f (%.1f %%) | %.1f | %d |\n", x.Scenario, onOff(x.Speculative), grouped(x.Reads),
			x.P50Ms, x.P99Ms, x.MaxMs, x.Sent, 100*x.ExtraRatio, x.DelayMs, x.Errors)
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
