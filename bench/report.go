package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// comparison is one scenario measured on the baseline and through the
// gateway, with the medians of the runs.
type comparison struct {
	Name            string    `json:"name"`
	Database        string    `json:"database"`
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

func newComparison(name, db string, bases, gws []result) comparison {
	b, g := median(bases), median(gws)
	c := comparison{
		Name: name, Database: db,
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
	Machine     string         `json:"machine"`
	Date        string         `json:"date"`
	Command     string         `json:"command"`
	Concurrency int            `json:"concurrency"`
	Duration    string         `json:"duration_per_run"`
	Runs        int            `json:"runs"`
	Took        string         `json:"took"`
	Comparisons []comparison   `json:"comparisons"`
	FanOut      []fanOutResult `json:"fan_out"`
	Removes     []removeResult `json:"remove_by_value"`
}

func (r *report) add(c comparison) {
	r.Comparisons = append(r.Comparisons, c)
	fmt.Fprintf(os.Stderr, "  %s (%s): %.0f vs %.0f items/s, ratio %.2f, errors %d\n", c.Name, c.Database, c.GWItemsPerSec, c.BaseItemsPerSec, c.Ratio, c.Errors)
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
	fmt.Fprintf(&b, "Every figure is the median of %d runs of %s each, baseline and gateway alternating; throughput runs keep %d requests in flight, on loopback, with the load generator, the gateway and the database sharing the machine's cores. The baseline is the same single-partition statement issued directly with gocql (CQL), or the embedded store's own call; the gateway is the GraphQL endpoint of a separate `listgate` process. Reads ask for 100 items (`items { value timestamp cursor }`) of a list drawn Zipf-like (s = 1.1); adds write to 1,000 lists drawn the same way.\n\n", r.Runs, r.Duration, r.Concurrency)
	b.WriteString("On one machine the load generator, the gateway and the database share the cores, so every microsecond of CPU the gateway and its HTTP client spend is taken from the database: the last two columns show where each request's CPU goes (from /proc, per process). The database's CPU per request also grows as its request rate falls (fewer requests share each wake-up), so a slower client costs it more per request. Gateway and database on their own hosts, as in production, are what these ratios understate.\n\n")
	b.WriteString("| scenario | store | baseline items/s | gateway items/s | gateway / baseline (runs) | baseline p50 / p99 / p99.9 ms | gateway p50 / p99 / p99.9 ms | CPU µs/request, baseline: client + db | CPU µs/request, gateway: client + gateway + db |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Comparisons {
		var runs []string
		for _, x := range c.RunRatios {
			runs = append(runs, fmt.Sprintf("%.2f", x))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | **%.2f** (%s) | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.0f + %.0f | %.0f + %.0f + %.0f |\n",
			c.Name, c.Database, c.BaseItemsPerSec, c.GWItemsPerSec, c.Ratio, strings.Join(runs, ", "),
			c.BaseP50Ms, c.BaseP99Ms, c.BaseP999Ms, c.GWP50Ms, c.GWP99Ms, c.GWP999Ms,
			c.BaseCPU[0], c.BaseCPU[2], c.GWCPU[0], c.GWCPU[1], c.GWCPU[2])
	}
	b.WriteString("\n## One request for many entities' lists\n\nOne `entities(…) { list(limit: 10) }` request against the same lists read by as many `listItems` requests sent at once; one request at a time, CQL store.\n\n")
	b.WriteString("| entities | one request p50 / p99 ms | separate requests p50 / p99 ms | CQL statements per request | p50 / 1-entity p50 | CPU ms per one request: gateway + database |\n|---|---|---|---|---|---|\n")
	for _, f := range r.FanOut {
		fmt.Fprintf(&b, "| %d | %.2f / %.2f | %.2f / %.2f | %.0f | %.2f | %.2f + %.2f |\n", f.Entities, f.OneRequestP50Ms, f.OneRequestP99Ms, f.SeparateP50Ms, f.SeparateP99Ms, f.StatementsPerReq, f.RatioTo1EntityP50, f.GatewayCPUMs, f.DatabaseCPUMs)
	}
	b.WriteString("\n## Remove List Items with Value\n\nOne call at a time through the store, removing a value held at three timestamps.\n\n| strategy | list size | p50 ms | p99 ms |\n|---|---|---|---|\n")
	for _, x := range r.Removes {
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f |\n", x.Strategy, x.ListSize, x.P50Ms, x.P99Ms)
	}
	fmt.Fprintf(&b, "\nRaw figures: [bench/results.json](bench/results.json).\n")
	return os.WriteFile(mdPath, []byte(b.String()), 0o644)
}
