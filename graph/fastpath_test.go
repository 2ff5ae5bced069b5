package graph_test

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/graph/model"
)

// model.WriteListPage and WriteListItems write exactly the bytes
// gqlgen's generated code writes, for every way a query can select ListPage
// and ListItem fields.
func TestFastMarshalMatchesGenerated(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	now := time.Now()
	for _, tc := range []struct {
		valueType string
		values    []any
	}{
		{"STRING", []any{"story1", "", "quote \" backslash \\ newline \n tab \t nul \u0000 é ✓ \u2028", "<&>"}},
		{"INT", []any{0, -1, "9007199254740993", 9007199254740991}},
		{"FLOAT", []any{1.5, math.Copysign(0, -1), 1e21, 1e-7}},
		{"BOOLEAN", []any{true, false}},
		{"BYTES", []any{"", "AAH/", "3q2+7w=="}},
		{"JSON", []any{map[string]any{"b": []any{1, "x", nil}, "a": "é"}, "s", 1, false}},
	} {
		name := strings.ToLower(tc.valueType)
		g.createFeature(name, tc.valueType, 3600)
		var items []item
		for i, v := range tc.values {
			items = append(items, item{v, ts(now.Add(-time.Duration(i) * time.Millisecond))})
		}
		g.add("u1", name, items...)
	}
	queries := []string{
		`{ listItems(entityType: "$type", entityId: "u1", feature: "string") { items { value timestamp expiresAt cursor } hasMore endCursor } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "string") { items { cursor cursor value __typename } } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "string") { items { v: value t: timestamp value } } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "string") { items { ...F ... on ListItem { expiresAt value } } } } fragment F on ListItem { cursor value }`,
		`query($with: Boolean!, $without: Boolean!) { listItems(entityType: "$type", entityId: "u1", feature: "string") {
			items { value @include(if: $with) timestamp @skip(if: $with) cursor @include(if: $without) expiresAt } } }`,
		`{ listItems(entityType: "$type", entityId: "nobody", feature: "string") { items { value } } }`,
		`{ a: listItems(entityType: "$type", entityId: "u1", feature: "int") { items { value } } b: listItems(entityType: "$type", entityId: "u1", feature: "float") { items { value } } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "boolean") { items { value timestamp } } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "bytes") { items { value cursor } } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "json") { items { value } } }`,
		`{ entities(type: "$type", entityIds: ["u1", "u2", "u1"]) { id list(feature: "json", limit: 2) { items { __typename value expiresAt } endCursor } } }`,
		`{ listItems(entityType: "$type", entityId: "u1", feature: "int", limit: 1) { __typename end: endCursor more: hasMore hasMore items { value } i2: items { cursor } } }`,
		`{ listItems(entityType: "$type", entityId: "nobody", feature: "int") { endCursor hasMore ...P } } fragment P on ListPage { items { value } endCursor }`,
		`query($with: Boolean!) { entity(type: "$type", entityId: "u1") { list(feature: "float") { items @include(if: $with) { value } hasMore @skip(if: $with) } } }`,
	}
	vars := map[string]any{"with": true, "without": false}
	raw := func(query string) []byte {
		body, _ := json.Marshal(map[string]any{"query": strings.ReplaceAll(query, "$type", g.entityType), "variables": vars})
		req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		g.h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			t.Fatalf("%s: %d %s", query, w.Code, w.Body.Bytes())
		}
		return w.Body.Bytes()
	}
	defer model.FastMarshal.Store(true)
	for _, q := range queries {
		model.FastMarshal.Store(false)
		generated := raw(q)
		model.FastMarshal.Store(true)
		fast := raw(q)
		if !bytes.Equal(fast, generated) {
			t.Errorf("%s\nfast:      %s\ngenerated: %s", q, fast, generated)
		}
	}
}
