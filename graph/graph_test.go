package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// backends are the stores every end-to-end test runs on.
var backends = []struct {
	name string
	open func(t *testing.T) store.Store
}{
	{"embedded", func(t *testing.T) store.Store { return embeddedStore(t) }},
	{"cassandra", func(t *testing.T) store.Store {
		return cqltest.Open(t, cqltest.Config(t))
	}},
}

// eachBackend runs test on every store, in parallel.
func eachBackend(t *testing.T, test func(t *testing.T, s store.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.open(t))
		})
	}
}

var typeSeq atomic.Int64

// gateway is the real GraphQL handler on a store, driven over HTTP, with
// an entity type of the test's own.
type gateway struct {
	t          *testing.T
	h          http.Handler
	entityType string
	token      string // sent as a bearer token when set
	lastStatus int
}

func newGateway(t *testing.T, s store.Store, cfgs ...func(*endpoint.Config)) *gateway {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(context.Background(), s, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: endpoint.DefaultLimits, Introspection: true, Log: log}
	for _, f := range cfgs {
		f(&cfg)
	}
	h, err := endpoint.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Its subscriptions' pollers stop before the store closes.
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	return &gateway{t: t, h: h, entityType: fmt.Sprintf("e%d_%d", time.Now().UnixNano()%1e9, typeSeq.Add(1))}
}

type gqlError struct {
	Message    string
	Path       []any
	Extensions struct{ Code string }
}

// do POSTs a request; $type in the query is the test's entity type.
// Numbers in the response are json.Number, so 64-bit integers stay exact.
func (g *gateway) do(query string, vars map[string]any) (map[string]any, []gqlError) {
	g.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": strings.ReplaceAll(query, "$type", g.entityType), "variables": vars})
	req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, req)
	g.lastStatus = w.Code
	var resp struct {
		Data   map[string]any
		Errors []gqlError
	}
	d := json.NewDecoder(w.Body)
	d.UseNumber()
	if err := d.Decode(&resp); err != nil {
		g.t.Fatalf("HTTP %d, decoding the response: %v", w.Code, err)
	}
	if want := http.StatusOK; len(resp.Errors) == 0 && w.Code != want {
		g.t.Fatalf("HTTP %d without errors", w.Code)
	}
	return resp.Data, resp.Errors
}

// post POSTs body as JSON with token, and returns the whole answer
// (status, headers, body), for tests of what surrounds the data.
func (g *gateway) post(token string, body map[string]any) *httptest.ResponseRecorder {
	b, _ := json.Marshal(body)
	req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, req)
	return w
}

// ok runs a request that must succeed and decodes its data into out.
func (g *gateway) ok(query string, vars map[string]any, out any) {
	g.t.Helper()
	data, errs := g.do(query, vars)
	if len(errs) > 0 {
		g.t.Fatalf("errors: %+v", errs)
	}
	if out != nil {
		b, _ := json.Marshal(data)
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(out); err != nil {
			g.t.Fatalf("decoding %s: %v", b, err)
		}
	}
}

// fails runs a request that must fail with one error of code.
func (g *gateway) fails(query string, vars map[string]any, code, contains string) gqlError {
	g.t.Helper()
	_, errs := g.do(query, vars)
	if len(errs) != 1 || errs[0].Extensions.Code != code || !strings.Contains(errs[0].Message, contains) {
		g.t.Fatalf("errors = %+v; want one %s containing %q", errs, code, contains)
	}
	return errs[0]
}

// createFeature creates a live feature: the tests of this package
// subscribe to most of the features they create.
func (g *gateway) createFeature(name, valueType string, ttlSeconds int) {
	g.t.Helper()
	g.ok(`mutation($name: String!, $vt: ValueType!, $ttl: Int!) {
		createListFeature(input: {entityType: "$type", name: $name, valueType: $vt, ttlSeconds: $ttl, live: true}) { key }
	}`, map[string]any{"name": name, "vt": valueType, "ttl": ttlSeconds}, nil)
}

type item struct {
	Value     any
	Timestamp string
}

func (g *gateway) add(entityID, feature string, items ...item) (added, expired int) {
	g.t.Helper()
	var in []map[string]any
	for _, it := range items {
		m := map[string]any{"value": it.Value}
		if it.Timestamp != "" {
			m["timestamp"] = it.Timestamp
		}
		in = append(in, m)
	}
	var out struct{ AddListItems struct{ Added, Expired int } }
	g.ok(`mutation($id: ID!, $f: String!, $items: [ListItemInput!]!) {
		addListItems(list: {entityType: "$type", entityId: $id, feature: $f}, items: $items) { added expired }
	}`, map[string]any{"id": entityID, "f": feature, "items": in}, &out)
	return out.AddListItems.Added, out.AddListItems.Expired
}

type listItem struct {
	Value     any
	Timestamp string
	ExpiresAt string
	Cursor    string
}

type listPage struct {
	Items     []listItem
	HasMore   bool
	EndCursor *string
}

func (g *gateway) listItems(entityID, feature string, args map[string]any) listPage {
	g.t.Helper()
	vars := map[string]any{"id": entityID, "f": feature}
	for k, v := range args {
		vars[k] = v
	}
	var out struct{ ListItems listPage }
	g.ok(`query($id: ID!, $f: String!, $min: Time, $limit: Int = 100, $after: String) {
		listItems(entityType: "$type", entityId: $id, feature: $f, minTimestamp: $min, limit: $limit, after: $after) {
			items { value timestamp expiresAt cursor } hasMore endCursor
		}
	}`, vars, &out)
	return out.ListItems
}

func values(p listPage) []any {
	out := []any{}
	for _, it := range p.Items {
		out = append(out, it.Value)
	}
	return out
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("%s = %s, want %s", what, gb, wb)
	}
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// countingStore counts list reads and how many run at once, and can fail
// or panic for chosen entity ids.
type countingStore struct {
	store.Store
	calls, inFlight, maxInFlight atomic.Int64
	fail                         map[string]error
	panicFor                     string
}

func (s *countingStore) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	s.calls.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if l.EntityID == s.panicFor {
		panic("boom: " + l.EntityID)
	}
	time.Sleep(2 * time.Millisecond) // long enough for reads to overlap
	if err := s.fail[l.EntityID]; err != nil {
		return store.Page{}, err
	}
	return s.Store.Items(ctx, l, r)
}

var errStoreDown = fmt.Errorf("%w: gocql: no hosts available in the pool (10.0.0.1:9042)", errkind.Unavailable)

func TestFeatures(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		var created struct {
			CreateListFeature struct {
				Key, EntityType, Name, Version, ValueType string
				TTLSeconds                                int
				Description                               *string
				CreatedAt                                 string
			}
		}
		g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "reading_history", valueType: JSON, ttlSeconds: 2592000, description: "stories read"}) {
			key entityType name version valueType ttlSeconds description createdAt } }`, nil, &created)
		c := created.CreateListFeature
		equal(t, "created", []any{c.Key, c.Name, c.Version, c.ValueType, c.TTLSeconds, *c.Description},
			[]any{g.entityType + "#reading_history|", "reading_history", "", "JSON", 2592000, "stories read"})
		if at, err := time.Parse(time.RFC3339Nano, c.CreatedAt); err != nil || time.Since(at) > time.Minute {
			t.Fatalf("createdAt %q: %v", c.CreatedAt, err)
		}
		g.fails(`mutation { createListFeature(input: {entityType: "$type", name: "reading_history", valueType: JSON, ttlSeconds: 60}) { key } }`, nil, "CONFLICT", "already exists")
		g.fails(`mutation { createListFeature(input: {entityType: "$type", name: "Bad", valueType: JSON, ttlSeconds: 60}) { key } }`, nil, "BAD_USER_INPUT", "feature name")
		g.fails(`mutation { createListFeature(input: {entityType: "$type", name: "x", valueType: JSON, ttlSeconds: 0}) { key } }`, nil, "BAD_USER_INPUT", "ttlSeconds")
		g.fails(`mutation { createListFeature(input: {entityType: "$type", name: "x", valueType: TEXT, ttlSeconds: 60}) { key } }`, nil, "BAD_USER_INPUT", "TEXT")

		// A new version keeps the value type; TTL and description may change.
		type version struct {
			Key, ValueType string
			TTLSeconds     int
			Description    string
		}
		var v2 struct{ CreateListFeatureVersion version }
		g.ok(`mutation { createListFeatureVersion(entityType: "$type", name: "reading_history", version: "2025/03/11", ttlSeconds: 60) {
			key valueType ttlSeconds description } }`, nil, &v2)
		equal(t, "version", v2.CreateListFeatureVersion, version{g.entityType + "#reading_history|2025/03/11", "JSON", 60, "stories read"})
		g.fails(`mutation { createListFeatureVersion(entityType: "$type", name: "nothing", version: "v2") { key } }`, nil, "NOT_FOUND", "createListFeature")

		var one struct{ ListFeature *struct{ Key string } }
		g.ok(`{ listFeature(entityType: "$type", name: "reading_history", version: "2025/03/11") { key } }`, nil, &one)
		equal(t, "listFeature", one.ListFeature.Key, g.entityType+"#reading_history|2025/03/11")
		g.ok(`{ listFeature(entityType: "$type", name: "absent") { key } }`, nil, &one)
		equal(t, "missing listFeature", one.ListFeature, nil)

		g.createFeature("story_presented", "STRING", 3600)
		var list struct{ ListFeatures []struct{ Key string } }
		g.ok(`{ listFeatures(entityType: "$type") { key } }`, nil, &list)
		equal(t, "listFeatures", list.ListFeatures, []map[string]string{
			{"Key": g.entityType + "#reading_history|"}, {"Key": g.entityType + "#reading_history|2025/03/11"}, {"Key": g.entityType + "#story_presented|"},
		})
		var all struct{ ListFeatures []struct{ EntityType string } }
		g.ok(`{ listFeatures { entityType } }`, nil, &all)
		n := 0
		for _, f := range all.ListFeatures {
			if f.EntityType == g.entityType {
				n++
			}
		}
		equal(t, "features of this type among all", n, 3)

		var del struct{ DeleteListFeatureVersion bool }
		g.ok(`mutation { deleteListFeatureVersion(entityType: "$type", name: "reading_history", version: "2025/03/11") }`, nil, &del)
		equal(t, "deleteListFeatureVersion", del.DeleteListFeatureVersion, true)
		g.ok(`mutation { deleteListFeatureVersion(entityType: "$type", name: "reading_history", version: "2025/03/11") }`, nil, &del)
		equal(t, "deleteListFeatureVersion again", del.DeleteListFeatureVersion, false)
		// A deleted version may be created again at once.
		g.ok(`mutation { createListFeatureVersion(entityType: "$type", name: "reading_history", version: "2025/03/11") { key } }`, nil, nil)

		var delAll struct{ DeleteListFeature int }
		g.ok(`mutation { deleteListFeature(entityType: "$type", name: "reading_history") }`, nil, &delAll)
		equal(t, "deleteListFeature", delAll.DeleteListFeature, 2)
		g.ok(`{ listFeatures(entityType: "$type") { key } }`, nil, &list)
		equal(t, "listFeatures after delete", list.ListFeatures, []map[string]string{{"Key": g.entityType + "#story_presented|"}})
		g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "reading_history") { hasMore } }`, nil, "NOT_FOUND", g.entityType+"#reading_history|")
	})
}

func TestListItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("reading_history", "STRING", 86400)
		now := time.Now()
		added, expired := g.add("u1", "reading_history",
			item{"s1", ts(now.Add(-3 * time.Minute))},
			item{"s2", ts(now.Add(-2 * time.Minute))},
			item{"s3", ts(now.Add(-time.Minute))},
			item{"s3", ts(now.Add(-time.Minute))}, // the same item twice
			item{"s4", ts(now.Add(-time.Minute))}, // same timestamp, another value
			item{"old", ts(now.Add(-25 * time.Hour))},
		)
		equal(t, "added, expired", []int{added, expired}, []int{4, 1})
		added, _ = g.add("u1", "reading_history", item{Value: "now"}) // timestamp defaults to now
		equal(t, "added", added, 1)

		p := g.listItems("u1", "reading_history", nil)
		// s3 and s4 share a timestamp: both are kept, in item key order.
		got := values(p)
		if got[1] == "s3" {
			got[1], got[2] = got[2], got[1]
		}
		equal(t, "newest first", got[1:], []any{"s4", "s3", "s2", "s1"})
		equal(t, "default timestamp", values(p)[0], "now")
		first, _ := time.Parse(time.RFC3339Nano, p.Items[0].Timestamp)
		if d := time.Since(first); d < 0 || d > time.Minute {
			t.Fatalf("default timestamp %s is not now", p.Items[0].Timestamp)
		}
		it := p.Items[len(p.Items)-1]
		equal(t, "timestamp", it.Timestamp, ts(now.Add(-3*time.Minute)))
		equal(t, "expiresAt", it.ExpiresAt, ts(now.Add(-3*time.Minute+24*time.Hour)))
		equal(t, "cursor", it.Cursor[:19], fmt.Sprintf("%019d", now.Add(-3*time.Minute).UnixNano()))

		p = g.listItems("u1", "reading_history", map[string]any{"min": ts(now.Add(-2 * time.Minute))})
		equal(t, "minTimestamp is inclusive", len(p.Items), 4)
		equal(t, "oldest at minTimestamp", values(p)[3], "s2")

		// Pages of two cover the list once, in order.
		got = nil
		var after any
		for pages := 0; ; pages++ {
			p = g.listItems("u1", "reading_history", map[string]any{"limit": 2, "after": after})
			got = append(got, values(p)...)
			if !p.HasMore {
				equal(t, "last page's endCursor", *p.EndCursor, p.Items[len(p.Items)-1].Cursor)
				break
			}
			after = *p.EndCursor
			if pages > 5 {
				t.Fatal("paging does not end")
			}
		}
		equal(t, "paged", got, values(g.listItems("u1", "reading_history", nil)))
		p = g.listItems("nobody", "reading_history", nil)
		equal(t, "empty list", p, listPage{Items: []listItem{}})

		g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "reading_history", limit: 0) { hasMore } }`, nil, "BAD_USER_INPUT", "limit")
		g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "reading_history", limit: 100000) { hasMore } }`, nil, "BAD_USER_INPUT", "limit")
		g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "reading_history", after: "x") { hasMore } }`, nil, "BAD_USER_INPUT", "cursor")
		g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "reading_history", minTimestamp: "yesterday") { hasMore } }`, nil, "BAD_USER_INPUT", "RFC 3339")
		g.fails(`query($m: Time) { listItems(entityType: "$type", entityId: "u1", feature: "reading_history", minTimestamp: $m) { hasMore } }`,
			map[string]any{"m": "2024-08-29 16:44:05"}, "BAD_USER_INPUT", "RFC 3339")
		g.fails(`{ listItems(entityType: "$type", entityId: "", feature: "reading_history") { hasMore } }`, nil, "BAD_USER_INPUT", "entity id")
		g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "nope") { hasMore } }`, nil, "NOT_FOUND", g.entityType+"#nope|")
	})
}

func TestValueTypes(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		for _, tc := range []struct {
			valueType string
			in, out   []any
			bad       any
			why       string
		}{
			{"STRING", []any{"a", ""}, []any{"", "a"}, 1, "must be a string"},
			{"INT", []any{1, "-9007199254740993"}, []any{"-9007199254740993", 1}, 1.5, "must be"},
			{"FLOAT", []any{1.5, 2}, []any{2, 1.5}, "1.5", "must be a finite number"},
			{"BOOLEAN", []any{true, false}, []any{false, true}, "true", "must be true or false"},
			{"BYTES", []any{"AAH/", ""}, []any{"", "AAH/"}, "not base64!", "base64"},
			{"JSON", []any{map[string]any{"b": 1, "a": []any{1.0, "x"}}, "s"}, []any{"s", map[string]any{"a": []any{1, "x"}, "b": 1}}, nil, "null"},
		} {
			name := strings.ToLower(tc.valueType)
			g.createFeature(name, tc.valueType, 3600)
			now := time.Now()
			var items []item
			for i, v := range tc.in {
				items = append(items, item{v, ts(now.Add(-time.Duration(i) * time.Second))})
			}
			g.add("u1", name, items...)
			p := g.listItems("u1", name, nil)
			got := values(p)
			// Newest first: reverse of the input order.
			equal(t, tc.valueType+" values", []any{got[1], got[0]}, tc.out)
			g.fails(`mutation($f: String!, $v: ListValue!) { addListItems(list: {entityType: "$type", entityId: "u1", feature: $f}, items: [{value: "ok"}, {value: $v}]) { added } }`,
				map[string]any{"f": name, "v": tc.bad}, "BAD_USER_INPUT", tc.why)
			equal(t, tc.valueType+" items after a rejected add", len(g.listItems("u1", name, nil).Items), 2)
			// Equal values spelled differently are the same item.
			if tc.valueType == "JSON" {
				added, _ := g.add("u1", name, item{map[string]any{"a": []any{1, "x"}, "b": 1.0}, ts(now)})
				equal(t, "re-added JSON", added, 1)
				equal(t, "JSON items", len(g.listItems("u1", name, nil).Items), 2)
			}
		}
	})
}

func TestRemove(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("story_presented", "STRING", 3600)
		now := time.Now()
		g.add("u1", "story_presented", item{"a", ts(now)}, item{"b", ts(now)}, item{"a", ts(now.Add(-time.Second))}, item{"c", ts(now.Add(-time.Second))})
		g.add("u2", "story_presented", item{"a", ts(now)})
		var rm struct{ RemoveListItemsWithValue struct{ Removed int } }
		g.ok(`mutation { removeListItemsWithValue(list: {entityType: "$type", entityId: "u1", feature: "story_presented"}, value: "a") { removed } }`, nil, &rm)
		equal(t, "removed", rm.RemoveListItemsWithValue.Removed, 2)
		equal(t, "u1", values(g.listItems("u1", "story_presented", nil)), []any{"b", "c"})
		equal(t, "u2", values(g.listItems("u2", "story_presented", nil)), []any{"a"})
		g.fails(`mutation { removeListItemsWithValue(list: {entityType: "$type", entityId: "u1", feature: "story_presented"}, value: 5) { removed } }`, nil, "BAD_USER_INPUT", "STRING")

		var all struct{ RemoveAllListItems bool }
		g.ok(`mutation { removeAllListItems(list: {entityType: "$type", entityId: "u1", feature: "story_presented"}) }`, nil, &all)
		equal(t, "removeAllListItems", all.RemoveAllListItems, true)
		equal(t, "u1 after remove all", values(g.listItems("u1", "story_presented", nil)), []any{})
		equal(t, "u2 after remove all", values(g.listItems("u2", "story_presented", nil)), []any{"a"})
	})
}

func TestEntities(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		counting := &countingStore{Store: s}
		g := newGateway(t, counting)
		g.createFeature("reading_history", "STRING", 3600)
		var ids []string
		for i := range 40 {
			id := fmt.Sprint("u", i)
			ids = append(ids, id)
			g.add(id, "reading_history", item{Value: "story-of-" + id})
		}
		ids = append(ids, ids[:10]...) // 50 ids, 10 of them twice
		counting.calls.Store(0)
		var out struct {
			Entities []struct {
				ID, Type, EntityID string
				List               listPage
			}
		}
		g.ok(`query($ids: [ID!]!) { entities(type: "$type", entityIds: $ids) {
			id type entityId list(feature: "reading_history", limit: 10) { items { value } hasMore } } }`,
			map[string]any{"ids": ids}, &out)
		equal(t, "entities", len(out.Entities), 50)
		for i, e := range out.Entities {
			equal(t, "entity", []any{e.ID, e.Type, e.EntityID, values(e.List)}, []any{g.entityType + ":" + ids[i], g.entityType, ids[i], []any{"story-of-" + ids[i]}})
		}
		equal(t, "store calls for 50 lists, 10 repeated", counting.calls.Load(), int64(40))
		if m := counting.maxInFlight.Load(); m < 2 {
			t.Fatalf("at most %d list read in flight; want concurrent reads", m)
		}

		var one struct {
			Entity struct {
				ID   string
				List listPage
			}
		}
		g.ok(`{ entity(type: "$type", entityId: "u3") { id list(feature: "reading_history") { items { value } } } }`, nil, &one)
		equal(t, "entity", []any{one.Entity.ID, values(one.Entity.List)}, []any{g.entityType + ":u3", []any{"story-of-u3"}})
		g.fails(`{ entities(type: "$type", entityIds: ["ok", ""]) { id } }`, nil, "BAD_USER_INPUT", "entityIds[1]")
		g.fails(`{ entity(type: "Bad", entityId: "u1") { id } }`, nil, "BAD_USER_INPUT", "entity type")
	})
}

// One failing list fails its own field; the other entities keep their data,
// and no store detail reaches the client.
func TestFailingListFailsOnlyItsField(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		counting := &countingStore{Store: s, fail: map[string]error{"u2": errStoreDown, "u3": errors.New("SELECT item_key FROM ks.list_items: syntax error")}}
		g := newGateway(t, counting)
		g.createFeature("f", "STRING", 3600)
		for _, id := range []string{"u1", "u2", "u3", "u4"} {
			g.add(id, "f", item{Value: id})
		}
		data, errs := g.do(`{ entities(type: "$type", entityIds: ["u1", "u2", "u3", "u4"]) { entityId list(feature: "f") { items { value } } } }`, nil)
		sort.Slice(errs, func(i, j int) bool { return fmt.Sprint(errs[i].Path) < fmt.Sprint(errs[j].Path) })
		equal(t, "errors", errs, []gqlError{
			{Message: "the list store did not answer in time; retry later", Path: []any{"entities", 1, "list"}, Extensions: struct{ Code string }{"UNAVAILABLE"}},
			{Message: "internal error", Path: []any{"entities", 2, "list"}, Extensions: struct{ Code string }{"INTERNAL"}},
		})
		equal(t, "data", data, map[string]any{"entities": []any{
			map[string]any{"entityId": "u1", "list": map[string]any{"items": []any{map[string]any{"value": "u1"}}}},
			map[string]any{"entityId": "u2", "list": nil},
			map[string]any{"entityId": "u3", "list": nil},
			map[string]any{"entityId": "u4", "list": map[string]any{"items": []any{map[string]any{"value": "u4"}}}},
		}})
	})
}

func TestPanicIsAnInternalError(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, &countingStore{Store: s, panicFor: "boom"})
		g.createFeature("f", "STRING", 3600)
		err := g.fails(`{ listItems(entityType: "$type", entityId: "boom", feature: "f") { hasMore } }`, nil, "INTERNAL", "internal error")
		if strings.Contains(err.Message, "boom") {
			t.Fatalf("panic value leaked: %q", err.Message)
		}
		// The gateway keeps serving.
		g.listItems("fine", "f", nil)
	})
}

// A panic in one read of a loader batch, which runs in a goroutine of its
// own, fails that list alone; the process lives.
func TestPanicInALoaderBatchFailsItsListAlone(t *testing.T) {
	g := newGateway(t, &countingStore{Store: embeddedStore(t), panicFor: "boom"})
	g.createFeature("f", "STRING", 3600)
	data, errs := g.do(`{ entities(type: "$type", entityIds: ["a", "boom", "c"]) { entityId list(feature: "f") { hasMore } } }`, nil)
	if len(errs) != 1 || errs[0].Extensions.Code != "INTERNAL" || fmt.Sprint(errs[0].Path) != "[entities 1 list]" {
		t.Fatalf("errors %+v; want one INTERNAL at [entities 1 list]", errs)
	}
	equal(t, "data", data, map[string]any{"entities": []any{
		map[string]any{"entityId": "a", "list": map[string]any{"hasMore": false}},
		map[string]any{"entityId": "boom", "list": nil},
		map[string]any{"entityId": "c", "list": map[string]any{"hasMore": false}},
	}})
}
