package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// Any document with any variables gets a well-formed GraphQL response with
// codes from the fixed set, never an internal error (which is what a panic
// becomes), and a request answered without data writes nothing. A request
// that writes nothing gets the same bytes through gqlgen's own marshalers
// as through the fast path's writers.
func FuzzRequest(f *testing.F) {
	for _, seed := range []struct{ query, vars string }{
		{`{ listItems(entityType: "user", entityId: "u1", feature: "f") { items { value timestamp expiresAt cursor } hasMore endCursor } }`, ``},
		{`query($id: ID!, $min: Time, $after: String) { entity(type: "user", entityId: $id) { id list(feature: "f", minTimestamp: $min, after: $after, limit: 2) { items { value } endCursor } } }`, `{"id":"u1","min":"2020-01-01T00:00:00Z","after":null}`},
		{`mutation($v: ListValue!, $t: Time) { addListItems(list: {entityType: "user", entityId: "u2", feature: "f"}, items: [{value: $v, timestamp: $t}]) { added expired } }`, `{"v":"story9","t":"2001-09-09T01:46:40Z"}`},
		{`mutation { removeListItemsWithValue(list: {entityType: "user", entityId: "u1", feature: "f"}, value: "a") { removed } }`, ``},
		{`mutation { createListFeature(input: {entityType: "user", name: "g", valueType: JSON, ttlSeconds: 60}) { key } }`, ``},
		{`{ entities(type: "user", entityIds: ["u1", "u1", ""]) { id list(feature: "f") { hasMore } } }`, ``},
		{`{ __schema { types { name } } }`, `[]`},
		{`{`, `{"x":`},
		// Shapes that once cost without bound: alias floods, fragment
		// chains, nested introspection, deep JSON values.
		{`{ a: __typename a: __typename a: __typename a: __typename a: __typename a: __typename a: __typename a: __typename }`, ``},
		{`{ ...A } fragment A on Query { ...B ...B } fragment B on Query { ...C ...C } fragment C on Query { __typename }`, ``},
		{`{ __schema { types { ...T } } } fragment T on __Type { fields { name type { ...U } } } fragment U on __Type { fields { name } ofType { name } }`, ``},
		{`{ ... on Query { ... on Query { ... on Query { __typename } } } }`, ``},
		{`mutation($v: ListValue!) { addListItems(list: {entityType: "user", entityId: "u3", feature: "j"}, items: [{value: $v}]) { added } }`, `{"v":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`},
		{`{ a: listItems(entityType: "user", entityId: "u1", feature: "f", limit: 1000) { items { value } } b: listItems(entityType: "user", entityId: "u1", feature: "f", limit: 1000) { items { value } } }`, ``},
		{`{ listCount(entityType: "user", entityId: "u1", feature: "f", maxTimestamp: "2100-01-01T00:00:00Z") entity(type: "user", entityId: "u1") { listContains(feature: "f", values: ["a", "b"]) { value } list(feature: "f", distinct: true, limit: 3) { items { value } endCursor } } }`, ``},
		{`mutation($a: [ListAddInput!]!) { addListItemsBatch(adds: $a) { added } removeListItemsWithValues(list: {entityType: "user", entityId: "u4", feature: "f"}, values: ["x", "y"]) { removed } }`, `{"a":[{"list":{"entityType":"user","entityId":"u4","feature":"f"},"items":[{"value":"x"}]}]}`},
		{`query($y: Boolean!) { listItems(entityType: "user", entityId: "u1", feature: "f") { c: endCursor items { ... on ListItem { cursor v: value @include(if: $y) } __typename } items { timestamp } } }`, `{"y":false}`},
	} {
		f.Add(seed.query, []byte(seed.vars))
	}
	s := embeddedStore(f)
	ctx := context.Background()
	feat, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &feat, EntityID: "u1"}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("a")}}); err != nil {
		f.Fatal(err)
	}
	if _, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "j", ValueType: store.JSON, TTL: time.Hour}); err != nil {
		f.Fatal(err)
	}
	counted := &writes{Store: s}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(ctx, counted, log, nil)
	if err != nil {
		f.Fatal(err)
	}
	h, err := endpoint.New(endpoint.Config{Store: counted, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: unthrottled(), Introspection: true, Log: log})
	if err != nil {
		f.Fatal(err)
	}
	codes := map[string]bool{"BAD_REQUEST": true, "CONFLICT": true, "BAD_USER_INPUT": true, "NOT_FOUND": true, "UNAUTHENTICATED": true, "FORBIDDEN": true, "UNAVAILABLE": true, "TIMEOUT": true, "PERSISTED_QUERY_NOT_FOUND": true}

	f.Fuzz(func(t *testing.T, query string, vars []byte) {
		req := map[string]any{"query": query}
		if json.Valid(vars) {
			req["variables"] = json.RawMessage(vars)
		}
		body, _ := json.Marshal(req)
		serve := func(h http.Handler) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		before := counted.n
		w := serve(h)
		// An answer with data is marshaled, by the fast path or gqlgen's
		// marshalers, and the two must agree. One refused before it ran
		// ("data": null) is marshaled by neither, and its "Did you mean"
		// names come in gqlparser's order, which varies between ties.
		if counted.n == before && !bytes.HasSuffix(w.Body.Bytes(), []byte(`"data":null}`)) {
			if stock := serve(gqlgenMarshaling(h)); !bytes.Equal(stock.Body.Bytes(), w.Body.Bytes()) {
				t.Fatalf("fast path:\n%s\ngqlgen's marshalers:\n%s", w.Body.Bytes(), stock.Body.Bytes())
			}
		}
		var resp struct {
			Data   json.RawMessage `json:"data"`
			Errors []struct {
				Message    string            `json:"message"`
				Path       []any             `json:"path"`
				Locations  []json.RawMessage `json:"locations"`
				Extensions struct {
					Code string `json:"code"`
				} `json:"extensions"`
			} `json:"errors"`
		}
		d := json.NewDecoder(w.Body)
		d.DisallowUnknownFields()
		if err := d.Decode(&resp); err != nil {
			t.Fatalf("HTTP %d: not a GraphQL response: %v", w.Code, err)
		}
		if len(resp.Errors) == 0 && (len(resp.Data) == 0 || string(resp.Data) == "null") {
			t.Fatalf("HTTP %d: neither data nor errors", w.Code)
		}
		for _, e := range resp.Errors {
			if e.Message == "" || !codes[e.Extensions.Code] {
				t.Fatalf("error %q with code %q", e.Message, e.Extensions.Code)
			}
		}
		if (len(resp.Data) == 0 || string(resp.Data) == "null") && counted.n != before {
			t.Fatalf("a request answered without data wrote %d times", counted.n-before)
		}
	})
}
