package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/listgate/listgate/store"
)

// fanOutResult compares one request for n entities' lists with n separate
// requests sent at once.
type fanOutResult struct {
	Entities          int     `json:"entities"`
	OneRequestP50Ms   float64 `json:"one_request_p50_ms"`
	OneRequestP99Ms   float64 `json:"one_request_p99_ms"`
	SeparateP50Ms     float64 `json:"separate_requests_p50_ms"`
	SeparateP99Ms     float64 `json:"separate_requests_p99_ms"`
	StatementsPerReq  float64 `json:"cql_statements_per_request"`
	GatewayCPUMs      float64 `json:"one_request_gateway_cpu_ms"`
	DatabaseCPUMs     float64 `json:"one_request_database_cpu_ms"`
	RatioTo1EntityP50 float64 `json:"p50_ratio_to_1_entity"`
}

const entitiesQuery = `query Many($ids: [ID!]!) { entities(type: "user", entityIds: $ids) { id list(feature: "` + featureName + `", limit: 10) { items { value timestamp } } } }`

// fanOut measures, one request at a time, the latency of reading n
// distinct 10-item lists in one request and in n concurrent requests, and
// counts the CQL statements the one request costs.
func fanOut(ctx context.Context, c config, g *server, database int, n int) fanOutResult {
	class := classes[0]
	n = min(n, class.entities)
	ids := func(rnd *rand.Rand) []string {
		var out []string
		for _, i := range sample(rnd, n, class.entities) {
			out = append(out, entityID(class, i))
		}
		return out
	}
	one := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		body, _ := json.Marshal(map[string]any{"query": entitiesQuery, "variables": map[string]any{"ids": ids(rnd)}})
		b, err := g.post(ctx, body)
		if err == nil && bytes.Count(b, []byte(`"id":`)) != n {
			err = fmt.Errorf("expected %d entities: %.200s", n, b)
		}
		return n, err
	}
	separate := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		var bodies [][]byte
		for _, id := range ids(rnd) {
			body, _ := json.Marshal(map[string]any{"query": readQuery, "variables": map[string]string{"id": id}})
			bodies = append(bodies, body)
		}
		return n, g.postAll(ctx, bodies)
	}
	ones, seps := alternate(ctx, c, meter{server: g.cmd.Process.Pid, database: database}, 1, one, separate)
	// Statements of one request, counted alone, once the runs' last
	// (cut-off) requests are done.
	time.Sleep(500 * time.Millisecond)
	statementsBefore, _ := g.metric("listgate_cql_statement_duration_seconds_count", `db_operation_name="SELECT list_items"`)
	if _, err := one(ctx, rand.New(rand.NewPCG(3, 4))); err != nil {
		fmt.Println("fan-out request:", err)
	}
	statementsAfter, _ := g.metric("listgate_cql_statement_duration_seconds_count", `db_operation_name="SELECT list_items"`)
	o, s := median(ones), median(seps)
	_, gwCPU, dbCPU := o.perOp()
	return fanOutResult{
		Entities:        n,
		OneRequestP50Ms: ms(o.percentile(0.5)), OneRequestP99Ms: ms(o.percentile(0.99)),
		SeparateP50Ms: ms(s.percentile(0.5)), SeparateP99Ms: ms(s.percentile(0.99)),
		StatementsPerReq: statementsAfter - statementsBefore,
		GatewayCPUMs:     gwCPU / 1000, DatabaseCPUMs: dbCPU / 1000,
	}
}

const batchQuery = `mutation Batch($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added } }`

// batchAdds compares, one request at a time, one addListItemsBatch of
// per items to each of lists distinct write lists with as many
// addListItems requests sent at once.
func batchAdds(ctx context.Context, c config, g *server, database int, lists, per int) comparison {
	ids := func(rnd *rand.Rand) []string {
		var out []string
		for _, i := range sample(rnd, lists, writes.lists) {
			out = append(out, writes.entity(i))
		}
		return out
	}
	batch := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		var adds []map[string]any
		for _, id := range ids(rnd) {
			ref := map[string]string{"entityType": "user", "entityId": id, "feature": writes.feature}
			adds = append(adds, map[string]any{"list": ref, "items": newItems(rnd, per)})
		}
		body, _ := json.Marshal(map[string]any{"query": batchQuery, "variables": map[string]any{"adds": adds}})
		b, err := g.post(ctx, body)
		if err == nil && bytes.Count(b, fmt.Appendf(nil, `{"added":%d}`, per)) != lists {
			err = fmt.Errorf("expected %d lists of %d added: %.200s", lists, per, b)
		}
		return lists * per, err
	}
	query := writes.addQuery()
	separate := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		var bodies [][]byte
		for _, id := range ids(rnd) {
			bodies = append(bodies, addRequest(query, id, newItems(rnd, per)))
		}
		return lists * per, g.postAll(ctx, bodies)
	}
	name := fmt.Sprintf("addListItemsBatch of %d lists × %d items vs %d addListItems at once", lists, per, lists)
	return compare(ctx, c, 1, name, "CQL", g, database, separate, batch)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// removeResult is the latency of removeListItemsWithValue by list size.
type removeResult struct {
	ListSize int     `json:"list_size"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// removes measures removals from lists of each size, through the store,
// removing a value present at three timestamps and putting it back between
// runs.
func removes(ctx context.Context, c config, s store.Store) ([]removeResult, error) {
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "hidden", ValueType: store.String, TTL: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	var out []removeResult
	for _, size := range []int{10, 1000, 10000} {
		l := store.List{Feature: &f, EntityID: fmt.Sprint("r", size)}
		if err := fill(ctx, s, size, l); err != nil {
			return nil, err
		}
		now := time.Now()
		target := []store.NewItem{
			{Timestamp: now.UnixNano(), Value: []byte("target")},
			{Timestamp: now.Add(-time.Minute).UnixNano(), Value: []byte("target")},
			{Timestamp: now.Add(-time.Hour).UnixNano(), Value: []byte("target")},
		}
		var lat []time.Duration
		for range 10 * c.runs {
			if _, err := s.AddItems(ctx, l, target); err != nil {
				return nil, err
			}
			t := time.Now()
			n, err := s.RemoveValues(ctx, l, [][]byte{[]byte("target")}, store.Window{}, 100_000)
			if err != nil || n != 3 {
				return nil, fmt.Errorf("remove from %d items: %d removed, %v", size, n, err)
			}
			lat = append(lat, time.Since(t))
		}
		slices.Sort(lat)
		r := result{latencies: lat}
		out = append(out, removeResult{ListSize: size, P50Ms: ms(r.percentile(0.5)), P99Ms: ms(r.percentile(0.99))})
	}
	return out, nil
}
