package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/listgate/listgate/endpoint"
)

// cost is the complexity an operation was charged (extensions.cost), and
// its answer.
func (g *gateway) cost(query string, vars map[string]any) (int64, string) {
	g.t.Helper()
	w := g.post("", map[string]any{"query": strings.ReplaceAll(query, "$type", g.entityType), "variables": vars, "extensions": map[string]any{"cost": true}})
	var resp struct {
		Extensions struct{ Cost struct{ Requested int64 } }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		g.t.Fatalf("%s: %v", w.Body.Bytes(), err)
	}
	return resp.Extensions.Cost.Requested, w.Body.String()
}

// A list of features costs its fields for each feature the catalog holds
// of its entity type (of every type, without one), priced again as the
// catalog changes; one feature costs its fields once.
func TestFeatureListsArePricedByTheCatalog(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	for i := range 3 {
		g.createFeature(fmt.Sprint("f", i), "STRING", 3600)
	}
	other := *g
	other.entityType += "_other"
	other.createFeature("g", "STRING", 3600)
	for _, c := range []struct {
		query string
		vars  map[string]any
		want  int64
	}{
		{`{ listFeatures(entityType: "$type") { key description } }`, nil, 1 + 2*3},
		{`query($t: String) { listFeatures(entityType: $t) { key name version } }`, map[string]any{"t": g.entityType}, 1 + 3*3},
		{`query($t: String) { listFeatures(entityType: $t) { key name version } }`, map[string]any{"t": other.entityType}, 1 + 3*1},
		{`{ listFeatures { key } }`, nil, 1 + 4},
		{`{ a: listFeatures(entityType: "$type") { key } b: listFeatures(entityType: "$type") { d1: description d2: description } }`, nil, 1 + 3 + 1 + 2*3},
		{`{ listFeatures(entityType: "nothing") { key } }`, nil, 1},
		{`{ listFeature(entityType: "$type", name: "f0") { key description } }`, nil, 3},
	} {
		if got, answer := g.cost(c.query, c.vars); got != c.want {
			t.Errorf("%s %v: cost %d, want %d: %s", c.query, c.vars, got, c.want, answer)
		}
	}
	// The same document, once the catalog holds two more.
	g.createFeature("f3", "STRING", 3600)
	g.createFeature("f4", "STRING", 3600)
	if got, answer := g.cost(`{ listFeatures(entityType: "$type") { key description } }`, nil); got != 1+2*5 {
		t.Errorf("after two more features: cost %d, want %d: %s", got, 1+2*5, answer)
	}
}

// A list of features is charged to --max-response-bytes as its field
// resolves: one past the bound fails at its own path, before it is
// written, not as a whole response refused once written; one that fits,
// and a single feature, are served.
func TestFeatureListsAreChargedAsTheyResolve(t *testing.T) {
	g := newGateway(t, embeddedStore(t), func(c *endpoint.Config) { c.Limits.MaxResponseBytes = 8000 })
	description := strings.Repeat("<", 400) // 2,400 bytes escaped
	for i := range 3 {
		g.ok(`mutation($name: String!, $d: String!) { createListFeature(input: {entityType: "$type", name: $name, valueType: STRING, ttlSeconds: 60, description: $d}) { key } }`,
			map[string]any{"name": fmt.Sprint("f", i), "d": description}, nil)
	}
	var one struct{ ListFeature struct{ Description string } }
	g.ok(`{ listFeature(entityType: "$type", name: "f0") { description } }`, nil, &one)
	if one.ListFeature.Description != description {
		t.Fatalf("listFeature: %q", one.ListFeature.Description)
	}
	var all struct{ ListFeatures []struct{ Key string } }
	g.ok(`{ listFeatures(entityType: "$type") { key } }`, nil, &all)
	if len(all.ListFeatures) != 3 {
		t.Fatalf("listFeatures: %+v", all)
	}
	// Three descriptions fit; four do not.
	g.ok(`{ listFeatures(entityType: "$type") { description } }`, nil, nil)
	for _, q := range []string{
		`{ all: listFeatures(entityType: "$type") { d1: description d2: description } }`,
		`{ a: listFeatures(entityType: "$type") { description } all: listFeatures(entityType: "$type") { description } }`,
	} {
		data, errs := g.do(q, nil)
		if len(errs) == 0 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, "--max-response-bytes") ||
			fmt.Sprint(errs[0].Path) != "[all]" && fmt.Sprint(errs[0].Path) != "[a]" {
			t.Errorf("%s: errors %+v; want BAD_USER_INPUT naming --max-response-bytes at the path of a list", q, errs)
		}
		if data != nil {
			t.Errorf("%s: data %v", q, data)
		}
	}
}
