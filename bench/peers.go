package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"reflect"
	"slices"
	"time"
)

// The servers of the peer table: what the gateway costs against the REST
// service a team would otherwise write and against a plain gqlgen server,
// with raw gocql as the floor.
const (
	floorPeer = "gocql (floor)"
	restPeer  = "REST"
	gwPeer    = "gateway"
	stockPeer = "stock gqlgen"
)

var (
	peerServers = []string{floorPeer, restPeer, gwPeer, stockPeer}
	peerPages   = []int{10, 100} // items per page
	fanOutLists = 100
)

// peerResult is one server reading pages of one size with some requests
// in flight: medians of the runs, each figure on its own.
type peerResult struct {
	Server   string `json:"server"`
	PageSize int    `json:"page_size"`
	InFlight int    `json:"requests_in_flight"`
	// CPU per request of the server's process (the client's for the
	// floor, which has no server), the load generator's and the
	// database's, in µs.
	ServerCPUUs   float64 `json:"server_cpu_us_per_request"`
	ClientCPUUs   float64 `json:"client_cpu_us_per_request"`
	DatabaseCPUUs float64 `json:"database_cpu_us_per_request"`
	ReqPerSec     float64 `json:"requests_per_sec"`
	ItemsPerSec   float64 `json:"items_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	// Server CPU and p99 of each run, by round of the rotation.
	RunServerCPUUs []float64 `json:"run_server_cpu_us_per_request"`
	RunP99Ms       []float64 `json:"run_p99_ms"`
	// Database CPU and p50 of each run, for the adds' ratios.
	RunDatabaseCPUUs []float64 `json:"run_database_cpu_us_per_request,omitempty"`
	RunP50Ms         []float64 `json:"run_p50_ms,omitempty"`
	Errors           int       `json:"errors"`
}

// peerFanOut compares one entities request for many lists through the
// gateway with as many requests to the REST peer sent at once.
type peerFanOut struct {
	Lists int `json:"lists"`
	// Server CPU of one request (the gateway) or of one set of requests
	// (REST), in ms, and the database's.
	GatewayCPUMs    float64   `json:"gateway_cpu_ms"`
	RESTCPUMs       float64   `json:"rest_cpu_ms"`
	GatewayDBCPUMs  float64   `json:"gateway_database_cpu_ms"`
	RESTDBCPUMs     float64   `json:"rest_database_cpu_ms"`
	GatewayP50Ms    float64   `json:"gateway_p50_ms"`
	GatewayP99Ms    float64   `json:"gateway_p99_ms"`
	RESTP50Ms       float64   `json:"rest_p50_ms"`
	RESTP99Ms       float64   `json:"rest_p99_ms"`
	RunGatewayCPUMs []float64 `json:"run_gateway_cpu_ms"`
	RunRESTCPUMs    []float64 `json:"run_rest_cpu_ms"`
	Errors          int       `json:"errors"`
}

// peers builds and starts the REST peer and the stock gqlgen gateway
// (with the flags of gw) on keyspace, and measures them, gw and raw gocql
// reading pages of the 1,000-item lists, then the fan-out.
func peers(ctx context.Context, c config, keyspace string, gw *server, raw rawCQL, database int) ([]peerResult, *peerFanOut, error) {
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	log("building the REST peer and the stock gqlgen gateway")
	restBin, err := build("restpeer", "./bench/restpeer")
	if err != nil {
		return nil, nil, fmt.Errorf("building the REST peer: %w", err)
	}
	stockBin, err := build("listgate-stock", ".", "-tags", "stockgqlgen")
	if err != nil {
		return nil, nil, fmt.Errorf("building the stock gqlgen gateway: %w", err)
	}
	rest, err := startServer(restBin, c.concurrency, "--listen", "127.0.0.1:0", "--cql-hosts", c.cqlHosts, "--cql-keyspace", keyspace)
	if err != nil {
		return nil, nil, err
	}
	defer rest.stop()
	stock, err := startGateway(stockBin, c.concurrency, "--cql-hosts", c.cqlHosts, "--cql-keyspace", keyspace)
	if err != nil {
		return nil, nil, err
	}
	defer stock.stop()

	class := classes[1] // the 1,000-item lists: every page is full
	if err := samePages(ctx, class, rest, gw, stock); err != nil {
		return nil, nil, err
	}
	var out []peerResult
	for _, size := range peerPages {
		if !c.does("peers") {
			break // peeradds alone
		}
		sides := []measured{ // in the order of peerServers
			{meter{database: database}, full(size, raw.read(class, size))},
			{meter{server: rest.cmd.Process.Pid, database: database}, full(size, restRead(rest, class, size))},
			{meter{server: gw.cmd.Process.Pid, database: database}, full(size, gatewayRead(gw, class, listItemsQuery(size, "")))},
			{meter{server: stock.cmd.Process.Pid, database: database}, full(size, gatewayRead(stock, class, listItemsQuery(size, "")))},
		}
		warmUp(ctx, c.concurrency, sides...)
		for _, inFlight := range []int{1, c.concurrency} {
			log("peers: pages of %d items, %d in flight", size, inFlight)
			for i, rs := range rotate(ctx, c.runs, c.peerDuration, inFlight, sides...) {
				p := newPeerResult(peerServers[i], size, inFlight, rs)
				log("  %s: %.0f µs server CPU/request, %.0f requests/s, p50 %.2f ms, p99 %.2f ms, errors %d",
					p.Server, p.ServerCPUUs, p.ReqPerSec, p.P50Ms, p.P99Ms, p.Errors)
				out = append(out, p)
			}
		}
	}
	adds, err := peerAdds(ctx, c, rest, gw, database)
	if err != nil {
		return nil, nil, err
	}
	out = append(out, adds...)
	if !c.does("peers") {
		return out, nil, nil
	}
	log("peers: one entities request for %d lists vs %d REST requests at once", fanOutLists, fanOutLists)
	f := peersFanOut(ctx, c, rest, gw, database)
	log("  gateway %.2f ms server CPU/request, p50 %.2f ms, p99 %.2f ms; REST %.2f ms/set, p50 %.2f ms, p99 %.2f ms; errors %d",
		f.GatewayCPUMs, f.GatewayP50Ms, f.GatewayP99Ms, f.RESTCPUMs, f.RESTP50Ms, f.RESTP99Ms, f.Errors)
	return out, &f, nil
}

// full checks that every page of f holds size items.
func full(size int, f op) op {
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		n, err := f(ctx, rnd)
		if err == nil && n != size {
			err = fmt.Errorf("a page of %d items, not %d", n, size)
		}
		return n, err
	}
}

// warmUp runs each side briefly, unmeasured, so that no server's first
// run pays for its connections and its heap growing.
func warmUp(ctx context.Context, inFlight int, sides ...measured) {
	for _, s := range sides {
		run(ctx, meter{}, inFlight, 300*time.Millisecond, 1<<22, s.f)
	}
}

// restPath is the REST peer's URL path of a page of a read list.
func restPath(id string, limit int) string {
	return fmt.Sprintf("/lists/user/%s/%s?limit=%d", url.PathEscape(id), featureName, limit)
}

// restRead reads pages of limit items of lists of class, drawn Zipf-like,
// from the REST peer.
func restRead(s *server, class listClass, limit int) op {
	z := newZipf(class.entities)
	paths := make([]string, class.entities)
	for i := range paths {
		paths[i] = restPath(entityID(class, i), limit)
	}
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		b, err := s.get(ctx, paths[z.draw(rnd)])
		return bytes.Count(b, []byte(`"cursor":`)), err
	}
}

// samePages checks that the REST peer, the gateway and the stock gqlgen
// gateway answer a page of a list with the same items, hasMore and
// endCursor.
func samePages(ctx context.Context, class listClass, rest, gw, stock *server) error {
	id := entityID(class, 0)
	b, err := rest.get(ctx, restPath(id, 10))
	if err != nil {
		return fmt.Errorf("REST peer: %w", err)
	}
	var want any
	if err := json.Unmarshal(b, &want); err != nil {
		return fmt.Errorf("REST peer: %w", err)
	}
	body, _ := json.Marshal(map[string]any{"query": listItemsQuery(10, ""), "variables": map[string]string{"id": id}})
	for _, s := range []*server{gw, stock} {
		b, err := s.post(ctx, body)
		var got struct{ Data struct{ ListItems any } }
		if err == nil {
			err = json.Unmarshal(b, &got)
		}
		if err == nil && !reflect.DeepEqual(got.Data.ListItems, want) {
			err = fmt.Errorf("answers %.300s, the REST peer %.300s", b, want)
		}
		if err != nil {
			return fmt.Errorf("the page of %s through %s: %w", id, s.cmd.Path, err)
		}
	}
	return nil
}

func newPeerResult(name string, size, inFlight int, rs []result) peerResult {
	p := peerResult{Server: name, PageSize: size, InFlight: inFlight}
	var cpu, client, db, reqs, items, p50, p99 []float64
	for _, r := range rs {
		c, s, d := r.perOp()
		if name == floorPeer {
			s = c // gocql runs in the client: its CPU is the floor's
		}
		cpu, client, db = append(cpu, s), append(client, c), append(db, d)
		reqs, items = append(reqs, r.opsPerSec()), append(items, r.itemsPerSec())
		p50, p99 = append(p50, ms(r.percentile(0.5))), append(p99, ms(r.percentile(0.99)))
		p.Errors += r.errors
	}
	p.RunServerCPUUs, p.RunP99Ms, p.RunDatabaseCPUUs, p.RunP50Ms = cpu, p99, db, p50
	p.ServerCPUUs, p.ClientCPUUs, p.DatabaseCPUUs = medianOf(cpu), medianOf(client), medianOf(db)
	p.ReqPerSec, p.ItemsPerSec, p.P50Ms, p.P99Ms = medianOf(reqs), medianOf(items), medianOf(p50), medianOf(p99)
	return p
}

// medianOf is the median of xs (the mean of the middle two of an even
// count).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// peerEntitiesQuery reads a page of 10 items of many entities' lists, with
// the fields the REST peer answers.
const peerEntitiesQuery = `query Many($ids: [ID!]!) { entities(type: "user", entityIds: $ids) { id list(feature: "` + featureName + `", limit: 10) { items { value timestamp cursor } hasMore endCursor } } }`

// peersFanOut measures, one at a time, one entities request for
// fanOutLists distinct 10-item lists through the gateway, and as many
// requests for the same lists to the REST peer sent at once.
func peersFanOut(ctx context.Context, c config, rest, gw *server, database int) peerFanOut {
	class := classes[0]
	n := min(fanOutLists, class.entities)
	one := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		var ids []string
		for _, i := range sample(rnd, n, class.entities) {
			ids = append(ids, entityID(class, i))
		}
		body, _ := json.Marshal(map[string]any{"query": peerEntitiesQuery, "variables": map[string]any{"ids": ids}})
		b, err := gw.post(ctx, body)
		if err == nil && bytes.Count(b, []byte(`"cursor":`)) != n*class.size {
			err = fmt.Errorf("expected %d items: %.200s", n*class.size, b)
		}
		return n, err
	}
	separate := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		var paths []string
		for _, i := range sample(rnd, n, class.entities) {
			paths = append(paths, restPath(entityID(class, i), 10))
		}
		return n, atOnce(paths, func(path string) error {
			b, err := rest.get(ctx, path)
			if err == nil && bytes.Count(b, []byte(`"cursor":`)) != class.size {
				err = fmt.Errorf("expected %d items: %.200s", class.size, b)
			}
			return err
		})
	}
	sides := []measured{{meter{server: gw.cmd.Process.Pid, database: database}, one}, {meter{server: rest.cmd.Process.Pid, database: database}, separate}}
	warmUp(ctx, 1, sides...)
	rs := rotate(ctx, c.runs, c.peerDuration, 1, sides...)
	f := peerFanOut{Lists: n}
	side := func(rs []result) (cpu, db, p50, p99 float64, runs []float64) {
		var dbs, p50s, p99s []float64
		for _, r := range rs {
			_, s, d := r.perOp()
			runs, dbs = append(runs, s/1000), append(dbs, d/1000)
			p50s, p99s = append(p50s, ms(r.percentile(0.5))), append(p99s, ms(r.percentile(0.99)))
			f.Errors += r.errors
		}
		return medianOf(runs), medianOf(dbs), medianOf(p50s), medianOf(p99s), runs
	}
	f.GatewayCPUMs, f.GatewayDBCPUMs, f.GatewayP50Ms, f.GatewayP99Ms, f.RunGatewayCPUMs = side(rs[0])
	f.RESTCPUMs, f.RESTDBCPUMs, f.RESTP50Ms, f.RESTP99Ms, f.RunRESTCPUMs = side(rs[1])
	return f
}
