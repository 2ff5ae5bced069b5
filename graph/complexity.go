package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/graph/exec"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/values"
)

// complexityLimit refuses an operation whose complexity passes max before
// it runs: gqlgen's estimate (a list costs its fields times its limit) plus
// the cost of its introspection, which gqlgen leaves out. Introspection
// costs exactly the fields it would resolve, counted by walking this
// schema's introspection as the operation selects it, so that aliases
// nested in __schema cannot multiply into a response of gigabytes; the walk
// stops as soon as the cost passes max.
//
// It also holds the process's complexity budget: an operation runs only
// once its complexity fits in what the operations running leave of
// maxInFlight, waiting for it until its deadline. Memory follows what the
// operations running may return, so many large reads at once wait their
// turn instead of growing the heap past what the process has.
type complexityLimit struct {
	max      int
	es       graphql.ExecutableSchema
	schema   *introspection.Schema
	inFlight *costBudget
	lists    *lists.Service // the bounds of arguments, checked first
}

// costBudget is the complexity the operations running may hold together.
// Unlike a FIFO semaphore, a waiting operation never holds up one that
// fits: a small query runs at once while a large one waits for room.
type costBudget struct {
	mu      sync.Mutex
	used    int64
	max     int64
	changed chan struct{} // closed, and replaced, at every release
}

func newCostBudget(max int64) *costBudget {
	return &costBudget{max: max, changed: make(chan struct{})}
}

// acquire waits until n fits, or ctx ends.
func (b *costBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *costBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &complexityLimit{}

func (*complexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *complexityLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	c.schema = introspection.WrapSchema(es.Schema())
	return nil
}

func (c *complexityLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	cw := costWalk{ctx: ctx, es: c.es, oc: oc, lists: c.lists}
	root := map[ast.Operation]string{ast.Query: "Query", ast.Mutation: "Mutation", ast.Subscription: "Subscription"}[oc.Operation.Operation]
	n, costliest, err := cw.walk(oc.Operation.SelectionSet, root, nil)
	if err != nil {
		return err
	}
	w := introspectionWalk{ast: c.es.Schema(), schema: c.schema, vars: oc.Variables, budget: c.max - n}
	w.root(oc.Operation.SelectionSet)
	if w.budget < 0 {
		where := "its introspection"
		if len(costliest) > 0 {
			where = costliest.String()
		}
		return gqlerror.WrapPath(nil, fmt.Errorf("%w operation: complexity %d, more than the %d allowed (--max-complexity); the costliest is %s: ask for fewer items, lists or fields",
			errkind.Invalid, c.max-w.budget, c.max, where))
	}
	if readsOnce(oc) {
		lists.SingleRead(ctx)
	}
	req := requestFrom(ctx)
	if req == nil || c.inFlight == nil || oc.Operation.Operation == ast.Subscription {
		// A subscription holds no share of the budget for as long as it
		// lasts: its own bounds are --max-subscriptions-per-*.
		return nil
	}
	cost := int64(max(c.max-w.budget, 1))
	if err := c.inFlight.acquire(ctx, cost); err != nil {
		return gqlerror.WrapPath(nil, errTimeout)
	}
	req.release = func() { c.inFlight.release(cost) } // when the response is written
	return nil
}

// costWalk estimates an operation's complexity as gqlgen does: a field
// costs its ComplexityRoot function of its children's cost, or 1 plus
// their cost; siblings add up. It also checks the bounds of the arguments
// the lists service will check (a list's limit, the ids of entities, the
// values of a search, the size of a batch), so that a request past one is
// told which, not that it costs too much. Introspection fields are left to
// introspectionWalk.
type costWalk struct {
	ctx   context.Context
	es    graphql.ExecutableSchema
	oc    *graphql.OperationContext
	lists *lists.Service
}

// fieldCosts is a path of fields, each with its cost, from the costliest
// root field down through the costliest child of each.
type fieldCosts []fieldCost

type fieldCost struct {
	name string
	cost int
}

func (p fieldCosts) String() string {
	var b strings.Builder
	for i, f := range p {
		if i > 0 {
			b.WriteString(" › ")
		}
		fmt.Fprintf(&b, "%s (%d)", f.name, f.cost)
	}
	return b.String()
}

func (w costWalk) walk(sel ast.SelectionSet, typeName string, path ast.Path) (int, fieldCosts, *gqlerror.Error) {
	def := w.es.Schema().Types[typeName]
	total := 0
	var costliest fieldCosts
	for _, f := range graphql.CollectFields(w.oc, sel, []string{typeName}) {
		if f.Name == "__typename" {
			total++
			continue
		}
		if def == nil || f.Name == "__schema" || f.Name == "__type" {
			continue
		}
		fd := def.Fields.ForName(f.Name)
		if fd == nil {
			continue
		}
		fpath := append(slices.Clip(path), ast.PathName(f.Alias))
		args := f.ArgumentMap(w.oc.Variables)
		if err := w.checkArguments(typeName+"."+f.Name, args); err != nil {
			return 0, nil, gqlerror.WrapPath(fpath, err)
		}
		child, below, err := w.walk(f.Selections, fd.Type.Name(), fpath)
		if err != nil {
			return 0, nil, err
		}
		cost, ok := w.es.Complexity(w.ctx, typeName, f.Name, child, args)
		if !ok {
			cost = 1 + child
		}
		total += cost
		if cost > 1 && (len(costliest) == 0 || cost > costliest[0].cost) {
			costliest = append(fieldCosts{{f.Alias, cost}}, below...)
		}
	}
	return total, costliest, nil
}

// checkArguments applies the lists service's bounds to a field's
// arguments, as GraphQL gives them (numbers from a document or from JSON
// variables, lists as []any).
func (w costWalk) checkArguments(field string, args map[string]any) error {
	switch field {
	case "Query.listItems", "Entity.list":
		if n, ok := intArg(args["limit"]); ok {
			return w.lists.CheckLimit(n)
		}
	case "Query.entities":
		if ids, ok := args["entityIds"].([]any); ok && len(ids) > 0 {
			strs := make([]string, 0, len(ids))
			for _, id := range ids {
				s, _ := id.(string)
				strs = append(strs, s)
			}
			typ, _ := args["type"].(string)
			return w.lists.CheckEntities(typ, strs)
		}
	case "Entity.listContains", "Mutation.removeListItemsWithValues":
		if vs, ok := args["values"].([]any); ok {
			return w.lists.CheckValueCount(len(vs))
		}
	case "Mutation.addListItemsBatch":
		if adds, ok := args["adds"].([]any); ok {
			items := 0
			for _, a := range adds {
				if m, ok := a.(map[string]any); ok {
					list, _ := m["items"].([]any)
					items += len(list)
				}
			}
			return w.lists.CheckBatch(len(adds), items)
		}
	}
	return nil
}

// intArg reads an integer argument.
func intArg(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int32:
		return int(n), true
	case int64:
		return int(max(min(n, math.MaxInt32), math.MinInt32)), true
	case json.Number:
		i, err := n.Int64()
		return int(max(min(i, math.MaxInt32), math.MinInt32)), err == nil
	}
	return 0, false
}

// introspectionWalk counts the introspection fields an operation would
// resolve against budget, and stops once it is spent.
type introspectionWalk struct {
	ast    *ast.Schema
	schema *introspection.Schema
	vars   map[string]any
	budget int
}

func (w *introspectionWalk) root(set ast.SelectionSet) {
	w.each(set, func(f *ast.Field) {
		switch f.Name {
		case "__schema":
			w.spend(1)
			w.object(f.SelectionSet, w.schema)
		case "__type":
			w.spend(1)
			name, _ := f.ArgumentMap(w.vars)["name"].(string)
			if def := w.ast.Types[name]; def != nil {
				w.object(f.SelectionSet, introspection.WrapTypeFromDef(w.ast, def))
			}
		}
	})
}

// object counts a selection on one introspection object.
func (w *introspectionWalk) object(set ast.SelectionSet, v any) {
	w.each(set, func(f *ast.Field) {
		w.spend(1)
		switch v := v.(type) {
		case *introspection.Schema:
			switch f.Name {
			case "types":
				for _, t := range v.Types() {
					w.object(f.SelectionSet, &t)
				}
			case "queryType":
				w.object(f.SelectionSet, v.QueryType())
			case "mutationType":
				w.object(f.SelectionSet, v.MutationType())
			case "subscriptionType":
				w.object(f.SelectionSet, v.SubscriptionType())
			case "directives":
				for _, d := range v.Directives() {
					w.object(f.SelectionSet, &d)
				}
			}
		case *introspection.Type:
			if v == nil {
				return
			}
			switch f.Name {
			case "fields":
				for _, x := range v.Fields(true) {
					w.object(f.SelectionSet, &x)
				}
			case "inputFields":
				for _, x := range v.InputFields() {
					w.object(f.SelectionSet, &x)
				}
			case "enumValues":
				w.spend(len(v.EnumValues(true)) * len(f.SelectionSet))
			case "interfaces":
				for _, t := range v.Interfaces() {
					w.object(f.SelectionSet, &t)
				}
			case "possibleTypes":
				for _, t := range v.PossibleTypes() {
					w.object(f.SelectionSet, &t)
				}
			case "ofType":
				w.object(f.SelectionSet, v.OfType())
			}
		case *introspection.Field:
			switch f.Name {
			case "args":
				for _, a := range v.Args {
					w.object(f.SelectionSet, &a)
				}
			case "type":
				w.object(f.SelectionSet, v.Type)
			}
		case *introspection.InputValue:
			if f.Name == "type" {
				w.object(f.SelectionSet, v.Type)
			}
		case *introspection.Directive:
			if f.Name == "args" {
				for _, a := range v.Args {
					w.object(f.SelectionSet, &a)
				}
			}
		}
	})
}

// each calls visit for every field of a selection, fragments expanded,
// until the budget is spent.
func (w *introspectionWalk) each(set ast.SelectionSet, visit func(*ast.Field)) {
	for _, sel := range set {
		if w.budget < 0 {
			return
		}
		switch s := sel.(type) {
		case *ast.Field:
			visit(s)
		case *ast.InlineFragment:
			w.each(s.SelectionSet, visit)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				w.each(s.Definition.SelectionSet, visit)
			}
		}
	}
}

func (w *introspectionWalk) spend(n int) { w.budget -= n }

// listComplexity makes a list's cost grow with what it may return: its limit
// (default 100; a limit past maxLimit counts as maxLimit, since the
// resolver refuses it with its own error), and the entities of an entities
// query (up to maxEntities, likewise).
func listComplexity(maxLimit, maxEntities int) exec.ComplexityRoot {
	var c exec.ComplexityRoot
	limitOf := func(limit *int32) int {
		if limit == nil || *limit < 1 {
			return lists.DefaultLimit
		}
		return min(int(*limit), maxLimit)
	}
	// A page costs its items' fields; a count reads as much as a default
	// page (its keys); a search its values' items.
	c.Entity.List = func(child int, _ string, _ *string, _, _ *model.Time, limit *int32, _ *string, _ *bool) int {
		return 1 + child*limitOf(limit)
	}
	c.Query.ListItems = func(child int, _, _, _ string, _ *string, _, _ *model.Time, limit *int32, _ *string, _ *bool) int {
		return 1 + child*limitOf(limit)
	}
	c.Entity.ListCount = func(int, string, *string, *model.Time, *model.Time) int { return 1 + lists.DefaultLimit }
	c.Query.ListCount = func(int, string, string, string, *string, *model.Time, *model.Time) int {
		return 1 + lists.DefaultLimit
	}
	c.Entity.ListContains = func(child int, _ string, _ *string, vs []values.Value, _ *model.Time) int { return 1 + child*len(vs) }
	c.Query.Entities = func(child int, _ string, ids []string) int { return 1 + child*min(max(1, len(ids)), maxEntities) }
	c.Mutation.AddListItems = func(child int, _ model.ListRefInput, items []model.ListItemInput) int { return 1 + child + len(items) }
	c.Mutation.AddListItemsBatch = func(child int, adds []model.ListAddInput) int {
		n := 1
		for _, a := range adds {
			n += child + len(a.Items)
		}
		return n
	}
	c.Mutation.RemoveListItemsWithValues = func(child int, _ model.ListRefInput, vs []values.Value) int { return 1 + child + len(vs) }
	return c
}

// readsOnce reports whether an operation makes at most one read of a
// list: a query whose one root field is listItems or listCount, or entity
// with one list, listCount or listContains field.
func readsOnce(oc *graphql.OperationContext) bool {
	if oc.Operation.Operation != ast.Query {
		return false
	}
	root := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Query"})
	if len(root) != 1 {
		return false
	}
	switch root[0].Name {
	case "listItems", "listCount":
		return true
	case "entity":
		reads := 0
		for _, f := range graphql.CollectFields(oc, root[0].Selections, []string{"Entity"}) {
			if f.Name == "list" || f.Name == "listCount" || f.Name == "listContains" {
				reads++
			}
		}
		return reads <= 1
	}
	return false
}
