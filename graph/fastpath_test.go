package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// model.WriteListPage writes exactly the bytes gqlgen's generated code
// writes, for every way a query can select ListPage and ListItem fields.
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
		`{ entity(type: "$type", entityId: "u1") { listContains(feature: "string", values: ["story1", "absent", "<&>", "story1"]) { value cursor __typename t: timestamp expiresAt } } }`,
		`{ entity(type: "$type", entityId: "u1") { a: listContains(feature: "json", values: [1, "s"]) { value } b: listContains(feature: "int", values: [0]) { ...on ListItem { value v: value } } } }`,
		`{ entities(type: "$type", entityIds: ["u1", "nobody"]) { listContains(feature: "bytes", values: ["AAH/", "3q2+7w=="]) { value timestamp } } }`,
	}
	vars := map[string]any{"with": true, "without": false}
	raw := func(query string, h http.Handler) []byte {
		body, _ := json.Marshal(map[string]any{"query": strings.ReplaceAll(query, "$type", g.entityType), "variables": vars})
		req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			t.Fatalf("%s: %d %s", query, w.Code, w.Body.Bytes())
		}
		return w.Body.Bytes()
	}
	stock := gqlgenMarshaling(g.h)
	for _, q := range queries {
		generated := raw(q, stock)
		fast := raw(q, g.h)
		if !bytes.Equal(fast, generated) {
			t.Errorf("%s\nfast:      %s\ngenerated: %s", q, fast, generated)
		}
	}

	// And the fast path is the one taken: gqlgen's allocates for every
	// item and field.
	var items []item
	for i := range 100 {
		items = append(items, item{fmt.Sprint("s", i), ts(now.Add(-time.Duration(i) * time.Millisecond))})
	}
	g.add("u100", "string", items...)
	page := `{ listItems(entityType: "$type", entityId: "u100", feature: "string") { items { value timestamp expiresAt cursor } } }`
	allocs := func(h http.Handler) float64 { return testing.AllocsPerRun(20, func() { raw(page, h) }) }
	fast, generated := allocs(g.h), allocs(stock)
	t.Logf("a 100-item page: %.0f allocations, %.0f through gqlgen's marshalers", fast, generated)
	if fast > generated/3 {
		t.Error("the fast path is not taken")
	}
}

// gqlgenMarshaling is h with gqlgen's own marshalers in place of the
// fast path's writers.
func gqlgenMarshaling(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(model.WithGQLGenMarshaling(r.Context())))
	})
}

// Random selections of ListPage and ListItem fields, in any order and
// number, with aliases, __typename, inline fragments, @include and @skip,
// in a page and in listContains's [ListItem], are written byte for byte as
// gqlgen writes them.
func FuzzFastPathSelection(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4})
	f.Add([]byte{0, 0, 1, 1, 7, 5, 6, 2, 0, 3, 9, 9})
	f.Add([]byte{6, 0, 5, 1, 2, 3, 13, 8, 0, 4, 11})
	f.Add([]byte{1, 0, 1, 2, 3, 4, 9, 7, 12})
	s := embeddedStore(f)
	ctx := context.Background()
	feat, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.JSON, TTL: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now().UnixNano()
	var items []store.NewItem
	for i, v := range []string{`"a"`, `{"k":[1,"x\u2028",null]}`, `1.5`, `"quote \" and \\"`, `true`} {
		items = append(items, store.NewItem{Timestamp: now - int64(i), Value: []byte(v)})
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &feat, EntityID: "u1"}, items); err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(ctx, s, log, nil)
	if err != nil {
		f.Fatal(err)
	}
	h, err := endpoint.New(endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: unthrottled(), Log: log})
	if err != nil {
		f.Fatal(err)
	}
	stock := gqlgenMarshaling(h)
	f.Fuzz(func(t *testing.T, choices []byte) {
		if len(choices) > 200 {
			return
		}
		query := `query($yes: Boolean!, $no: Boolean!) { y: __typename @include(if: $yes) n: __typename @skip(if: $no) `
		if len(choices) > 0 && choices[0]%2 == 1 {
			query += `entity(type: "user", entityId: "u1") { listContains(feature: "f", values: ["a", 2, true, "z"]) ` + selection(&choices, itemFields, 1) + ` } }`
		} else {
			query += `listItems(entityType: "user", entityId: "u1", feature: "f", limit: 4) ` + selection(&choices, pageFields, 0) + ` }`
		}
		body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]bool{"yes": true, "no": false}})
		serve := func(h http.Handler) []byte {
			r := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Body.Bytes()
		}
		fast, generated := serve(h), serve(stock)
		if !bytes.Equal(fast, generated) {
			t.Fatalf("%s\nfast:      %s\ngenerated: %s", query, fast, generated)
		}
		if bytes.Contains(fast, []byte(`"errors"`)) {
			t.Fatalf("%s: %s", query, fast) // every selection built is valid
		}
	})
}

var (
	pageFields = []string{"items", "hasMore", "endCursor", "__typename"}
	itemFields = []string{"value", "timestamp", "expiresAt", "cursor", "__typename"}
)

// selection builds a selection set of fields (ListPage's or ListItem's)
// from choices, which it consumes. An alias always names the same field,
// so selections merge as GraphQL allows.
func selection(choices *[]byte, fields []string, depth int) string {
	next := func() int {
		if len(*choices) == 0 {
			return 0
		}
		c := (*choices)[0]
		*choices = (*choices)[1:]
		return int(c)
	}
	var b strings.Builder
	b.WriteString("{")
	typeName := map[bool]string{true: "ListPage", false: "ListItem"}[fields[0] == "items"]
	for n := 0; n == 0 || (len(*choices) > 0 && n < 12); n++ {
		c := next()
		name := fields[c%len(fields)]
		form := c / len(fields) % 4 // plain, aliased, in an inline fragment, or twice
		if form == 2 {
			b.WriteString(" ... on " + typeName + " {")
		}
		if form == 1 {
			b.WriteString(" " + name[:1] + name + ":") // one alias per field
		}
		b.WriteString(" " + name)
		switch next() % 5 {
		case 1:
			b.WriteString(" @include(if: $yes)")
		case 2:
			b.WriteString(" @skip(if: $no)")
		case 3:
			b.WriteString(" @include(if: $no)")
		}
		if name == "items" {
			if depth > 0 {
				b.WriteString(" { value }")
			} else {
				b.WriteString(" " + selection(choices, itemFields, depth+1))
			}
		}
		if form == 2 {
			b.WriteString(" }")
		}
		if form == 3 {
			b.WriteString(" " + name)
			if name == "items" {
				b.WriteString(" { cursor }")
			}
		}
	}
	b.WriteString(" }")
	return b.String()
}
