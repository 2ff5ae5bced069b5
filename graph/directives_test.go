package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/introspection"

	"github.com/listgate/listgate/endpoint"
)

// The finding (issue 38): @defer was accepted, and a deferred fragment's
// fields came back null with "hasNext": true, were never sent, and were
// charged all the same (90,010 points for nine counts that never ran).
// @defer and @stream are refused before anything runs, BAD_USER_INPUT
// naming the directive and saying it is not served, over POST, GET and a
// WebSocket: in queries, those the compiled plans answer (one listItems or
// listCount) included, in mutations and in subscriptions. Nothing is
// charged or written, no field is answered null without an error, and
// introspection does not offer @defer, while GraphiQL's introspection
// query is served.
func TestDeferAndStreamAreRefused(t *testing.T) {
	clk := &clock{t: time.Now()} // the callers' budgets do not refill
	g, srv := subscriptionGateway(t, embeddedStore(t), func(c *endpoint.Config) { c.Now = clk.now })
	g.createFeature("f", "STRING", 3600)
	list := `entityType: "$type", entityId: "u1", feature: "f"`
	var nine strings.Builder
	for i := range 9 {
		fmt.Fprintf(&nine, ` c%d: listCount(feature: "f", minTimestamp: "1970-01-01T00:00:00.00000000%dZ")`, i, i+1)
	}
	docs := []struct{ directive, doc string }{
		// What the compiled plans answer, but for the directive.
		{"defer", `{ ... @defer { listItems(` + list + `) { items { value } } } }`},
		{"defer", `{ listItems(` + list + `) { items { ... @defer { value } } } }`},
		{"defer", `query($d: Boolean!) { listItems(` + list + `) { hasMore ... @defer(if: $d) { endCursor } } }`},
		{"stream", `{ listItems(` + list + `) { items @stream(initialCount: 1) { value } } }`},
		{"stream", `{ listCount(` + list + `) @stream }`},
		// The issue's: nine counts deferred.
		{"defer", `{ entity(type: "$type", entityId: "u1") { ... @defer {` + nine.String() + ` } } }`},
		{"defer", `{ entity(type: "$type", entityId: "u1") { ...F @defer(label: "l") } } fragment F on Entity { listCount(feature: "f") }`},
		{"defer", `mutation { ... @defer { addListItems(list: {` + list + `}, items: [{value: "x"}]) { added } } }`},
		{"defer", `subscription { listItemsAdded(` + list + `) { ... @defer { value } } }`},
		{"stream", `subscription { listItemsAdded(` + list + `) @stream { value } }`},
	}
	before := g.budget()
	for _, d := range docs {
		for _, transport := range []string{"post", "get", "websocket"} {
			params := map[string]any{"query": d.doc, "variables": map[string]any{"d": true}, "extensions": map[string]any{"cost": true}}
			b := g.answer(srv.URL, transport, params, 1<<20)
			errs := answerErrors(t, b)
			want := "@" + d.directive + " is not served"
			if len(errs) != 1 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, want) {
				t.Errorf("%s %s: %s; want one BAD_USER_INPUT saying %q", transport, d.doc, b, want)
			}
			var answer struct {
				Payload struct{ Data json.RawMessage }
				Data    json.RawMessage
				HasNext *bool
			}
			json.Unmarshal(b, &answer)
			if data := string(answer.Data) + string(answer.Payload.Data); (data != "" && data != "null") || answer.HasNext != nil {
				t.Errorf("%s %s: data or hasNext in %s", transport, d.doc, b)
			}
		}
	}
	// Nothing was written, nor charged.
	if after := g.budget(); after.Remaining != before.Remaining-after.Requested {
		t.Errorf("the caller's budget: %d left before the refused operations, %d after, and %d for the one that says so", before.Remaining, after.Remaining, after.Requested)
	}
	var count struct{ ListCount int }
	g.ok(`{ listCount(`+list+`) }`, nil, &count)
	if count.ListCount != 0 {
		t.Errorf("%d items written", count.ListCount)
	}

	var directives struct {
		Schema struct{ Directives []struct{ Name string } } `json:"__schema"`
	}
	g.ok(`{ __schema { directives { name } } }`, nil, &directives)
	for _, d := range directives.Schema.Directives {
		if d.Name == "defer" || d.Name == "stream" {
			t.Errorf("introspection offers @%s", d.Name)
		}
	}
	g.ok(introspection.Query, nil, nil)
}

type budget struct{ Requested, Remaining int64 }

// budget is where the caller stands, as the answer of a query of one point
// says (extensions.cost).
func (g *gateway) budget() budget {
	g.t.Helper()
	w := g.post("", map[string]any{"query": "{ __typename }", "extensions": map[string]any{"cost": true}})
	var resp struct{ Extensions struct{ Cost budget } }
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Extensions.Cost.Requested != 1 {
		g.t.Fatalf("%s: %v", w.Body.Bytes(), err)
	}
	return resp.Extensions.Cost
}
