package graph_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// benchGateway is the real handler on an embedded store holding one list of
// n items and 100 one-item lists.
// unthrottled are the default limits with a caller budget that one client
// sending request after request (a benchmark, a fuzzer) never exhausts: it
// is still charged on every request (callers_test.go runs budgets out).
func unthrottled() endpoint.Limits {
	l := endpoint.DefaultLimits
	l.CallerCostRate, l.CallerCostBurst = 1e15, 1e15
	return l
}

func benchGateway(b *testing.B, n int) http.Handler {
	b.Helper()
	s := embeddedStore(b)
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "reading_history", ValueType: store.String, TTL: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	items := make([]store.NewItem, n)
	for i := range items {
		items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Second).UnixNano(), Value: fmt.Appendf(nil, "story%08d", i)}
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: "u1"}, items); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: fmt.Sprint("e", i)}, items[:1]); err != nil {
			b.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(ctx, s, log, nil)
	if err != nil {
		b.Fatal(err)
	}
	h, err := endpoint.New(endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: unthrottled(), Log: log})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// serveBench serves requests, inFlight at a time (1: one per iteration,
// in turn), and reports, besides wall time, the process's CPU time per
// request (user + system, garbage collection and scheduling included) as
// cpu-ns/op.
func serveBench(b *testing.B, h http.Handler, body string, inFlight int) {
	b.Helper()
	b.ReportAllocs()
	// The server's default garbage collector target (--gc-percent).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	serve := func() {
		// Built, not parsed: a server parses with a reader it reuses.
		req, _ := http.NewRequest(http.MethodPost, "http://localhost/graphql", strings.NewReader(body))
		req.Header["Content-Type"] = jsonType
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			b.Errorf("%d %s", w.Code, w.Body.Bytes())
		}
	}
	before := cpuTime()
	if inFlight == 1 {
		for b.Loop() {
			serve()
		}
	} else {
		b.SetParallelism((inFlight + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				serve()
			}
		})
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
}

var jsonType = []string{"application/json"}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The resolver path of a listItems request on the embedded store, for lists
// of 1, 10 and 100 items, one request at a time and 32 at once: the
// handler's CPU per request.
func BenchmarkListItems(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		h := benchGateway(b, n)
		body := fmt.Sprintf(`{"query":"query Read($id: ID!) { listItems(entityType: \"user\", entityId: $id, feature: \"reading_history\", limit: %d) { items { value timestamp expiresAt cursor } hasMore endCursor } }","variables":{"id":"u1"}}`, n)
		for _, inFlight := range []int{1, 32} {
			b.Run(fmt.Sprintf("items=%d/in-flight=%d", n, inFlight), func(b *testing.B) { serveBench(b, h, body, inFlight) })
		}
	}
}

// Entity lists through the loader: one request for n entities.
func BenchmarkEntities(b *testing.B) {
	h := benchGateway(b, 1)
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("entities=%d", n), func(b *testing.B) {
			ids := ""
			for i := range n {
				if i > 0 {
					ids += ","
				}
				ids += fmt.Sprintf(`\"e%d\"`, i)
			}
			serveBench(b, h, fmt.Sprintf(`{"query":"{ entities(type: \"user\", entityIds: [%s]) { id list(feature: \"reading_history\") { items { value timestamp } } } }"}`, ids), 1)
		})
	}
}

// listContains of 1,000 values (every tenth present) against a 100-item
// list, through the fast path's writer and through gqlgen's marshalers.
func BenchmarkListContains(b *testing.B) {
	h := benchGateway(b, 100)
	var vals strings.Builder
	for i := range 1000 {
		if i > 0 {
			vals.WriteByte(',')
		}
		fmt.Fprintf(&vals, `"story%08d"`, i*10)
	}
	body := `{"query":"query Seen($v: [ListValue!]!) { entity(type: \"user\", entityId: \"u1\") { listContains(feature: \"reading_history\", values: $v) { value timestamp } } }","variables":{"v":[` + vals.String() + `]}}`
	b.Run("marshal=fast", func(b *testing.B) { serveBench(b, h, body, 1) })
	b.Run("marshal=gqlgen", func(b *testing.B) { serveBench(b, gqlgenMarshaling(h), body, 1) })
}

// The plans of a listItems and a listCount query against gqlgen's
// execution of the same queries (the same handler, graph.WithoutPlans),
// on a 10-item list: 32 reads at once, counts one at a time (a count's
// complexity is that of the rows it may look at: 32 at once are over one
// caller's share of --max-in-flight-complexity).
func BenchmarkPlans(b *testing.B) {
	h := benchGateway(b, 10)
	gqlgen := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(graph.WithoutPlans(r.Context())))
	})
	for _, q := range []struct {
		name, body string
		inFlight   int
	}{
		{"listItems", `{"query":"query Read($id: ID!) { listItems(entityType: \"user\", entityId: $id, feature: \"reading_history\", limit: 10) { items { value timestamp expiresAt cursor } hasMore endCursor } }","variables":{"id":"u1"}}`, 32},
		{"listCount", `{"query":"query Count($id: ID!) { listCount(entityType: \"user\", entityId: $id, feature: \"reading_history\") }","variables":{"id":"u1"}}`, 1},
	} {
		b.Run(q.name+"/plan", func(b *testing.B) { serveBench(b, h, q.body, q.inFlight) })
		b.Run(q.name+"/gqlgen", func(b *testing.B) { serveBench(b, gqlgen, q.body, q.inFlight) })
	}
}
