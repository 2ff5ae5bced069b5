package main

import (
	"fmt"
	"strings"
)

// peer is the result of a server by page size and requests in flight; the
// zero result when it was not measured.
func (r *report) peer(server string, page, inFlight int) peerResult {
	for _, p := range r.Peers {
		if p.Server == server && p.PageSize == page && p.InFlight == inFlight {
			return p
		}
	}
	return peerResult{}
}

// ratio is the median of a ÷ b over the rounds, where a and b were
// measured back to back, and its text with each round's:
// "**1.05** (1.02, 1.07, 1.05)".
func ratio(a, b []float64) (float64, string) {
	var rs []float64
	var runs []string
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
			runs = append(runs, fmt.Sprintf("%.2f", a[i]/b[i]))
		}
	}
	if len(rs) == 0 {
		return 0, "–"
	}
	return medianOf(rs), fmt.Sprintf("**%.2f** (%s)", medianOf(rs), strings.Join(runs, ", "))
}

// writePeers writes the peer table, its ratios, the targets and the
// fan-out comparison.
func (r *report) writePeers(b *strings.Builder) {
	if len(r.Peers) == 0 {
		return
	}
	if r.peer(gwPeer, peerPages[0], 1).Server == "" {
		r.writePeerAdds(b) // --only peeradds
		return
	}
	busy := r.Concurrency
	b.WriteString("## GraphQL against REST and stock gqlgen\n\n")
	b.WriteString("What does the gateway's GraphQL cost against the REST service a team would otherwise write by hand, and against a plain gqlgen server? Four servers read the same pages of the 1,000-item lists, drawn Zipf-like, newest first: each item's value, timestamp and cursor, and whether more follow with the next page's cursor (`items { value timestamp cursor } hasMore endCursor` in GraphQL). Before measuring, the benchmark checks that the REST peer, the gateway and stock gqlgen answer a page with the same JSON.\n\n")
	b.WriteString("- **gocql (floor)**: the CQL store's read statement issued with gocql in the benchmark's own process, no HTTP and no JSON: the least any server must spend. Its server CPU is that process's.\n")
	b.WriteString("- **REST**: [bench/restpeer](bench/restpeer/main.go), a small service as a team would hand-write it with `net/http`, gocql and `encoding/json`: `GET /lists/{entityType}/{entityId}/{feature}?limit=&after=` answers `{\"items\":[{\"value\",\"timestamp\",\"cursor\"}],\"hasMore\",\"endCursor\"}`. It runs the CQL store's statement over a gocql session set up as the store's (LOCAL_QUORUM, token-aware routing, the same timeouts, connections per host and retries), and turns the stored value into JSON by the feature's value type; it has no authentication, metrics, limits or caps.\n")
	b.WriteString("- **gateway**: listgate, as everywhere in this report: the GraphQL `listItems` query, in dev mode without authentication, with its metrics, request ids, query limits and dataloader.\n")
	b.WriteString("- **stock gqlgen**: the same gateway built with `-tags stockgqlgen`, so that gqlgen's own generated marshalers write every response instead of the gateway's fast path; same flags, same everything else.\n\n")
	fmt.Fprintf(b, "Server CPU per request is the server process's user and system CPU (from /proc) over a run, divided by its requests: neither the database's nor the load generator's. Each figure is the median of %d runs of %s, the four servers taking turns to go first; at 1 in flight the requests go one after another (the latency one client sees), at %d in flight they queue (throughput, with the database and the load generator on the same 2 cores). At 1 in flight a server also spends CPU waking up for each request, so its CPU per request is higher there.\n\n", r.Runs, r.PeerDuration, busy)
	fmt.Fprintf(b, "| items per page | server | server CPU µs/request: 1 / %d in flight | requests/s: 1 / %d in flight | items/s: 1 / %d in flight | p50 / p99 ms, 1 in flight | p50 / p99 ms, %d in flight | errors |\n|---|---|---|---|---|---|---|---|\n", busy, busy, busy, busy)
	for _, page := range peerPages {
		for _, server := range peerServers {
			one, many := r.peer(server, page, 1), r.peer(server, page, busy)
			fmt.Fprintf(b, "| %d | %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2f / %.2f | %.2f / %.2f | %d |\n",
				page, server, one.ServerCPUUs, many.ServerCPUUs, one.ReqPerSec, many.ReqPerSec, one.ItemsPerSec, many.ItemsPerSec,
				one.P50Ms, one.P99Ms, many.P50Ms, many.P99Ms, one.Errors+many.Errors)
		}
	}
	fmt.Fprintf(b, "\nEach ratio is the gateway's figure divided by the peer's in each round, where the two were measured back to back: the median of the rounds, and each round's in brackets, whose spread is the noise (other work on the machine included). Below 1 the gateway spends less than the peer, above 1 more: CPU gateway ÷ REST 1.20 means the gateway spends 20%% more CPU per request than the hand-written REST service; gateway ÷ stock gqlgen 0.25 means four times less than gqlgen as it comes.\n\n")
	fmt.Fprintf(b, "| items per page | server CPU/request, gateway ÷ REST, %d in flight (runs) | the same, 1 in flight (runs) | server CPU/request, gateway ÷ stock gqlgen, %d in flight (runs) | the same, 1 in flight (runs) | p99 at 1 in flight, gateway ÷ REST (runs) |\n|---|---|---|---|---|---|\n", busy, busy)
	type ratios struct{ cpuREST, cpuStock, p99REST float64 }
	at := map[int]ratios{}
	for _, page := range peerPages {
		gw, rest, stock := r.peer(gwPeer, page, busy), r.peer(restPeer, page, busy), r.peer(stockPeer, page, busy)
		gw1, rest1, stock1 := r.peer(gwPeer, page, 1), r.peer(restPeer, page, 1), r.peer(stockPeer, page, 1)
		cpuREST, cpuRESTText := ratio(gw.RunServerCPUUs, rest.RunServerCPUUs)
		cpuStock, cpuStockText := ratio(gw.RunServerCPUUs, stock.RunServerCPUUs)
		p99REST, p99RESTText := ratio(gw1.RunP99Ms, rest1.RunP99Ms)
		_, cpuREST1 := ratio(gw1.RunServerCPUUs, rest1.RunServerCPUUs)
		_, cpuStock1 := ratio(gw1.RunServerCPUUs, stock1.RunServerCPUUs)
		at[page] = ratios{cpuREST, cpuStock, p99REST}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s |\n", page, cpuRESTText, cpuREST1, cpuStockText, cpuStock1, p99RESTText)
	}
	f := r.PeerFanOut
	var fanOutCPU float64
	var cpuText string
	if f != nil {
		fmt.Fprintf(b, "\nFan-out: one `entities(…) { list(limit: 10) { items { value timestamp cursor } hasMore endCursor } }` request to the gateway for %d distinct 10-item lists, against %d requests for the same lists (`?limit=10`) sent to the REST peer at once; one request (or set of %d) at a time, the two taking turns, %d runs of %s. CPU is the server process's for the whole request or set.\n\n", f.Lists, f.Lists, f.Lists, r.Runs, r.PeerDuration)
		b.WriteString("| lists | gateway, one request: server CPU ms, p50 / p99 ms | REST, requests at once: server CPU ms, p50 / p99 ms | server CPU, gateway ÷ REST (runs) | database CPU ms: gateway / REST | errors |\n|---|---|---|---|---|---|\n")
		fanOutCPU, cpuText = ratio(f.RunGatewayCPUMs, f.RunRESTCPUMs)
		fmt.Fprintf(b, "| %d | %.2f, %.2f / %.2f | %.2f, %.2f / %.2f | %s | %.2f / %.2f | %d |\n", f.Lists, f.GatewayCPUMs, f.GatewayP50Ms, f.GatewayP99Ms,
			f.RESTCPUMs, f.RESTP50Ms, f.RESTP99Ms, cpuText, f.GatewayDBCPUMs, f.RESTDBCPUMs, f.Errors)
	}
	fmt.Fprintf(b, "\nThe maintainers' targets, from this run (CPU at %d in flight):\n\n| target | measured | met |\n|---|---|---|\n", busy)
	target := func(what string, measured, limit float64) {
		met := "no"
		if measured > 0 && measured <= limit {
			met = "yes"
		}
		fmt.Fprintf(b, "| %s | %.2f | %s |\n", what, measured, met)
	}
	target("gateway server CPU/request ≤ 1.00 × REST, 100 items", at[100].cpuREST, 1.00)
	target("gateway server CPU/request ≤ 1.25 × REST, 10 items", at[10].cpuREST, 1.25)
	target("gateway server CPU/request ≥ 4 × less than stock gqlgen (≤ 0.25 ×), 100 items", at[100].cpuStock, 0.25)
	target("gateway p99 at 1 in flight ≤ 1.10 × REST, 10 items", at[10].p99REST, 1.10)
	target("gateway p99 at 1 in flight ≤ 1.10 × REST, 100 items", at[100].p99REST, 1.10)
	if f != nil {
		target(fmt.Sprintf("one %d-list entities request ≤ 0.50 × the server CPU of %d REST requests", f.Lists, f.Lists), fanOutCPU, 0.50)
	}
	b.WriteString("\n")
	r.writePeerAdds(b)
}

// writePeerAdds writes the adds of the peer table, their ratios against
// the REST peer and the targets.
func (r *report) writePeerAdds(b *strings.Builder) {
	if r.peer(restAddPeer, peerAddSizes[0], 1).Server == "" {
		return
	}
	busy := r.Concurrency
	b.WriteString("### Adds\n\n")
	fmt.Fprintf(b, "The same servers adding 1 or 10 items of random values to the 1,000 write lists (empty when the run begins), drawn Zipf-like. **REST add**: the peer's `POST /lists/{entityType}/{entityId}/{feature}` with `{\"items\":[{\"value\"}]}`, one logged batch of INSERTs with each item's TTL into the list's partition. **gateway add**: `addListItems` to a feature that is not live (one batch, as the peer's) and to one that is (the batch and the change record written at once). Database CPU per request is the Cassandra process's user and system CPU (from /proc) over a run, divided by its requests. Medians of %d runs of %s, the three taking turns.\n\n", r.Runs, r.PeerDuration)
	fmt.Fprintf(b, "| items per add | server | server CPU µs/request: 1 / %d in flight | database CPU µs/request: 1 / %d in flight | requests/s: 1 / %d in flight | p50 / p99 ms, 1 in flight | p50 / p99 ms, %d in flight | errors |\n|---|---|---|---|---|---|---|---|\n", busy, busy, busy, busy)
	for _, n := range peerAddSizes {
		for _, server := range peerAddServers {
			one, many := r.peer(server, n, 1), r.peer(server, n, busy)
			fmt.Fprintf(b, "| %d | %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2f / %.2f | %.2f / %.2f | %d |\n",
				n, server, one.ServerCPUUs, many.ServerCPUUs, one.DatabaseCPUUs, many.DatabaseCPUUs, one.ReqPerSec, many.ReqPerSec,
				one.P50Ms, one.P99Ms, many.P50Ms, many.P99Ms, one.Errors+many.Errors)
		}
	}
	fmt.Fprintf(b, "\n| items per add | feature | server CPU, gateway ÷ REST, %d in flight (runs) | database CPU, gateway ÷ REST, %d in flight (runs) | p50 at 1 in flight, gateway ÷ REST (runs) |\n|---|---|---|---|---|\n", busy, busy)
	type limits struct{ cpu, db, p50 float64 }
	var targets []string
	for _, n := range peerAddSizes {
		rest, rest1 := r.peer(restAddPeer, n, busy), r.peer(restAddPeer, n, 1)
		for _, side := range []struct {
			server, what string
			limits
		}{{gwAddPeer, "not live", limits{1.2, 1.1, 1.2}}, {gwLiveAddPeer, "live", limits{1.4, 1.6, 1.2}}} {
			gw, gw1 := r.peer(side.server, n, busy), r.peer(side.server, n, 1)
			cpu, cpuText := ratio(gw.RunServerCPUUs, rest.RunServerCPUUs)
			db, dbText := ratio(gw.RunDatabaseCPUUs, rest.RunDatabaseCPUUs)
			p50, p50Text := ratio(gw1.RunP50Ms, rest1.RunP50Ms)
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n", n, side.what, cpuText, dbText, p50Text)
			met := func(v, limit float64) string {
				if v > 0 && v <= limit {
					return "yes"
				}
				return "no"
			}
			targets = append(targets,
				fmt.Sprintf("| adds of %d, %s: server CPU ≤ %.1f × REST | %.2f | %s |", n, side.what, side.cpu, cpu, met(cpu, side.cpu)),
				fmt.Sprintf("| adds of %d, %s: database CPU ≤ %.1f × REST | %.2f | %s |", n, side.what, side.db, db, met(db, side.db)),
				fmt.Sprintf("| adds of %d, %s: p50 at 1 in flight ≤ %.1f × REST | %.2f | %s |", n, side.what, side.p50, p50, met(p50, side.p50)))
		}
	}
	fmt.Fprintf(b, "\nThe maintainers' targets for adds, from this run (CPU at %d in flight):\n\n| target | measured | met |\n|---|---|---|\n%s\n\n", busy, strings.Join(targets, "\n"))
}
