package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

// The peer adds: addListItems against the REST peer's POST, for a feature
// that is not live (one batch, as the peer) and for one that is (the batch
// and the change record at once).
const (
	restAddPeer   = "REST add"
	gwAddPeer     = "gateway add, not live"
	gwLiveAddPeer = "gateway add, live"
	liveWriteName = writeName + "_live" // writeName, live
)

var (
	peerAddServers = []string{restAddPeer, gwAddPeer, gwLiveAddPeer}
	peerAddSizes   = []int{1, 10}
	liveWrites     = addTarget{liveWriteName, "w", 1000}
)

// peerAdds measures adds of 1 and 10 items to the write lists (empty
// when the run begins) through the REST peer and through the gateway, to
// the write feature and to its live twin, which it creates.
func peerAdds(ctx context.Context, c config, rest, gw *server, database int) ([]peerResult, error) {
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	b, err := gw.post(ctx, gql(`mutation { createListFeature(input: {entityType: "user", name: "`+liveWriteName+`", valueType: STRING, ttlSeconds: 86400, live: true}) { live } }`, nil))
	if err != nil && strings.Contains(string(b), `live`) && c.gatewayBin != "" {
		// A gateway from before the live flag (--gateway-bin): every
		// feature of it records its adds.
		b, err = gw.post(ctx, gql(`mutation { createListFeature(input: {entityType: "user", name: "`+liveWriteName+`", valueType: STRING, ttlSeconds: 86400}) { key } }`, nil))
	} else if err == nil && !strings.Contains(string(b), `"live":true`) {
		err = fmt.Errorf("the feature is not live")
	}
	if err != nil {
		return nil, fmt.Errorf("creating the live write feature: %.300s, %v", b, err)
	}
	var out []peerResult
	for _, n := range peerAddSizes {
		sides := []measured{ // in the order of peerAddServers
			{meter{server: rest.cmd.Process.Pid, database: database}, restAdd(rest, writes, n)},
			{meter{server: gw.cmd.Process.Pid, database: database}, gatewayAdded(gw, writes, n)},
			{meter{server: gw.cmd.Process.Pid, database: database}, gatewayAdded(gw, liveWrites, n)},
		}
		warmUp(ctx, c.concurrency, sides...)
		for _, inFlight := range []int{1, c.concurrency} {
			log("peers: adds of %d items, %d in flight", n, inFlight)
			for i, rs := range rotate(ctx, c.runs, c.peerDuration, inFlight, sides...) {
				p := newPeerResult(peerAddServers[i], n, inFlight, rs)
				log("  %s: %.0f µs server CPU/request, %.0f µs database CPU/request, %.0f requests/s, p50 %.2f ms, p99 %.2f ms, errors %d",
					p.Server, p.ServerCPUUs, p.DatabaseCPUUs, p.ReqPerSec, p.P50Ms, p.P99Ms, p.Errors)
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// restAdd adds n items of random values to lists of t, drawn Zipf-like,
// through the REST peer.
func restAdd(s *server, t addTarget, n int) op {
	z := newZipf(t.lists)
	want := fmt.Appendf(nil, `{"added":%d}`, n)
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		body, _ := json.Marshal(map[string]any{"items": newItems(rnd, n)})
		b, err := s.postTo(ctx, "/lists/user/"+t.entity(z.draw(rnd))+"/"+t.feature, body)
		if err == nil && string(b) != string(want) {
			err = fmt.Errorf("the REST peer answered %.200s", b)
		}
		return n, err
	}
}

// gatewayAdded is gatewayAdd, checking that every item was added.
func gatewayAdded(g *server, t addTarget, n int) op {
	z := newZipf(t.lists)
	query := t.addQuery()
	want := fmt.Sprintf(`"added":%d}`, n)
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		b, err := g.post(ctx, addRequest(query, t.entity(z.draw(rnd)), newItems(rnd, n)))
		if err == nil && !strings.Contains(string(b), want) {
			err = fmt.Errorf("the gateway answered %.200s", b)
		}
		return n, err
	}
}
