package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// planGateways are two handlers over one embedded store holding feature
// user/f of five items for u1: with the default limits, and with a
// response byte bound that a page of a few items passes.
// cfgs change both configurations.
func planGateways(tb testing.TB, cfgs ...func(*endpoint.Config)) (roomy, tight http.Handler) {
	tb.Helper()
	s, catalog := planStore(tb)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	handler := func(l endpoint.Limits) http.Handler {
		cfg := endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: l, Log: log}
		for _, f := range cfgs {
			f(&cfg)
		}
		h, err := endpoint.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return h
	}
	small := unthrottled()
	small.MaxResponseBytes = 300
	return handler(unthrottled()), handler(small)
}

// planStore is an embedded store holding feature user/f of five items
// for u1, some of whose values JSON escapes, and its catalog.
func planStore(tb testing.TB) (store.Store, *features.Catalog) {
	tb.Helper()
	s := embeddedStore(tb)
	ctx := context.Background()
	feat, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UnixNano()
	var items []store.NewItem
	for i, v := range []string{"a", "b", "a", "quote \" \u2028 <&>", "e"} {
		items = append(items, store.NewItem{Timestamp: now - int64(i)*int64(time.Second), Value: []byte(v)})
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &feat, EntityID: "u1"}, items); err != nil {
		tb.Fatal(err)
	}
	catalog, err := features.New(ctx, s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s, catalog
}

// planDocument builds a query from choices: listItems or listCount at the
// root plainly,
// aliased, in an inline or named fragment, beside fields that @skip and
// @include remove or keep, with literal or variable arguments that are
// valid, unknown, out of range or badly formed, and any selection of
// ListPage and ListItem fields (selection, in fastpath_test.go). It
// returns the document and its variables.
func planDocument(choices []byte) (string, map[string]any) {
	next := func() int {
		if len(choices) == 0 {
			return 0
		}
		c := choices[0]
		choices = choices[1:]
		return int(c)
	}
	vars := map[string]any{}
	var decls []string
	variable := func(name, typ string, v any) string {
		vars[name] = v
		decls = append(decls, "$"+name+": "+typ)
		return "$" + name
	}
	var args []string
	// The first option, valid, most of the time: an operation that
	// fails one way is as good as one that fails many.
	arg := func(name string, options ...string) {
		o := options[0]
		if c := next(); c%8 == 7 {
			o = options[c/8%len(options)]
		}
		if o != "" {
			args = append(args, name+": "+o)
		}
	}
	arg("entityType", `"user"`, `"User!"`, variable("t", "String!", "user"))
	arg("entityId", `"u1"`, `"nobody"`, `""`, `5`, variable("id", "ID!", "u1"))
	arg("feature", `"f"`, `"nope"`, `"F"`)
	arg("version", "", `""`, `"v2"`)
	arg("limit", "", "2", "0", "-1", "2", "1001", variable("limit", "Int", 3), variable("nolimit", "Int", nil))
	arg("minTimestamp", "", `"2020-01-01T00:00:00Z"`, `"garbage"`, variable("min", "Time", nil))
	arg("maxTimestamp", "", `"2100-01-01T00:00:00Z"`, variable("max", "Time", "1970-01-01T00:00:00Z"))
	arg("after", "", `"bad"`, "null")
	arg("distinct", "", "true", "false")
	if !strings.Contains(strings.Join(args, " "), "entityType") {
		args = append(args, `entityType: "user"`)
	}
	if !strings.Contains(strings.Join(args, " "), "entityId") {
		args = append(args, `entityId: "u1"`)
	}
	if !strings.Contains(strings.Join(args, " "), "feature") {
		args = append(args, `feature: "f"`)
	}
	field := "listItems(" + strings.Join(args, ", ") + ") " + selection(&choices, pageFields, 0)
	if next()%4 == 3 {
		var counted []string // listCount has no limit, after or distinct
		for _, a := range args {
			if !strings.HasPrefix(a, "limit:") && !strings.HasPrefix(a, "after:") && !strings.HasPrefix(a, "distinct:") {
				counted = append(counted, a)
			}
		}
		field = "listCount(" + strings.Join(counted, ", ") + ")"
	}
	fragments := ""
	switch next() % 7 {
	case 1:
		field = "page: " + field
	case 2:
		field = "... on Query { " + field + " }"
	case 3:
		field, fragments = "...Q", " fragment Q on Query { "+field+" }"
	case 4:
		field += " __typename @include(if: $no)"
	case 5:
		field += " __typename"
	case 6:
		field += " n: listCount(entityType: \"user\", entityId: \"u1\", feature: \"f\")"
	}
	// selection's directives name $yes and $no; declare them only when
	// used, as GraphQL requires of every variable.
	doc := field + fragments
	if strings.Contains(doc, "$yes") {
		variable("yes", "Boolean!", true)
	}
	if strings.Contains(doc, "$no") {
		variable("no", "Boolean!", false)
	}
	for name := range vars {
		if !strings.Contains(doc, "$"+name) {
			delete(vars, name)
			for i, d := range decls {
				if strings.HasPrefix(d, "$"+name+":") {
					decls = append(decls[:i], decls[i+1:]...)
					break
				}
			}
		}
	}
	op := "query"
	if len(decls) > 0 {
		op += "(" + strings.Join(decls, ", ") + ")"
	}
	if fragments != "" {
		return op + " { " + field + " }" + fragments, vars
	}
	return op + " { " + field + " }", vars
}

// planRequest is a request carrying a document, by POST or GET, asking
// for extensions.cost or not.
func planRequest(method, doc string, vars map[string]any, cost bool) *http.Request {
	req := map[string]any{"query": doc, "variables": vars}
	if cost {
		req["extensions"] = map[string]any{"cost": true}
	}
	if method == http.MethodGet {
		q := url.Values{"query": {doc}}
		v, _ := json.Marshal(vars)
		q.Set("variables", string(v))
		if cost {
			q.Set("extensions", `{"cost":true}`)
		}
		return httptest.NewRequest(http.MethodGet, "http://localhost/graphql?"+q.Encode(), nil)
	}
	body, _ := json.Marshal(req)
	r := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// FuzzCompiledPlan: every listItems or listCount query, whatever its
// shape, arguments, selection, transport (POST or GET), response bound and
// extensions, gets the same status, headers and bytes from the gateway,
// which runs the ones a plan handles on it, as from gqlgen's executor and
// marshalers: data and errors alike.
func FuzzCompiledPlan(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3})
	f.Add([]byte{2, 4, 1, 2, 5, 3, 1, 1, 1, 1, 0, 5, 9, 6, 2})
	f.Add([]byte{1, 1, 0, 1, 3, 1, 0, 2, 2, 3, 3, 13, 8, 0, 4, 11, 3})
	f.Add([]byte{4, 3, 2, 0, 4, 2, 1, 1, 0, 0, 7, 1, 2, 5, 6})
	f.Add([]byte{0, 0, 1, 2, 6, 0, 0, 0, 0, 2, 0, 1, 2, 3, 4})
	roomy, tight := planGateways(f)
	f.Fuzz(func(t *testing.T, choices []byte) {
		if len(choices) > 200 {
			return
		}
		var transport byte
		if len(choices) > 0 {
			transport, choices = choices[len(choices)-1], choices[:len(choices)-1]
		}
		doc, vars := planDocument(choices)
		method := map[bool]string{false: http.MethodPost, true: http.MethodGet}[transport%2 == 1]
		h := map[bool]http.Handler{false: roomy, true: tight}[transport/2%2 == 1]
		cost := transport/4%2 == 1
		serve := func(h http.Handler) *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, planRequest(method, doc, vars, cost))
			return w
		}
		planned, stock := serve(h), serve(gqlgenMarshaling(h))
		if planned.Code != stock.Code {
			t.Fatalf("%s %s %v: status %d, gqlgen's %d", method, doc, vars, planned.Code, stock.Code)
		}
		if p, s := fmt.Sprint(planned.Header()), fmt.Sprint(stock.Header()); p != s {
			t.Fatalf("%s %s %v: headers\n%s\ngqlgen's\n%s", method, doc, vars, p, s)
		}
		p, st := planned.Body.Bytes(), stock.Body.Bytes()
		if strings.Contains(doc, " n: listCount") {
			// Two root fields: no plan, and gqlgen runs them at once, so
			// which one crosses the response bound first, and is named by
			// the error's path, is a race on either side.
			p, st = errorPath.ReplaceAll(p, nil), errorPath.ReplaceAll(st, nil)
		}
		if !bytes.Equal(p, st) {
			t.Fatalf("%s %s %v:\nplan:   %s\ngqlgen: %s", method, doc, vars, planned.Body.Bytes(), stock.Body.Bytes())
		}
	})
}

// errorPath is an error's path in an answer.
var errorPath = regexp.MustCompile(`"path":\[[^\]]*\],?`)

// The plans answer as gqlgen does on every transport (POST, GET and a
// WebSocket): a page, a page that errs (NOT_FOUND; over the response byte
// bound), a count, and a count that errs.
func TestCompiledPlanOnEveryTransport(t *testing.T) {
	roomy, tight := planGateways(t)
	docs := []struct {
		doc  string
		h    http.Handler
		code string // of the error it must get, "" for none
	}{
		{`{ listItems(entityType: "user", entityId: "u1", feature: "f", limit: 3) { items { value cursor } hasMore endCursor } }`, roomy, ""},
		{`{ p: listItems(entityType: "user", entityId: "u1", feature: "nope") { hasMore } }`, roomy, "NOT_FOUND"},
		{`{ listItems(entityType: "user", entityId: "u1", feature: "f") { items { value timestamp expiresAt cursor } } }`, tight, "BAD_USER_INPUT"},
		{`{ c: listCount(entityType: "user", entityId: "u1", feature: "f") }`, roomy, ""},
		{`{ listCount(entityType: "user", entityId: "u1", feature: "f", version: "v9") }`, roomy, "NOT_FOUND"},
	}
	for _, d := range docs {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			planned, stock := httptest.NewRecorder(), httptest.NewRecorder()
			d.h.ServeHTTP(planned, planRequest(method, d.doc, nil, true))
			gqlgenMarshaling(d.h).ServeHTTP(stock, planRequest(method, d.doc, nil, true))
			if planned.Code != stock.Code || !bytes.Equal(planned.Body.Bytes(), stock.Body.Bytes()) ||
				fmt.Sprint(planned.Header()) != fmt.Sprint(stock.Header()) {
				t.Errorf("%s %s:\nplan:   %d %v %s\ngqlgen: %d %v %s", method, d.doc, planned.Code, planned.Header(), planned.Body.Bytes(), stock.Code, stock.Header(), stock.Body.Bytes())
			}
			if d.code != "" && !strings.Contains(planned.Body.String(), `"code":"`+d.code+`"`) {
				t.Errorf("%s %s: %s, want %s", method, d.doc, planned.Body.Bytes(), d.code)
			}
		}
		planned, stock := httptest.NewServer(d.h), httptest.NewServer(gqlgenMarshaling(d.h))
		answers := make([]string, 2)
		for i, srv := range []*httptest.Server{planned, stock} {
			c, _, err := dial(t, srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
				t.Fatalf("init: %+v %v", m, err)
			}
			next, errs := c.query("1", d.doc)
			answers[i] = string(next) + errs
		}
		planned.Close()
		stock.Close()
		if answers[0] != answers[1] {
			t.Errorf("WebSocket %s:\nplan:   %s\ngqlgen: %s", d.doc, answers[0], answers[1])
		}
	}
}

// The plans are the path a listItems and a listCount query take: each
// allocates less than gqlgen's execution of the same query with the same
// page writer.
func TestCompiledPlanIsTaken(t *testing.T) {
	roomy, _ := planGateways(t)
	withoutPlans := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		roomy.ServeHTTP(w, r.WithContext(graph.WithoutPlans(r.Context())))
	})
	for _, doc := range []string{
		`query($id: ID!) { listItems(entityType: "user", entityId: $id, feature: "f") { items { value timestamp expiresAt cursor } hasMore endCursor } }`,
		`query($id: ID!) { listCount(entityType: "user", entityId: $id, feature: "f") }`,
	} {
		serve := func(h http.Handler) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, planRequest(http.MethodPost, doc, map[string]any{"id": "u1"}, false))
			if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"errors"`) {
				t.Fatalf("%d %s", w.Code, w.Body.Bytes())
			}
		}
		planned := testing.AllocsPerRun(50, func() { serve(roomy) })
		executed := testing.AllocsPerRun(50, func() { serve(withoutPlans) })
		t.Logf("%s: %.0f allocations through the plan, %.0f through gqlgen's executor", doc, planned, executed)
		if planned > executed-30 {
			t.Errorf("%s: the plan is not taken: %.0f allocations, %.0f without it", doc, planned, executed)
		}
	}
}

// Trusted documents hold for the plans: a listItems document of the
// manifest runs by its documentId over POST, GET and a WebSocket, through
// the plan, as gqlgen answers it; another listItems text is refused
// QUERY_NOT_IN_SAFELIST before any plan, as gqlgen's path refuses it.
func TestCompiledPlanRunsTrustedDocumentsOnly(t *testing.T) {
	const read = `query Read { listItems(entityType: "user", entityId: "u1", feature: "f", limit: 2) { items { value cursor } endCursor } }`
	const other = `query Other { listItems(entityType: "user", entityId: "u1", feature: "f", limit: 3) { items { value } } }`
	hash := documentHash(read)
	manifest := writeManifest(t, read)
	docs, err := documents.New(manifest, documents.Enforce, slog.New(slog.DiscardHandler), metricnoop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.New(auth.Config{APIKeys: []string{keyLine("app", "app", "lists:read")}})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := planGateways(t, func(c *endpoint.Config) { c.Documents, c.Auth = docs, authn })
	answer := func(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
		r.Header.Set("Authorization", "Bearer app")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	byID, _ := json.Marshal(map[string]any{"documentId": "sha256:" + hash})
	otherText, _ := json.Marshal(map[string]any{"query": other})
	for _, c := range []struct {
		what string
		req  func() *http.Request
		want string
	}{
		{"POST by documentId", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(byID))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, `"listItems"`},
		{"GET by documentId", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "http://localhost/graphql?documentId="+url.QueryEscape("sha256:"+hash), nil)
		}, `"listItems"`},
		{"POST of another text", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(otherText))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, "QUERY_NOT_IN_SAFELIST"},
	} {
		planned, stock := answer(h, c.req()), answer(gqlgenMarshaling(h), c.req())
		if !strings.Contains(planned.Body.String(), c.want) || planned.Code != stock.Code || planned.Body.String() != stock.Body.String() {
			t.Errorf("%s:\nplan:   %d %s\ngqlgen: %d %s", c.what, planned.Code, planned.Body.Bytes(), stock.Code, stock.Body.Bytes())
		}
	}
	answers := make([]string, 2)
	for i, handler := range []http.Handler{h, gqlgenMarshaling(h)} {
		srv := httptest.NewServer(handler)
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		c.init("app")
		c.send(wsMessage{ID: "1", Type: "subscribe", Payload: json.RawMessage(byID)})
		m, err := c.next()
		if err != nil || m.Type != "next" || !strings.Contains(string(m.Payload), `"listItems"`) {
			t.Fatalf("a subscribe by documentId: %+v %v", m, err)
		}
		answers[i] = string(m.Payload)
		c.next() // complete
		if _, errs := c.query("2", other); !strings.Contains(errs, "QUERY_NOT_IN_SAFELIST") {
			t.Errorf("a subscribe of another text: %s", errs)
		}
		srv.Close()
	}
	if answers[0] != answers[1] {
		t.Errorf("WebSocket by documentId:\nplan:   %s\ngqlgen: %s", answers[0], answers[1])
	}
}
