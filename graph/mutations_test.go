package graph_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
)

// Bad input anywhere in a mutation operation fails it whole and writes
// nothing, even when the bad field comes after a good one.
func TestMutationOperationIsCheckedBeforeAnyFieldRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("f", "STRING", 3600)
		g.add("u0", "f", item{Value: "kept"})
		first := `a: addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "first"}]) { added }
			r: removeAllListItems(list: {entityType: "$type", entityId: "u0", feature: "f"})`
		tooMany := make([]map[string]any, s.Limits().MaxAddItems+1)
		for i := range tooMany {
			tooMany[i] = map[string]any{"value": fmt.Sprint("v", i)}
		}
		for _, c := range []struct {
			name, field string
			vars        map[string]any
			code, says  string
		}{
			{"value of the wrong type", `b: addListItems(list: {entityType: "$type", entityId: "u2", feature: "f"}, items: [{value: 5}]) { added }`, nil, "BAD_USER_INPUT", "STRING"},
			{"over the item limit", `b: addListItems(list: {entityType: "$type", entityId: "u2", feature: "f"}, items: $items) { added }`, map[string]any{"items": tooMany}, "BAD_USER_INPUT", "more than"},
			{"timestamp before 1970", `b: addListItems(list: {entityType: "$type", entityId: "u2", feature: "f"}, items: [{value: "x", timestamp: "1969-12-31T23:59:59Z"}]) { added }`, nil, "BAD_USER_INPUT", "before 1970"},
			{"timestamp in the future", `b: addListItems(list: {entityType: "$type", entityId: "u2", feature: "f"}, items: [{value: "x", timestamp: $ts}]) { added }`, map[string]any{"ts": ts(time.Now().Add(2 * time.Hour))}, "BAD_USER_INPUT", "in the future"},
			{"unknown feature", `b: addListItems(list: {entityType: "$type", entityId: "u2", feature: "nope"}, items: [{value: "x"}]) { added }`, nil, "NOT_FOUND", "nope"},
			{"bad entity id", `b: removeAllListItems(list: {entityType: "$type", entityId: "u\u0001", feature: "f"})`, nil, "BAD_USER_INPUT", "control characters"},
			{"bad value to remove", `b: removeListItemsWithValue(list: {entityType: "$type", entityId: "u2", feature: "f"}, value: true) { removed }`, nil, "BAD_USER_INPUT", "STRING"},
			{"bad feature TTL", `b: createListFeature(input: {entityType: "$type", name: "g", valueType: STRING, ttlSeconds: 0}) { key }`, nil, "BAD_USER_INPUT", "ttlSeconds"},
			{"existing feature", `b: createListFeature(input: {entityType: "$type", name: "f", valueType: STRING, ttlSeconds: 60}) { key }`, nil, "CONFLICT", "already exists"},
			{"version of an unknown feature", `b: createListFeatureVersion(entityType: "$type", name: "nope", version: "v2") { key }`, nil, "NOT_FOUND", "createListFeature"},
			{"bad name to delete", `b: deleteListFeature(entityType: "$type", name: "Bad Name")`, nil, "BAD_USER_INPUT", "feature name"},
		} {
			t.Run(c.name, func(t *testing.T) {
				decl := ""
				if c.vars != nil {
					for k := range c.vars {
						decl = map[string]string{"items": "($items: [ListItemInput!]!)", "ts": "($ts: Time)"}[k]
					}
				}
				data, errs := g.do("mutation"+decl+" { "+first+"\n"+c.field+" }", c.vars)
				if data != nil {
					t.Errorf("data = %v, want null: nothing ran", data)
				}
				if len(errs) != 1 || errs[0].Extensions.Code != c.code || !strings.Contains(errs[0].Message, c.says) || fmt.Sprint(errs[0].Path) != "[b]" {
					t.Fatalf("errors = %+v; want one %s at [b] saying %q", errs, c.code, c.says)
				}
				equal(t, "u1's list", values(g.listItems("u1", "f", nil)), []any{})
				equal(t, "u0's list", values(g.listItems("u0", "f", nil)), []any{"kept"})
			})
		}
	})
}

// A feature created by one field of an operation may be used by the next.
func TestMutationOperationUsesAFeatureItCreates(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	var out struct {
		C struct{ Key string }
		V struct{ Key string }
		A struct{ Added int }
		B struct{ Added int }
	}
	g.ok(`mutation {
		c: createListFeature(input: {entityType: "$type", name: "h", valueType: INT, ttlSeconds: 3600}) { key }
		v: createListFeatureVersion(entityType: "$type", name: "h", version: "v2") { key }
		a: addListItems(list: {entityType: "$type", entityId: "u1", feature: "h"}, items: [{value: 1}]) { added }
		b: addListItems(list: {entityType: "$type", entityId: "u1", feature: "h", version: "v2"}, items: [{value: 2}]) { added }
	}`, nil, &out)
	if out.A.Added != 1 || out.B.Added != 1 || out.V.Key != g.entityType+"#h|v2" {
		t.Fatalf("got %+v", out)
	}
	// …but only with values of its type.
	g.fails(`mutation {
		c: createListFeature(input: {entityType: "$type", name: "k", valueType: INT, ttlSeconds: 3600}) { key }
		a: addListItems(list: {entityType: "$type", entityId: "u1", feature: "k"}, items: [{value: "one"}]) { added }
	}`, nil, "BAD_USER_INPUT", "INT")
	if data, _ := g.do(`{ listFeature(entityType: "$type", name: "k") { key } }`, nil); data["listFeature"] != nil {
		t.Fatalf("feature k was created: %v", data)
	}
	// A feature deleted by one field is gone for the next, which may
	// create it again; an add to it in between is refused, and nothing runs.
	g.fails(`mutation {
		d: deleteListFeature(entityType: "$type", name: "h")
		a: addListItems(list: {entityType: "$type", entityId: "u1", feature: "h"}, items: [{value: 1}]) { added }
	}`, nil, "NOT_FOUND", "an earlier field of this operation deletes it")
	// Created again with another value type, it must wait until every
	// gateway has seen the deletion: refused, and nothing runs.
	g.fails(`mutation {
		d: deleteListFeature(entityType: "$type", name: "h")
		c: createListFeature(input: {entityType: "$type", name: "h", valueType: STRING, ttlSeconds: 3600}) { valueType }
	}`, nil, "CONFLICT", "retry in")
	var again struct {
		D int
		C struct{ TTLSeconds int }
		A struct{ Added int }
	}
	g.ok(`mutation {
		d: deleteListFeature(entityType: "$type", name: "h")
		c: createListFeature(input: {entityType: "$type", name: "h", valueType: INT, ttlSeconds: 7200}) { ttlSeconds }
		a: addListItems(list: {entityType: "$type", entityId: "u1", feature: "h"}, items: [{value: 3}]) { added }
	}`, nil, &again)
	if again.D != 2 || again.C.TTLSeconds != 7200 || again.A.Added != 1 {
		t.Fatalf("delete, create again and add in one operation: %+v", again)
	}
}

// failingAdds fails the adds to chosen entity ids, as a database that
// times out for their partitions would, and counts the adds written.
type failingAdds struct {
	store.Store
	fail   map[string]bool
	writes atomic.Int64
}

func (s *failingAdds) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	if s.fail[l.EntityID] {
		return store.AddResult{}, errStoreDown
	}
	s.writes.Add(1)
	return s.Store.AddItems(ctx, l, items)
}

// A field that fails while running is null with its error; the fields
// before and after it keep their results.
func TestMutationFieldFailingAtRunTimeFailsAlone(t *testing.T) {
	g := newGateway(t, &failingAdds{Store: embeddedStore(t), fail: map[string]bool{"down": true}})
	g.createFeature("f", "STRING", 3600)
	data, errs := g.do(`mutation {
		a: addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "x"}]) { added }
		b: addListItems(list: {entityType: "$type", entityId: "down", feature: "f"}, items: [{value: "x"}]) { added }
		c: addListItems(list: {entityType: "$type", entityId: "u3", feature: "f"}, items: [{value: "x"}, {value: "y"}]) { added }
	}`, nil)
	equal(t, "data", data, map[string]any{"a": map[string]any{"added": 1}, "b": nil, "c": map[string]any{"added": 2}})
	if len(errs) != 1 || errs[0].Extensions.Code != "UNAVAILABLE" || fmt.Sprint(errs[0].Path) != "[b]" {
		t.Fatalf("errors = %+v; want one UNAVAILABLE at [b]", errs)
	}
}
