package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/store"
)

// tenItems adds v0 (oldest) … v9 (newest), one second apart, to a list
// and returns their timestamps.
func (g *gateway) tenItems(entityID, feature string) []time.Time {
	g.t.Helper()
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	var items []item
	var stamps []time.Time
	for i := range 10 {
		stamps = append(stamps, base.Add(time.Duration(i)*time.Second))
		items = append(items, item{fmt.Sprint("v", i), ts(stamps[i])})
	}
	g.add(entityID, feature, items...)
	return stamps
}

func TestWindowsCountsAndDistinct(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("history", "STRING", 86400)
		stamps := g.tenItems("u1", "history")
		g.add("u1", "history", item{"v9", ts(stamps[2].Add(time.Millisecond))}, item{"v8", ts(stamps[1].Add(time.Millisecond))})
		var out struct {
			ListItems listPage
			ListCount int
			Entity    struct {
				List      listPage
				ListCount int
			}
		}
		g.ok(`query($min: Time, $max: Time) {
			listItems(entityType: "$type", entityId: "u1", feature: "history", minTimestamp: $min, maxTimestamp: $max, limit: 2) { items { value } hasMore endCursor }
			listCount(entityType: "$type", entityId: "u1", feature: "history", minTimestamp: $min, maxTimestamp: $max)
			entity(type: "$type", entityId: "u1") {
				list(feature: "history", distinct: true, limit: 5) { items { value } hasMore endCursor }
				listCount(feature: "history")
			}
		}`, map[string]any{"min": ts(stamps[3]), "max": ts(stamps[6])}, &out)
		equal(t, "window, newest first", values(out.ListItems), []any{"v6", "v5"})
		equal(t, "window hasMore", out.ListItems.HasMore, true)
		equal(t, "count of the window (both bounds inclusive)", out.ListCount, 4)
		equal(t, "distinct page", values(out.Entity.List), []any{"v9", "v8", "v7", "v6", "v5"})
		equal(t, "count of the list", out.Entity.ListCount, 12)

		next := g.listItems("u1", "history", map[string]any{"after": *out.ListItems.EndCursor, "min": ts(stamps[3])})
		equal(t, "next page of the window", values(next)[:2], []any{"v4", "v3"})

		// A count past --max-count is refused, naming the flag.
		small := newGateway(t, s, func(c *endpoint.Config) { c.Limits.MaxCount = 5 })
		small.entityType = g.entityType
		small.fails(`{ listCount(entityType: "$type", entityId: "u1", feature: "history") }`, nil, "BAD_USER_INPUT", "--max-count")
		var narrow struct{ ListCount int }
		small.ok(`query($min: Time) { listCount(entityType: "$type", entityId: "u1", feature: "history", minTimestamp: $min) }`, map[string]any{"min": ts(stamps[7])}, &narrow)
		equal(t, "a count within --max-count", narrow.ListCount, 3)
	})
}

func TestListContains(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("history", "STRING", 86400)
		stamps := g.tenItems("u1", "history")
		g.add("u1", "history", item{"v7", ts(stamps[1].Add(time.Millisecond))})
		var out struct {
			Entity struct {
				ListContains []*listItem
				Recent       []*listItem
			}
		}
		g.ok(`query($min: Time) { entity(type: "$type", entityId: "u1") {
			listContains(feature: "history", values: ["v7", "absent", "v0", "v7"]) { value timestamp cursor }
			recent: listContains(feature: "history", values: ["v0", "v3"], minTimestamp: $min) { value timestamp }
		} }`, map[string]any{"min": ts(stamps[3])}, &out)
		got := out.Entity.ListContains
		if len(got) != 4 || got[1] != nil || got[0] == nil || got[2] == nil || got[3] == nil {
			t.Fatalf("listContains = %+v: want v7, null, v0, v7", got)
		}
		equal(t, "newest v7", got[0].Timestamp, ts(stamps[7]))
		equal(t, "values in request order", []any{got[0].Value, got[2].Value, got[3].Value}, []any{"v7", "v0", "v7"})
		if out.Entity.Recent[0] != nil || out.Entity.Recent[1] == nil {
			t.Fatalf("with minTimestamp: %+v", out.Entity.Recent)
		}

		many := make([]string, 1001)
		for i := range many {
			many[i] = fmt.Sprint("s", i)
		}
		g.fails(`query($v: [ListValue!]!) { entity(type: "$type", entityId: "u1") { listContains(feature: "history", values: $v) { value } } }`,
			map[string]any{"v": many}, "BAD_USER_INPUT", "--max-values")
		g.fails(`{ entity(type: "$type", entityId: "u1") { listContains(feature: "history", values: [5]) { value } } }`, nil, "BAD_USER_INPUT", "values[0]")
	})
}

func TestCappedFeatures(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		var created struct{ CreateListFeature struct{ MaxItems int } }
		g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "presented", valueType: STRING, ttlSeconds: 86400, maxItems: 3}) { maxItems } }`, nil, &created)
		equal(t, "maxItems", created.CreateListFeature.MaxItems, 3)
		var version struct{ A, B struct{ MaxItems *int } }
		g.ok(`mutation {
			a: createListFeatureVersion(entityType: "$type", name: "presented", version: "v2") { maxItems }
			b: createListFeatureVersion(entityType: "$type", name: "presented", version: "v3", maxItems: 5) { maxItems }
		}`, nil, &version)
		equal(t, "a version inherits the cap unless given", []any{*version.A.MaxItems, *version.B.MaxItems}, []any{3, 5})
		g.fails(`mutation { createListFeature(input: {entityType: "$type", name: "huge", valueType: STRING, ttlSeconds: 60, maxItems: 100001}) { key } }`, nil, "BAD_USER_INPUT", "maxItems")

		g.tenItems("u1", "presented")
		equal(t, "shown", values(g.listItems("u1", "presented", nil)), []any{"v9", "v8", "v7"})
		var out struct {
			ListCount int
			Entity    struct{ ListContains []*listItem }
		}
		g.ok(`{ listCount(entityType: "$type", entityId: "u1", feature: "presented")
			entity(type: "$type", entityId: "u1") { listContains(feature: "presented", values: ["v9", "v6"]) { value } } }`, nil, &out)
		equal(t, "count", out.ListCount, 3)
		if out.Entity.ListContains[0] == nil || out.Entity.ListContains[1] != nil {
			t.Fatalf("listContains = %+v: v6 is past the cap", out.Entity.ListContains)
		}
		p := g.listItems("u1", "presented", map[string]any{"after": *g.listItems("u1", "presented", map[string]any{"limit": 2}).EndCursor})
		equal(t, "the page after the second item", values(p), []any{"v7"})
		equal(t, "nothing past the cap", p.HasMore, false)
	})
}

func TestAddListItemsBatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		fs := &failingAdds{Store: s, fail: map[string]bool{"down": true}}
		g := newGateway(t, fs)
		g.createFeature("history", "STRING", 86400)
		g.createFeature("scores", "INT", 86400)
		now := ts(time.Now())
		batch := `mutation($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added expired } }`
		add := func(id, feature string, values ...any) map[string]any {
			var items []map[string]any
			for _, v := range values {
				items = append(items, map[string]any{"value": v, "timestamp": now})
			}
			return map[string]any{"list": map[string]any{"entityType": g.entityType, "entityId": id, "feature": feature}, "items": items}
		}
		// One bad list anywhere writes nothing.
		for _, bad := range []map[string]any{
			add("u3", "scores", "not a number"),
			add("u3", "absent", "x"),
			add("", "history", "x"),
		} {
			g.do(batch, map[string]any{"adds": []any{add("u1", "history", "a"), add("u2", "history", "b"), bad}})
			if n := fs.writes.Load(); n != 0 {
				t.Fatalf("a batch with %v wrote %d lists", bad, n)
			}
		}
		g.fails(batch, map[string]any{"adds": []any{add("u1", "history", "a"), add("u3", "scores", "x")}}, "BAD_USER_INPUT", "adds[1]")

		// A list whose write fails is null at its index, with its error;
		// the others stand.
		data, errs := g.do(batch, map[string]any{"adds": []any{add("u1", "history", "a", "b"), add("down", "history", "c"), add("u2", "scores", 7)}})
		payloads, _ := data["addListItemsBatch"].([]any)
		if len(payloads) != 3 || payloads[1] != nil || payloads[0] == nil || payloads[2] == nil {
			t.Fatalf("payloads %v", payloads)
		}
		if len(errs) != 1 || errs[0].Extensions.Code != "UNAVAILABLE" || fmt.Sprint(errs[0].Path) != "[addListItemsBatch 1]" {
			t.Fatalf("errors %+v: want one UNAVAILABLE at [addListItemsBatch 1]", errs)
		}
		equal(t, "u1", values(g.listItems("u1", "history", nil)), []any{"b", "a"})
		var scores struct{ ListItems listPage }
		g.ok(`{ listItems(entityType: "$type", entityId: "u2", feature: "scores") { items { value } } }`, nil, &scores)
		equal(t, "u2", values(scores.ListItems), []any{7})

		// A retry of the whole request changes nothing that stood.
		delete(fs.fail, "down")
		var retried struct{ AddListItemsBatch []struct{ Added int } }
		g.ok(batch, map[string]any{"adds": []any{add("u1", "history", "a", "b"), add("down", "history", "c"), add("u2", "scores", 7)}}, &retried)
		equal(t, "u1 after the retry", values(g.listItems("u1", "history", nil)), []any{"b", "a"})
		equal(t, "down after the retry", values(g.listItems("down", "history", nil)), []any{"c"})

		// Bounds: lists, and items in all.
		small := newGateway(t, fs, func(c *endpoint.Config) { c.Limits.MaxBatchLists = 2 })
		small.entityType = g.entityType
		small.fails(batch, map[string]any{"adds": []any{add("a", "history", "x"), add("b", "history", "x"), add("c", "history", "x")}}, "BAD_USER_INPUT", "--max-batch-lists")
		limit := s.Limits().MaxAddItems
		var many []any
		for i := range limit + 1 {
			many = append(many, fmt.Sprint(i))
		}
		g.fails(batch, map[string]any{"adds": []any{add("a", "history", many[:limit/2]...), add("b", "history", many[limit/2:]...)}}, "BAD_USER_INPUT", "--max-add-items")
	})
}

func TestRemoveWithValuesAndRecreate(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("history", "STRING", 86400)
		g.tenItems("u1", "history")
		var out struct{ RemoveListItemsWithValues struct{ Removed int } }
		g.ok(`mutation { removeListItemsWithValues(list: {entityType: "$type", entityId: "u1", feature: "history"}, values: ["v1", "v3", "absent"]) { removed } }`, nil, &out)
		equal(t, "removed", out.RemoveListItemsWithValues.Removed, 2)
		equal(t, "left", len(g.listItems("u1", "history", nil).Items), 8)

		// Deleted and created again at once, with another TTL: no item of
		// the deleted feature shows.
		g.ok(`mutation { deleteListFeature(entityType: "$type", name: "history") }`, nil, nil)
		g.createFeature("history", "STRING", 3600)
		equal(t, "items after re-creation", values(g.listItems("u1", "history", nil)), []any{})
		g.add("u1", "history", item{"42", ""})
		equal(t, "new items show", values(g.listItems("u1", "history", nil)), []any{"42"})
		var count struct{ ListCount int }
		g.ok(`{ listCount(entityType: "$type", entityId: "u1", feature: "history") }`, nil, &count)
		equal(t, "count after re-creation", count.ListCount, 1)
	})
}

// The complexity estimate covers the new fields by their size: a search
// of 1,000 values in each of 100 entities' lists passes --max-complexity,
// and so does a batch of 1,000 lists of 3 items with --max-complexity at 3,000; both
// are refused before anything runs.
func TestComplexityOfNewFields(t *testing.T) {
	fs := &failingAdds{Store: embeddedStore(t)}
	g := newGateway(t, fs)
	g.createFeature("history", "STRING", 86400)
	ids := make([]string, 100)
	vals := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprint("u", i)
	}
	for i := range vals {
		vals[i] = fmt.Sprint("s", i)
	}
	g.fails(`query($ids: [ID!]!, $v: [ListValue!]!) { entities(type: "$type", entityIds: $ids) { listContains(feature: "history", values: $v) { value timestamp } } }`,
		map[string]any{"ids": ids, "v": vals}, "BAD_USER_INPUT", "complexity")
	small := newGateway(t, fs, func(c *endpoint.Config) { c.Limits.MaxComplexity = 3000 })
	small.entityType = g.entityType
	var adds []any
	for i := range 1000 {
		adds = append(adds, map[string]any{"list": map[string]any{"entityType": g.entityType, "entityId": fmt.Sprint("u", i), "feature": "history"},
			"items": []map[string]any{{"value": "a"}, {"value": "b"}, {"value": "c"}}})
	}
	small.fails(`mutation($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added } }`, map[string]any{"adds": adds}, "BAD_USER_INPUT", "complexity")
	if n := fs.writes.Load(); n != 0 {
		t.Fatalf("%d lists written", n)
	}
	var out struct{ AddListItemsBatch []struct{ Added int } }
	g.ok(`mutation($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added } }`, map[string]any{"adds": adds}, &out)
	equal(t, "lists written under the default limits", len(out.AddListItemsBatch), 1000)
}

// scanCounter counts the counts and searches a store is asked for.
type scanCounter struct {
	store.Store
	scans atomic.Int64
}

func (s *scanCounter) Count(ctx context.Context, l store.List, w store.Window, maxRows int) (int, error) {
	s.scans.Add(1)
	return s.Store.Count(ctx, l, w, maxRows)
}

func (s *scanCounter) Find(ctx context.Context, l store.List, values [][]byte, minTimestamp int64, maxRows int) ([]string, error) {
	s.scans.Add(1)
	return s.Store.Find(ctx, l, values, minTimestamp, maxRows)
}

// Complexity follows the rows a field may read, not only those it returns:
// a count or a search may look at --max-count keys, so 100 of them in one
// operation are refused before any runs; a page of a capped list below its
// newest item ranks on the keys above it.
func TestComplexityFollowsRowsRead(t *testing.T) {
	s := &scanCounter{Store: embeddedStore(t)}
	g := newGateway(t, s)
	g.createFeature("f", "STRING", 3600)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprint("u", i)
	}
	var eleven strings.Builder
	for i := range 11 {
		fmt.Fprintf(&eleven, ` c%d: listCount(feature: "f", minTimestamp: "1970-01-01T00:00:00.00000000%dZ")`, i, i+1)
	}
	for _, c := range []struct{ q, complexity string }{
		// Counts share what the operation leaves, but not below 1,000
		// keys each: 1,100 of them do not.
		{`query($ids: [ID!]!) { entities(type: "$type", entityIds: $ids) {` + eleven.String() + ` } }`, "complexity 11001101,"},
		{`query($ids: [ID!]!) { entities(type: "$type", entityIds: $ids) { listContains(feature: "f", values: ["a"]) { value } } }`, "complexity 1000"},
	} {
		e := g.fails(c.q, map[string]any{"ids": ids}, "BAD_USER_INPUT", "--max-complexity")
		if !strings.Contains(e.Message, c.complexity) {
			t.Errorf("%s: %s; want a %s: 1 + 100 × (1 + fields × (1 + 100,000 keys / 10))", c.q, e.Message, c.complexity)
		}
	}
	if n := s.scans.Load(); n != 0 {
		t.Fatalf("%d counts or searches ran", n)
	}
	// A hundred counts share the operation: each may look at 9,980 keys.
	g.ok(`query($ids: [ID!]!) { entities(type: "$type", entityIds: $ids) { listCount(feature: "f") } }`, map[string]any{"ids": ids}, nil)

	g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "capped", valueType: STRING, ttlSeconds: 3600, maxItems: 100000}) { key } }`, nil, nil)
	page := func(n int, after string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, ` p%d: listItems(entityType: "$type", entityId: "u1", feature: "capped", limit: 1%s) { items { value } }`, i, after)
		}
		return b.String() + " }"
	}
	g.ok(page(100, ""), nil, nil) // from the newest item: a page's rows
	g.ok(page(9, `, after: "0000000000000000001#AAAAAAAAAAAAAAAAAAAAAA=="`), nil, nil)
	g.fails(page(10, `, after: "0000000000000000001#AAAAAAAAAAAAAAAAAAAAAA=="`), nil, "BAD_USER_INPUT", "--max-complexity")
}

// A value held 50,000 times is removed within the request's deadline,
// every copy of it, and nothing else; past --max-count rows the removal
// removes nothing and says to narrow its window, which then works.
func TestRemoveManyCopies(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s, func(c *endpoint.Config) { c.Limits.MaxCount = 60_000 })
		g.createFeature("f", "STRING", 86400)
		now := time.Now()
		for add := range 51 {
			items := make([]item, 1000)
			for i := range items {
				items[i] = item{"copy", ts(now.Add(-time.Duration(add*1000+i) * time.Millisecond))}
				if add == 50 {
					items[i].Value = fmt.Sprint("other", i)
				}
			}
			g.add("u1", "f", items...)
		}
		var rm struct{ RemoveListItemsWithValue *struct{ Removed int } }
		began := time.Now()
		data, errs := g.do(`mutation { removeListItemsWithValue(list: {entityType: "$type", entityId: "u1", feature: "f"}, value: "copy") { removed } }`, nil)
		took := time.Since(began)
		if len(errs) > 0 {
			// Cut short at its deadline: it says what it removed, and to go on.
			if errs[0].Extensions.Code != "TIMEOUT" || !strings.Contains(errs[0].Message, "were removed") || !strings.Contains(errs[0].Message, "call it again") {
				t.Fatalf("after %v: %+v", took, errs)
			}
			t.Logf("cut short after %v: %s", took, errs[0].Message)
			return
		}
		b, _ := json.Marshal(data)
		json.Unmarshal(b, &rm)
		if rm.RemoveListItemsWithValue == nil || rm.RemoveListItemsWithValue.Removed != 50_000 {
			t.Fatalf("removed %s", b)
		}
		t.Logf("50,000 copies removed in %v", took)
		var count struct{ ListCount int }
		g.ok(`{ listCount(entityType: "$type", entityId: "u1", feature: "f") }`, nil, &count)
		equal(t, "items left", count.ListCount, 1000)

		// A list of more than --max-count rows: nothing removed, and the
		// error says how to go on; a narrower window works.
		for add := range 61 {
			items := make([]item, 1000)
			for i := range items {
				items[i] = item{"copy", ts(now.Add(-time.Hour - time.Duration(add*1000+i)*time.Millisecond))}
			}
			g.add("u2", "f", items...)
		}
		g.fails(`mutation { removeListItemsWithValue(list: {entityType: "$type", entityId: "u2", feature: "f"}, value: "copy") { removed } }`, nil, "BAD_USER_INPUT", "nothing was removed: remove from a narrower window")
		g.ok(`mutation($t: Time) { removeListItemsWithValue(list: {entityType: "$type", entityId: "u2", feature: "f"}, value: "copy", minTimestamp: $t) { removed } }`,
			map[string]any{"t": ts(now.Add(-time.Hour - 30*time.Second))}, &rm)
		equal(t, "removed from the newer half", rm.RemoveListItemsWithValue.Removed, 30_001)
	})
}
