package graph_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/guards"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

func keyLine(name, key, scopes string) string {
	sum := sha256.Sum256([]byte(key))
	return name + " " + hex.EncodeToString(sum[:]) + " " + scopes
}

// embeddedStore opens an embedded store in a folder of the test's own,
// closed when the test ends.
func embeddedStore(tb testing.TB) *embedded.Store {
	tb.Helper()
	s, err := embedded.Open(embedded.Config{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// writes counts the store's writes that succeeded.
type writes struct {
	store.Store
	n int
}

func (w *writes) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	r, err := w.Store.AddItems(ctx, l, items)
	if err == nil {
		w.n++
	}
	return r, err
}

func (w *writes) CreateFeature(ctx context.Context, f store.Feature) (store.Feature, error) {
	r, err := w.Store.CreateFeature(ctx, f)
	if err == nil {
		w.n++
	}
	return r, err
}

func (w *writes) RemoveValues(ctx context.Context, l store.List, vs [][]byte, win store.Window, maxRows int) (int, error) {
	n, err := w.Store.RemoveValues(ctx, l, vs, win, maxRows)
	if err == nil {
		w.n++
	}
	return n, err
}

func (w *writes) DeleteFeature(ctx context.Context, entityType, name, version string) (bool, error) {
	ok, err := w.Store.DeleteFeature(ctx, entityType, name, version)
	if err == nil {
		w.n++
	}
	return ok, err
}

func (w *writes) RemoveAll(ctx context.Context, l store.List) error {
	err := w.Store.RemoveAll(ctx, l)
	if err == nil {
		w.n++
	}
	return err
}

// Scopes are checked for every root field before anything runs: a token
// without the scope of one field of an operation runs none of it.
func TestScopes(t *testing.T) {
	authn, err := auth.New(auth.Config{APIKeys: []string{
		keyLine("reader", "r", "lists:read"),
		keyLine("writer", "w", "lists:read,lists:write"),
		keyLine("admin", "a", "features:admin"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := &writes{Store: embeddedStore(t)}
	g := newGateway(t, s, func(c *endpoint.Config) { c.Auth = authn })

	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	g.token = "w"
	g.add("u1", "f", item{Value: "v"})
	base := s.n

	for _, tc := range []struct {
		name, token, query, code string
		status                   int
	}{
		{"no token", "", `{ listItems(entityType: "$type", entityId: "u1", feature: "f") { hasMore } }`, "UNAUTHENTICATED", http.StatusUnauthorized},
		{"a wrong token", "nope", `{ listFeatures { key } }`, "UNAUTHENTICATED", http.StatusUnauthorized},
		{"a reader adding", "r", `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "x"}]) { added } }`, "FORBIDDEN", http.StatusOK},
		{"a writer creating a feature", "w", `mutation { createListFeature(input: {entityType: "$type", name: "g", valueType: INT, ttlSeconds: 60}) { key } }`, "FORBIDDEN", http.StatusOK},
		{"an admin reading", "a", `{ listFeatures { key } }`, "FORBIDDEN", http.StatusOK},
		{"one forbidden field of two", "w", `mutation { removeAllListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}) createListFeature(input: {entityType: "$type", name: "g", valueType: INT, ttlSeconds: 60}) { key } }`, "FORBIDDEN", http.StatusOK},
		{"a forbidden field behind a fragment", "w", `mutation { ...M } fragment M on Mutation { deleteListFeature(entityType: "$type", name: "f") }`, "FORBIDDEN", http.StatusOK},
		{"a forbidden field behind an alias", "r", `mutation { read: removeAllListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}) }`, "FORBIDDEN", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g.token = tc.token
			data, errs := g.do(tc.query, nil)
			if len(errs) != 1 || errs[0].Extensions.Code != tc.code || g.lastStatus != tc.status || data != nil {
				t.Fatalf("status %d, data %v, errors %+v; want %d %s", g.lastStatus, data, errs, tc.status, tc.code)
			}
			if s.n != base {
				t.Fatalf("%d writes happened", s.n-base)
			}
		})
	}
	g.token = "r"
	equal(t, "values read with lists:read", values(g.listItems("u1", "f", nil)), []any{"v"})
	var intro struct {
		Schema struct{ QueryType struct{ Name string } } `json:"__schema"`
	}
	g.ok(`{ __schema { queryType { name } } }`, nil, &intro)
	equal(t, "introspection", intro.Schema.QueryType.Name, "Query")
	g.token = "w"
	g.ok(`mutation { removeAllListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}) }`, nil, nil)
}

// Every limit is a clear BAD_USER_INPUT (or UNAVAILABLE for the deadline),
// and nothing past it is written.
func TestLimits(t *testing.T) {
	s := &writes{Store: &slowStore{Store: embeddedStore(t)}}
	lim := endpoint.DefaultLimits
	lim.MaxListLimit, lim.MaxEntities, lim.MaxDepth, lim.MaxComplexity, lim.MaxBodyBytes, lim.RequestTimeout = 50, 5, 3, 2000, 4096, 300*time.Millisecond
	g := newGateway(t, s, func(c *endpoint.Config) { c.Limits = lim })
	g.createFeature("f", "STRING", 3600)
	base := s.n
	for _, tc := range []struct{ name, query, code, contains string }{
		{"limit", `{ listItems(entityType: "$type", entityId: "u1", feature: "f", limit: 51) { hasMore } }`, "BAD_USER_INPUT", "limit 51"},
		{"entities", `{ entities(type: "$type", entityIds: ["1","2","3","4","5","6"]) { id } }`, "BAD_USER_INPUT", "entityIds"},
		{"depth within the limit", `{ entities(type: "$type", entityIds: ["1"]) { list(feature: "f", limit: 10) { ... on ListPage { hasMore } } } __schema { types { fields { type { ofType { ofType { name } } } } } } }`, "", ""},
		{"depth", `{ a: entity(type: "$type", entityId: "1") { id } b: entity(type: "$type", entityId: "1") { ...E } } fragment E on Entity { list(feature: "f", limit: 10) { items { value } } }`, "BAD_USER_INPUT", "nested 4 deep"},
		{"complexity", "{" + strings.Repeat(`l$i: listItems(entityType: "$type", entityId: "u1", feature: "f", limit: 50) { hasMore endCursor __typename } `, 15) + "}", "BAD_USER_INPUT", "complexity"},
		{"slow store", `{ listItems(entityType: "$type", entityId: "slow", feature: "f", limit: 10) { hasMore } }`, "TIMEOUT", "--request-timeout"},
	} {
		for i := 0; strings.Contains(tc.query, "$i"); i++ {
			tc.query = strings.Replace(tc.query, "$i", fmt.Sprint(i), 1)
		}
		if tc.code == "" {
			g.ok(tc.query, nil, nil) // within the limits
			continue
		}
		began := time.Now()
		g.fails(tc.query, nil, tc.code, tc.contains)
		if took := time.Since(began); took > 2*time.Second {
			t.Fatalf("%s: took %v", tc.name, took)
		}
	}

	// A body over the limit is refused before it is read.
	big := fmt.Sprintf(`{"query":"mutation { addListItems(list: {entityType: \"%s\", entityId: \"u1\", feature: \"f\"}, items: [%s]) { added } }"}`,
		g.entityType, strings.TrimSuffix(strings.Repeat(`{value: \"0123456789\"},`, 300), ","))
	req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader([]byte(big)))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "larger than 4096 bytes") || !strings.Contains(w.Body.String(), "BAD_USER_INPUT") {
		t.Fatalf("big body: %d %s", w.Code, w.Body)
	}
	if s.n != base {
		t.Fatalf("%d writes happened", s.n-base)
	}
}

// slowStore answers reads of the entity "slow" only when its context ends.
type slowStore struct{ store.Store }

func (s *slowStore) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	if l.EntityID == "slow" {
		<-ctx.Done()
		return store.Page{}, fmt.Errorf("%w: %w", errkind.Unavailable, ctx.Err())
	}
	return s.Store.Items(ctx, l, r)
}

// A schema field without @scope cannot ship: the handler refuses to start.
func TestEveryRootFieldNeedsAScope(t *testing.T) {
	// The real schema passes (newGateway would fail otherwise); a schema with
	// an unguarded field does not.
	if err := guards.CheckScopes(`type Query { a: Int @scope(requires: "lists:read") b: Int }`); err == nil || !strings.Contains(err.Error(), "Query.b") {
		t.Fatalf("err = %v", err)
	}
	if err := guards.CheckScopes(`type Query { a: Int @scope(requires: "lists:everything") }`); err == nil {
		t.Fatal("an unknown scope was accepted")
	}
	if err := guards.CheckScopes(`type Query { a: Int @scope(requires: "lists:read") } type Mutation { m: Int @scope(requires: "lists:write") }`); err != nil {
		t.Fatal(err)
	}
}

// Items per add and value size are the store's limits, configured by the
// server's flags; past them an add is refused whole.
func TestAddLimits(t *testing.T) {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Limits: store.Limits{MaxAddItems: 3, MaxAddBytes: 1 << 20, MaxValueBytes: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g := newGateway(t, s)
	g.createFeature("f", "STRING", 3600)
	g.fails(`mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "a"}, {value: "b"}, {value: "c"}, {value: "d"}]) { added } }`, nil, "BAD_USER_INPUT", "4 items, more than the 3")
	g.fails(`mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "a"}, {value: "123456789"}]) { added } }`, nil, "BAD_USER_INPUT", "value of 9 bytes")
	g.fails(`mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "a", timestamp: "2200-01-01T00:00:00Z"}]) { added } }`, nil, "BAD_USER_INPUT", "in the future")
	g.fails(`mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "a", timestamp: "1969-12-31T23:59:59Z"}]) { added } }`, nil, "BAD_USER_INPUT", "before 1970")
	equal(t, "values", values(g.listItems("u1", "f", nil)), []any{})
}
