package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// The compiled path against gqlgen's: the same requests, in the same
// order, to a gateway that compiles the documents it has seen and to one
// that has gqlgen make every operation (--compiled-documents=false), over
// one store, each built alike and with a frozen clock, so that budgets
// spent and RateLimit headers are the same on both. Every answer (status,
// headers, body; a WebSocket's messages) must be the same, errors
// included.

// diffModes are the configurations compared: development (nobody
// authenticates), production (API keys with scopes: "reader" may read,
// "writer" may not), trusted documents enforced (for "reader", who may
// not send other documents), and budgets that a few requests spend.
var diffModes = []string{"dev", "prod", "trusted", "budget"}

// diffWorld is the store and the trusted documents the gateways of a
// comparison share.
type diffWorld struct {
	store    store.Store
	catalog  *features.Catalog
	manifest string
	now      time.Time
}

// trustedDocs are the documents of the trusted documents' manifest.
var trustedDocs = []string{
	`query Read($id: ID!) { listItems(entityType: "user", entityId: $id, feature: "f", limit: 3) { items { value cursor } hasMore endCursor } }`,
	`query Count($id: ID!, $v: String = "") { listCount(entityType: "user", entityId: $id, feature: "f", version: $v) }`,
}

func newDiffWorld(tb testing.TB) *diffWorld {
	tb.Helper()
	s, catalog := planStore(tb)
	return &diffWorld{store: s, catalog: catalog, manifest: writeManifest(tb, trustedDocs...), now: time.Now()}
}

// gateways returns the compiled gateway and the reference one for mode,
// and a reader of the compiled one's metrics.
func (w *diffWorld) gateways(tb testing.TB, mode string) (compiled, reference http.Handler, reader *sdkmetric.ManualReader) {
	tb.Helper()
	build := func(gqlgenOnly bool, mp *sdkmetric.MeterProvider) http.Handler {
		log := slog.New(slog.DiscardHandler)
		limits := unthrottled()
		cfg := endpoint.Config{Store: w.store, Catalog: w.catalog, Loader: lists.DefaultLoaderConfig, Limits: limits, Log: log,
			Now: func() time.Time { return w.now }, GQLGenOnly: gqlgenOnly, Introspection: mode == "dev"}
		if mp != nil {
			cfg.MeterProvider = mp
		}
		var err error
		switch mode {
		case "prod", "trusted":
			cfg.Auth, err = auth.New(auth.Config{APIKeys: []string{keyLine("reader", "reader", "lists:read"), keyLine("writer", "writer", "lists:write")}})
			if err != nil {
				tb.Fatal(err)
			}
			if mode == "trusted" {
				cfg.Documents, err = documents.New(w.manifest, documents.Enforce, log, metricnoop.NewMeterProvider().Meter(""))
				if err != nil {
					tb.Fatal(err)
				}
			}
		case "budget":
			cfg.Limits.CallerCostRate, cfg.Limits.CallerCostBurst, cfg.Limits.MaxComplexity = 1, 60, 60
		}
		h, err := endpoint.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return h
	}
	reader = sdkmetric.NewManualReader()
	return build(false, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))), build(true, nil), reader
}

// compiledCount is how many operations the compiled path made.
func compiledCount(tb testing.TB, reader *sdkmetric.ManualReader) int64 {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "listgate.graphql.paths" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := dp.Attributes.Value("path"); v.AsString() == "compiled" {
					return dp.Value
				}
			}
		}
	}
	return 0
}

// diffRequest is one request as sent: its transport, its caller's token,
// and its body (a POST's, or a subscribe message's payload; a GET sends
// its members as parameters).
type diffRequest struct {
	method string // POST, GET or WS
	token  string
	body   []byte
}

func (r diffRequest) http() *http.Request {
	if r.method == http.MethodGet {
		var members map[string]json.RawMessage
		q := url.Values{}
		if json.Unmarshal(r.body, &members) == nil {
			for name, v := range members {
				var s string
				if json.Unmarshal(v, &s) == nil {
					q.Set(name, s)
				} else {
					q.Set(name, string(v))
				}
			}
		}
		return httptest.NewRequest(http.MethodGet, "http://localhost/graphql?"+q.Encode(), nil)
	}
	req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

// answer is what a client got: status, headers and body, or a WebSocket's
// messages until the operation's last.
func answer(t *testing.T, h http.Handler, srv *httptest.Server, r diffRequest) string {
	t.Helper()
	if r.method != "WS" {
		req := r.http()
		if r.token != "" {
			req.Header.Set("Authorization", "Bearer "+r.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return fmt.Sprintf("%d %v %s", w.Code, w.Header(), w.Body.Bytes())
	}
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init(r.token); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: json.RawMessage(r.body)})
	var out []string
	for {
		m, err := c.next()
		if err != nil {
			return strings.Join(out, "\n") + "\n" + err.Error()
		}
		out = append(out, m.Type+" "+string(m.Payload))
		if m.Type != "next" {
			return strings.Join(out, "\n")
		}
	}
}

// compare sends each request three times, in turn, to both gateways of
// mode (the first teaches the compiled one its document; the others go
// through its plan if it has one), and fails on any answer that differs.
// It returns how many operations the compiled path made.
func compare(t *testing.T, w *diffWorld, mode string, reqs ...diffRequest) int64 {
	t.Helper()
	compiled, reference, reader := w.gateways(t, mode)
	var servers [2]*httptest.Server
	for _, r := range reqs {
		if r.method == "WS" && servers[0] == nil {
			servers[0], servers[1] = httptest.NewServer(compiled), httptest.NewServer(reference)
			defer servers[0].Close()
			defer servers[1].Close()
		}
	}
	for _, r := range reqs {
		if !json.Valid(r.body) && r.method == "WS" {
			continue // a WebSocket message must be JSON; its refusal is the socket's, not the operation's
		}
		for i := range 3 {
			got, want := answer(t, compiled, servers[0], r), answer(t, reference, servers[1], r)
			if got != want {
				t.Fatalf("%s %s %s (sent %d times):\ncompiled: %s\ngqlgen:   %s", mode, r.method, r.body, i+1, got, want)
			}
		}
	}
	return compiledCount(t, reader)
}

// body is a request's body of doc and vars (JSON, "" for none), and
// extensions (JSON, "" for none).
func body(doc, vars, extensions string) []byte {
	q, _ := json.Marshal(doc)
	b := `{"query":` + string(q)
	if vars != "" {
		b += `,"variables":` + vars
	}
	if extensions != "" {
		b += `,"extensions":` + extensions
	}
	return []byte(b + "}")
}

// Known documents and the requests that come closest to them: the same
// answers from the compiled path as from gqlgen, on every transport and
// in every mode, and the compiled path taken.
func TestCompiledDocumentsAnswerAsGQLGen(t *testing.T) {
	w := newDiffWorld(t)
	read := trustedDocs[0]
	count := trustedDocs[1]
	withLimit := `query Read($id: ID!, $n: Int = 2, $d: Boolean, $after: String, $min: Time) { page: listItems(entityType: "user", entityId: $id, feature: "f", limit: $n, distinct: $d, after: $after, minTimestamp: $min) { items { value timestamp expiresAt cursor __typename } endCursor } }`
	bodies := [][]byte{
		body(read, `{"id":"u1"}`, ""),
		body(read, `{"id":"u1"}`, `{"cost":true}`),
		body(read, `{"id":"nobody"}`, ""),
		body(read, `{"id":5}`, ""),                   // a number for an ID: gqlgen's
		body(read, `{}`, ""),                         // missing
		body(read, `{"id":null}`, ""),                // null for a non-null
		body(read, `{"id":"u1","extra":[1,{}]}`, ""), // what the operation does not declare
		body(read, `null`, ""),
		body(read, "", ""),
		body(read, `{"id":"`+strings.Repeat("x", 5000)+`"}`, ""),
		body(read, `{"id":"u1"}`, `{"persistedQuery":{"version":1,"sha256Hash":"00"}}`),
		[]byte(`{"Query":` + strings.TrimPrefix(string(body(read, `{"id":"u1"}`, "")), `{"query":`)),
		[]byte(`{"query":` + strings.TrimPrefix(string(body(read, `{"id":"u1"}`, "")), `{"query":`)[:20]),
		[]byte(`{"operationName":"Read","documentId":null,"extra":1,` + strings.TrimPrefix(string(body(read, `{"id":"u1"}`, "")), `{`)),
		[]byte(`{"operationName":"Other",` + strings.TrimPrefix(string(body(read, `{"id":"u1"}`, "")), `{`)),
		body(count, `{"id":"u1"}`, ""),
		body(count, `{"id":"u1","v":"v9"}`, ""),
		body(count, `{"id":"u1","v":null}`, ""),
		body(count, `{"id":"u1","v":7}`, ""),
		body(withLimit, `{"id":"u1"}`, ""),
		body(withLimit, `{"id":"u1","n":4,"d":true}`, `{"cost":true}`),
		body(withLimit, `{"id":"u1","n":"4"}`, ""),
		body(withLimit, `{"id":"u1","n":4.0}`, ""),
		body(withLimit, `{"id":"u1","n":1e2}`, ""),
		body(withLimit, `{"id":"u1","n":2147483648}`, ""),
		body(withLimit, `{"id":"u1","n":100000000000000000000}`, ""),
		body(withLimit, `{"id":"u1","n":-1}`, ""),
		body(withLimit, `{"id":"u1","n":1001}`, ""),
		body(withLimit, `{"id":"u1","n":null,"d":null,"after":null,"min":null}`, ""),
		body(withLimit, `{"id":"u1","after":"bad"}`, ""),
		body(withLimit, `{"id":"u1","min":"2020-01-01T00:00:00Z"}`, ""),
		body(withLimit, `{"id":"u1","min":"garbage"}`, ""),
		body(withLimit, `{"id":"u1","min":5}`, ""),
		body(withLimit, `{"id":"u1","d":"true"}`, ""),
		body(withLimit, `{"id":"u\u2028<&>1"}`, ""),
		body(`{ listItems(entityType: "user", entityId: "u1", feature: "f", limit: 2) { items { value } } }`, "", ""),
		body(`{ listItems(entityType: "user", entityId: "u1", feature: "f", limit: 2) { items { value } } n: listCount(entityType: "user", entityId: "u1", feature: "f") }`, "", ""),
		body(`query($no: Boolean!) { listItems(entityType: "user", entityId: "u1", feature: "f", limit: 2) { items { value @skip(if: $no) } } }`, `{"no":true}`, ""),
		body(`{ listFeatures { key } }`, "", ""),
	}
	var total int64
	for _, mode := range diffModes {
		for _, method := range []string{http.MethodPost, http.MethodGet, "WS"} {
			var reqs []diffRequest
			for _, b := range bodies {
				reqs = append(reqs, diffRequest{method: method, token: "reader", body: b})
			}
			reqs = append(reqs, diffRequest{method: method, token: "writer", body: bodies[0]})
			if mode == "trusted" {
				reqs = append(reqs, diffRequest{method: method, token: "reader", body: []byte(`{"documentId":"sha256:` + documentHash(read) + `","variables":{"id":"u1"}}`)})
			}
			n := compare(t, w, mode, reqs...)
			t.Logf("%s %s: %d operations made by the compiled path", mode, method, n)
			total += n
			if mode != "budget" && n < 10 {
				t.Errorf("%s %s: the compiled path made %d operations", mode, method, n)
			}
		}
	}
	if total == 0 {
		t.Fatal("the compiled path made no operation")
	}
}

// FuzzCompiledDocuments: listItems and listCount documents of every shape
// (planDocument), their variables sent as they are or nearly (a variable
// missing, of another type, null, out of range, huge, or one not
// declared), with defaults, over POST, GET and a WebSocket, in every
// mode: the compiled path answers as gqlgen does.
func FuzzCompiledDocuments(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3}, byte(0), byte(0))
	f.Add([]byte{2, 4, 1, 2, 5, 3, 1, 1, 1, 1, 0, 5, 9, 6, 2}, byte(1), byte(5))
	f.Add([]byte{1, 1, 0, 1, 3, 1, 0, 2, 2, 3, 3, 13, 8, 0, 4, 11, 3}, byte(6), byte(2))
	f.Add([]byte{4, 3, 2, 0, 4, 2, 1, 1, 0, 0, 7, 1, 2, 5, 6}, byte(3), byte(7))
	f.Add([]byte{15, 23, 31, 39, 47, 55, 63, 71, 79}, byte(9), byte(12))
	w := newDiffWorld(f)
	f.Fuzz(func(t *testing.T, choices []byte, transport, change byte) {
		if len(choices) > 200 {
			return
		}
		doc, vars := planDocument(choices)
		doc, varsJSON := nearly(doc, vars, change)
		method := []string{http.MethodPost, http.MethodGet, "WS"}[int(transport)%3]
		mode := diffModes[int(transport)/3%len(diffModes)]
		ext := ""
		if transport/12%2 == 1 {
			ext = `{"cost":true}`
		}
		compare(t, w, mode, diffRequest{method: method, token: "reader", body: body(doc, varsJSON, ext)})
	})
}

// nearly changes a document's variables as change says: one missing, of
// another type, null, out of range or huge, one not declared, a default
// declared for one, or none sent.
func nearly(doc string, vars map[string]any, change byte) (string, string) {
	var names []string
	for name := range vars {
		names = append(names, name)
	}
	// In order: the change must not depend on a map's order.
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	raw := map[string]any{}
	for k, v := range vars {
		raw[k] = v
	}
	if len(names) > 0 {
		name := names[int(change/16)%len(names)]
		switch change % 16 {
		case 1:
			delete(raw, name)
		case 2:
			raw[name] = 5
		case 3:
			raw[name] = "3"
		case 4:
			raw[name] = nil
		case 5:
			raw[name] = json.Number("100000000000000000000")
		case 6:
			raw[name] = json.Number("3.0")
		case 7:
			raw[name] = strings.Repeat("\u2028<", 2000)
		case 8:
			raw[name] = true
		case 9:
			raw[name] = map[string]any{"a": 1}
		case 10:
			delete(raw, name)
			// A default in the declaration, of the variable's type or not.
			for _, d := range []struct{ typ, def string }{{"Int", "2"}, {"String!", `"user"`}, {"ID!", `"u1"`}, {"Time", `"2020-01-01T00:00:00Z"`}, {"Boolean!", "true"}, {"Int", `"x"`}} {
				doc = strings.Replace(doc, "$"+name+": "+d.typ, "$"+name+": "+d.typ+" = "+d.def, 1)
			}
		}
	}
	switch change % 16 {
	case 11:
		raw["undeclared"] = []any{1, "x"}
	case 12:
		return doc, ""
	case 13:
		return doc, "null"
	}
	b, _ := json.Marshal(raw)
	return doc, string(b)
}
