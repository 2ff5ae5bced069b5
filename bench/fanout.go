package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
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
func fanOut(ctx context.Context, c config, g *gateway, database int, n int) fanOutResult {
	class := classes[0]
	n = min(n, class.entities)
	ids := func(rnd *rand.Rand) []string {
		seen := map[int]bool{}
		var out []string
		for len(out) < n {
			if i := rnd.IntN(class.entities); !seen[i] {
				seen[i] = true
				out = append(out, entityID(class, i))
			}
		}
		return out
	}
	one := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		body, _ := json.Marshal(map[string]any{"query": entitiesQuery, "variables": map[string]any{"ids": ids(rnd)}})
		b, err := g.post(ctx, body)
		if err == nil && strings.Count(string(b), `"id":`) != n {
			err = fmt.Errorf("expected %d entities: %.200s", n, b)
		}
		return n, err
	}
	separate := func(ctx context.Context, rnd *rand.Rand) (int, error) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, id := range ids(rnd) {
			wg.Go(func() {
				body, _ := json.Marshal(map[string]any{"query": readQuery, "variables": map[string]string{"id": id}})
				if _, err := g.post(ctx, body); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		return n, <-errs
	}
	var ones, seps []result
	m := meter{gateway: g.cmd.Process.Pid, database: database}
	for i := range c.runs {
		if i%2 == 0 {
			ones = append(ones, run(ctx, m, 1, c.duration, 1<<20, one))
			seps = append(seps, run(ctx, m, 1, c.duration, 1<<20, separate))
		} else {
			seps = append(seps, run(ctx, m, 1, c.duration, 1<<20, separate))
			ones = append(ones, run(ctx, m, 1, c.duration, 1<<20, one))
		}
	}
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// removeResult is the latency of removeListItemsWithValue by strategy and
// list size.
type removeResult struct {
	Strategy string  `json:"strategy"`
	ListSize int     `json:"list_size"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// removes measures each strategy on lists of each size, removing a value
// present at three timestamps and putting it back between runs.
func removes(ctx context.Context, c config, hosts []string, keyspace string) ([]removeResult, error) {
	var out []removeResult
	reps := 10 * c.runs
	for _, strategy := range []cql.RemoveStrategy{cql.RemoveByScan, cql.RemoveByIndex} {
		s, err := openCQL(ctx, hosts, keyspace+"_"+string(strategy), strategy, true)
		if err != nil {
			return nil, err
		}
		f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "hidden", ValueType: store.String, TTL: 24 * time.Hour})
		if err != nil {
			s.Close()
			return nil, err
		}
		for _, size := range []int{10, 1000, 10000} {
			l := store.List{Feature: &f, EntityID: fmt.Sprint("r", size)}
			now := time.Now()
			for start := 0; start < size; start += 1000 {
				var items []store.NewItem
				for i := start; i < min(start+1000, size); i++ {
					items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Second).UnixNano(), Value: value(i)})
				}
				if _, err := s.AddItems(ctx, l, items); err != nil {
					s.Close()
					return nil, err
				}
			}
			target := []store.NewItem{
				{Timestamp: now.UnixNano(), Value: []byte("target")},
				{Timestamp: now.Add(-time.Minute).UnixNano(), Value: []byte("target")},
				{Timestamp: now.Add(-time.Hour).UnixNano(), Value: []byte("target")},
			}
			var lat []time.Duration
			for range reps {
				if _, err := s.AddItems(ctx, l, target); err != nil {
					s.Close()
					return nil, err
				}
				t := time.Now()
				n, err := s.RemoveValue(ctx, l, []byte("target"))
				if err != nil || n != 3 {
					s.Close()
					return nil, fmt.Errorf("remove by %s from %d items: %d removed, %v", strategy, size, n, err)
				}
				lat = append(lat, time.Since(t))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			r := result{latencies: lat}
			out = append(out, removeResult{Strategy: string(strategy), ListSize: size, P50Ms: ms(r.percentile(0.5)), P99Ms: ms(r.percentile(0.99))})
		}
		s.Close()
	}
	return out, nil
}
