package graph_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
)

// Every mistake a client can make at the transport gets an error with a
// code and what to send instead, and counts in the request metrics with
// that code as its outcome, not "ok".
func TestTransportMistakesSayWhatToSend(t *testing.T) {
	s := embeddedStore(t)
	reader := sdkmetric.NewManualReader()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(context.Background(), s, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := endpoint.New(endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: endpoint.DefaultLimits, Log: log,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, contentType, origin, body string
		status                                  int
		code, says                              string
	}{
		{"no content type (curl --data)", http.MethodPost, "application/x-www-form-urlencoded", "", `{"query":"{ listFeatures { key } }"}`,
			http.StatusUnsupportedMediaType, "BAD_REQUEST", "send Content-Type: application/json"},
		{"a body that is not JSON", http.MethodPost, "application/json", "", `{"query": `, http.StatusBadRequest, "BAD_REQUEST", "not a JSON object such as"},
		{"a query that is not a string", http.MethodPost, "application/json", "", `{"query": 5}`, http.StatusBadRequest, "BAD_REQUEST", "not a JSON object such as"},
		{"another method", http.MethodPut, "application/json", "", `{}`, http.StatusMethodNotAllowed, "BAD_REQUEST", "send a POST"},
		{"a mutation over GET", http.MethodGet, "", "", "", http.StatusMethodNotAllowed, "BAD_REQUEST", "send a mutation with POST"},
		{"a preflight from an unlisted origin", http.MethodOptions, "", "https://app.example.com", "", http.StatusForbidden, "FORBIDDEN", "--cors-origins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := "http://localhost/graphql"
			if tc.method == http.MethodGet {
				target += "?query=" + strings.ReplaceAll(`mutation { removeAllListItems(list: {entityType: "user", entityId: "u1", feature: "f"}) }`, " ", "+")
			}
			req := httptest.NewRequest(tc.method, target, strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
				req.Header.Set("Access-Control-Request-Method", "POST")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			body := w.Body.String()
			if w.Code != tc.status || !strings.Contains(body, `"code":"`+tc.code+`"`) || !strings.Contains(body, tc.says) {
				t.Fatalf("HTTP %d %s; want %d, code %s, saying %q", w.Code, body, tc.status, tc.code, tc.says)
			}
		})
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "listgate.graphql.requests" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				o, _ := dp.Attributes.Value("outcome")
				outcomes[o.AsString()] += dp.Value
			}
		}
	}
	if outcomes["BAD_REQUEST"] != 5 || outcomes["FORBIDDEN"] != 1 || outcomes["ok"] != 0 {
		t.Fatalf("outcomes counted: %v; want 5 BAD_REQUEST, 1 FORBIDDEN", outcomes)
	}
}

// The default limits agree: the most entities the defaults allow, each
// with a list of the default limit and every field of it, fit the default
// complexity; a request past a bound is told which bound, with its flag
// and path, before anything costs; one past the complexity is told its
// costliest field and the flag.
func TestDefaultLimitsAgree(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	g.createFeature("f", "STRING", 3600)
	entities := func(n int, list string) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%q", fmt.Sprint("e", i))
		}
		return `{ entities(type: "$type", entityIds: [` + strings.Join(ids, ",") + `]) { __typename id type entityId list(feature: "f"` + list +
			`) { __typename items { __typename value timestamp expiresAt cursor } hasMore endCursor } } }`
	}
	g.ok(entities(endpoint.DefaultLimits.MaxEntities, ""), nil, nil)
	if e := g.fails(entities(endpoint.DefaultLimits.MaxEntities+1, ""), nil, "BAD_USER_INPUT", "--max-entities"); fmt.Sprint(e.Path) != "[entities]" {
		t.Errorf("path %v", e.Path)
	}
	if e := g.fails(entities(5, ", limit: 100000"), nil, "BAD_USER_INPUT", "must be from 1 to 1000 (--max-list-limit)"); fmt.Sprint(e.Path) != "[entities list]" {
		t.Errorf("path %v", e.Path)
	}
	e := g.fails(entities(endpoint.DefaultLimits.MaxEntities, ", limit: 1000"), nil, "BAD_USER_INPUT", "--max-complexity")
	if !strings.Contains(e.Message, "the costliest is entities (") || !strings.Contains(e.Message, "› list (") {
		t.Errorf("message %q does not name the costliest fields", e.Message)
	}
}

// An item an add refuses is named one way wherever the check that refuses
// it runs: items[i], within adds[j] in a batch, and nothing is written.
func TestItemIndicesReadOneWay(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	g.createFeature("scores", "INT", 3600)
	g.createFeature("history", "STRING", 3600)
	add := `mutation($list: ListRefInput!, $items: [ListItemInput!]!) { addListItems(list: $list, items: $items) { added } }`
	list := func(feature string) map[string]any {
		return map[string]any{"entityType": g.entityType, "entityId": "u1", "feature": feature}
	}
	now := time.Now().UTC()
	for _, tc := range []struct {
		feature string
		items   []any
		want    string
	}{
		{"scores", []any{map[string]any{"value": 1}, map[string]any{"value": "five"}}, "items[1]: "},
		{"history", []any{map[string]any{"value": "a"}, map[string]any{"value": "b"}, map[string]any{"value": strings.Repeat("x", 40_000)}}, "items[2]: value of 40000 bytes"},
		{"history", []any{map[string]any{"value": "a", "timestamp": now.Add(-2 * time.Hour).Format(time.RFC3339)}, map[string]any{"value": "b", "timestamp": now.Add(24 * time.Hour).Format(time.RFC3339)}}, "items[1]: "},
	} {
		g.fails(add, map[string]any{"list": list(tc.feature), "items": tc.items}, "BAD_USER_INPUT", tc.want)
	}
	batch := `mutation($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added } }`
	g.fails(batch, map[string]any{"adds": []any{
		map[string]any{"list": list("history"), "items": []any{map[string]any{"value": "a"}}},
		map[string]any{"list": list("scores"), "items": []any{map[string]any{"value": 2}, map[string]any{"value": "x"}}},
	}}, "BAD_USER_INPUT", "adds[1]: items[1]: ")
	for _, feature := range []string{"scores", "history"} {
		if p := g.listItems("u1", feature, nil); len(p.Items) != 0 {
			t.Errorf("%s: refused adds wrote %d items", feature, len(p.Items))
		}
	}
}

// An operation's complexity is kept for the next request of the same text
// only when no variable sets it: the same document with other variables
// is measured again, and a document whose limit is a literal is refused
// every time it passes a bound.
func TestComplexityFollowsVariables(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	g.createFeature("f", "STRING", 3600)
	byVariable := `query($n: Int, $ids: [ID!]!) { entities(type: "$type", entityIds: $ids) { list(feature: "f", limit: $n) { items { value } } } }`
	ids := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprint("e", i)
		}
		return out
	}
	for range 2 {
		g.ok(byVariable, map[string]any{"n": 10, "ids": ids(2)}, nil)
		g.fails(byVariable, map[string]any{"n": 100000, "ids": ids(2)}, "BAD_USER_INPUT", "(--max-list-limit)")
		g.fails(byVariable, map[string]any{"n": 1000, "ids": ids(endpoint.DefaultLimits.MaxEntities)}, "BAD_USER_INPUT", "--max-complexity")
		g.fails(byVariable, map[string]any{"n": 10, "ids": ids(endpoint.DefaultLimits.MaxEntities + 1)}, "BAD_USER_INPUT", "--max-entities")
	}
	skipped := `query($skip: Boolean!) { entities(type: "$type", entityIds: ["e1"]) { list(feature: "f", limit: 1000) @skip(if: $skip) { items { value } } a: list(feature: "f", limit: 1000) @skip(if: $skip) { items { value } } } }`
	for range 2 {
		g.ok(skipped, map[string]any{"skip": true}, nil)
		g.ok(skipped, map[string]any{"skip": false}, nil)
	}
	literal := `{ listItems(entityType: "$type", entityId: "e1", feature: "f", limit: 1001) { items { value } } }`
	for range 2 {
		g.fails(literal, nil, "BAD_USER_INPUT", "(--max-list-limit)")
	}
}
