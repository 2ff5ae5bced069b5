package guards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// complexityLimit refuses an operation whose complexity passes max before
// it runs: the cost of its fields (costWalk: a list costs its fields times
// its limit) plus the cost of its introspection. Introspection
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
	inFlight *Budget
	callers  *Callers
	lists    *lists.Service // the bounds of arguments, checked first
	measured *opMemo[measured]
}

// Complexity is the guard of --max-complexity, of the callers' budgets and
// of the in-flight budget: svc checks the bounds of arguments the walk
// reads.
func Complexity(max int, inFlight *Budget, callers *Callers, svc *lists.Service) graphql.HandlerExtension {
	return &complexityLimit{max: max, inFlight: inFlight, callers: callers, lists: svc, measured: newOpMemo[measured](4096)}
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
	m, err := c.measure(oc)
	if err != nil {
		return err
	}
	if m.once {
		lists.SingleRead(ctx)
	}
	if m.share > 0 {
		lists.SetScanShare(ctx, m.share)
	}
	op := operation.From(ctx)
	if op == nil {
		return nil
	}
	op.Cost = int64(max(m.total, 1))
	// The caller's budget is charged before anything runs.
	q := c.callers.Charge(ctx, op.Caller, op.Principal, op.Cost)
	op.Quota = q
	if q.Throttled > 0 {
		return gqlerror.WrapPath(nil, throttled(q))
	}
	if oc.Operation.Operation == ast.Subscription {
		// A subscription holds no share of the in-flight budget for as
		// long as it lasts: its own bounds are --max-subscriptions-per-*.
		// Its catch-up is charged page by page, as the reads it is, and
		// held within its caller's share of the catch-up bytes.
		lists.SetCatchUp(ctx, op.Caller, c.catchUpCharge(op))
		return nil
	}
	caller, cost := op.Caller, op.Cost
	switch err := c.inFlight.acquire(ctx, caller, cost); {
	case errors.Is(err, errShare):
		c.callers.Refund(caller, op.Principal, q)
		c.callers.Shared(ctx, caller)
		op.Quota.Throttled = time.Second
		return gqlerror.WrapPath(nil, fmt.Errorf("%w: this caller's operations running hold %s of the complexity this gateway runs at once (--caller-max-in-flight-share of --max-in-flight-complexity); retry in 1 s, or once they answer",
			errkind.Throttled, "its share"))
	case err != nil:
		c.callers.Refund(caller, op.Principal, q)
		return gqlerror.WrapPath(nil, errkind.DeadlinePassed)
	}
	op.OnEnd(func() { c.inFlight.release(caller, cost) }) // once its answer is made
	return nil
}

// catchUpCharge prices the catch-up pages of a subscription as reads:
// each item given what one item of its selection costs (the
// subscription's cost without its root field), and the records of other
// lists looked at to find them as keys. A page the caller's budget cannot
// pay for ends the subscription THROTTLED.
func (c *complexityLimit) catchUpCharge(op *operation.Operation) watch.Charge {
	perItem := max(op.Cost-1, 1)
	return func(ctx context.Context, items, looked int) error {
		cost := int64(items)*perItem + int64((looked+keyRowsPerPoint-1)/keyRowsPerPoint)
		if cost == 0 {
			return nil
		}
		q := c.callers.Charge(ctx, op.Caller, op.Principal, cost)
		if q.Throttled > 0 {
			return fmt.Errorf("%w: this subscription's catch-up read %d items (%d points), and its caller has %d of its %d left, refilling at %d a second: retry in %d s (--caller-cost-rate, --caller-cost-burst, or the caller's own budget)",
				errkind.Throttled, items, cost, q.Remaining, q.Limit, int64(q.Rate), q.RetrySeconds())
		}
		return nil
	}
}

// measure gives an operation's figures: its complexity, whether it reads
// one list at most (readsOnce), and its scans' share of rows
// (shareScans). An operation whose figures do not depend on its variables
// (the arguments that set a cost are literals, and it has no directives
// and no introspection) is measured once per catalog snapshot: its
// document comes from the parsed-query cache, the same for every request
// of the same text, and the figures are kept with it.
func (c *complexityLimit) measure(oc *graphql.OperationContext) (measured, *gqlerror.Error) {
	generation := c.lists.CatalogGeneration()
	if m, ok := c.measured.get(oc.Operation); ok && m.generation == generation {
		return m, nil
	}
	varies := strings.Contains(oc.RawQuery, "@") // @skip, @include: fields by variables
	scans := 0
	cw := costWalk{oc: oc, schema: c.es.Schema(), lists: c.lists, varies: &varies, copies: 1, scans: &scans}
	n, costliest, err := cw.walk(oc.Operation.SelectionSet, rootType(oc.Operation.Operation), nil)
	if err != nil {
		return measured{}, err
	}
	n, share := c.shareScans(n, scans)
	w := introspectionWalk{ast: c.es.Schema(), schema: c.schema, vars: oc.Variables, budget: c.max - n}
	w.root(oc.Operation.SelectionSet)
	total := c.max - w.budget
	if w.budget < 0 {
		where := "its introspection"
		if len(costliest) > 0 {
			where = costliest.String()
		}
		return measured{}, gqlerror.WrapPath(nil, fmt.Errorf("%w operation: complexity %d, more than the %d allowed (--max-complexity); the costliest is %s: ask for fewer items, lists or fields",
			errkind.Invalid, total, c.max, where))
	}
	m := measured{total: total, once: readsOnce(oc), share: share, generation: generation}
	if !varies {
		c.measured.add(oc.Operation, m)
	}
	return m, nil
}

// minShareRows is the fewest rows each of an operation's counts and
// histograms may be left to look at when they share (shareScans): an
// operation that would leave them fewer is refused, as one past
// --max-complexity is.
const minShareRows = 1000

// shareScans prices an operation whose counts and histograms of lists
// without a cap, each priced at the --max-count keys it may look at, take
// it past --max-complexity: they share what the rest of it leaves, each
// looking at no more than its share of rows, so that a dashboard's counts
// of ten lists fit one operation. It returns the operation's complexity
// and each scan's share of rows (0: each may look at --max-count).
func (c *complexityLimit) shareScans(n, scans int) (int, int) {
	if n <= c.max || scans == 0 {
		return n, 0
	}
	maxCount := c.lists.Limits().MaxCount
	rest := n - scans*(1+(maxCount+keyRowsPerPoint-1)/keyRowsPerPoint)
	keysEach := (c.max-rest)/scans - 1
	if rest < 0 || keysEach*keyRowsPerPoint < minShareRows {
		return n, 0
	}
	return rest + scans*(1+keysEach), min(maxCount, keysEach*keyRowsPerPoint)
}

// rootType is the schema's type of an operation's root fields.
func rootType(op ast.Operation) string {
	switch op {
	case ast.Mutation:
		return "Mutation"
	case ast.Subscription:
		return "Subscription"
	}
	return "Query"
}

type measured struct {
	total int
	once  bool
	share int // rows each count or histogram of a list without a cap may look at; 0: --max-count
	// generation is the catalog's when it was measured: a page's cost
	// follows its feature's cap, a list of features' the features there
	// are.
	generation uint64
}

// opMemo keeps a figure of the operations seen last, by operation: a
// pointer into a cached document, which never changes. The key is a weak
// pointer, so that what is kept here never keeps a document the query
// cache has let go.
type opMemo[T any] struct {
	mu  sync.Mutex
	lru *simplelru.LRU[weak.Pointer[ast.OperationDefinition], T]
}

func newOpMemo[T any](n int) *opMemo[T] {
	lru, _ := simplelru.NewLRU[weak.Pointer[ast.OperationDefinition], T](n, nil)
	return &opMemo[T]{lru: lru}
}

func (m *opMemo[T]) get(op *ast.OperationDefinition) (T, bool) {
	key := weak.Make(op)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Get(key)
}

func (m *opMemo[T]) add(op *ast.OperationDefinition, v T) {
	key := weak.Make(op)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.Add(key, v)
}

// costWalk estimates an operation's complexity: a field costs 1 plus its
// children's cost, and a list field its children's cost times the items
// it may return (fieldCost); siblings add up. It also checks the bounds of
// the arguments the lists service will check (a list's limit, the ids of
// entities, the values of a search, the size of a batch), so that a
// request past one is told which, not that it costs too much. It reads
// only the arguments it needs, from the document or the variables, and
// leaves the rest to gqlgen. Introspection fields are left to
// introspectionWalk.
type costWalk struct {
	oc         *graphql.OperationContext
	schema     *ast.Schema
	lists      *lists.Service
	varies     *bool  // set when a cost or a bound was read from a variable
	entityType string // of the entities whose fields are walked
	// copies is how many times the fields walked are resolved (the ids of
	// the entities they are under), and scans counts, copies included,
	// the counts and histograms priced at --max-count keys: the ones that
	// share what --max-complexity leaves when they do not all fit
	// (shareScans).
	copies int
	scans  *int
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
		fmt.Fprintf(&b, "%s (%d)", errkind.Clip(f.name), f.cost) // an alias the client chose
	}
	return b.String()
}

func (w costWalk) walk(sel ast.SelectionSet, typeName string, path ast.Path) (int, fieldCosts, *gqlerror.Error) {
	def := w.schema.Types[typeName]
	total := 0
	var costliest fieldCosts
	for _, f := range graphql.CollectFields(w.oc, sel, []string{typeName}) {
		if f.Name == "__typename" {
			total++
			continue
		}
		if f.Name == "__schema" || f.Name == "__type" {
			*w.varies = true // introspectionWalk reads __type's name
			continue
		}
		if def == nil {
			continue
		}
		fd := def.Fields.ForName(f.Name)
		if fd == nil {
			continue
		}
		fpath := append(slices.Clip(path), ast.PathName(f.Alias))
		below := w
		if field := typeName + "." + f.Name; field == "Query.entity" || field == "Query.entities" {
			below.entityType, _ = w.arg(f.Field, "type").(string) // the entity type of its lists
			if field == "Query.entities" {
				below.copies = w.copies * max(1, len(asList(w.arg(f.Field, "entityIds"))))
			}
		}
		child, belowCosts, err := below.walk(f.Selections, fd.Type.Name(), fpath)
		if err != nil {
			return 0, nil, err
		}
		cost, cerr := w.fieldCost(typeName+"."+f.Name, f.Field, child)
		if cerr != nil {
			return 0, nil, gqlerror.WrapPath(fpath, cerr)
		}
		total += cost
		if cost > 1 && (len(costliest) == 0 || cost > costliest[0].cost) {
			costliest = append(fieldCosts{{f.Alias, cost}}, belowCosts...)
		}
	}
	return total, costliest, nil
}

// keyRowsPerPoint prices the rows a read looks at for their keys alone,
// and the rows a removal deletes: this many cost as much as one field of
// an item returned (a count of 100,000 keys took about 100 times a
// 100-item page, on Cassandra and the embedded store alike).
const keyRowsPerPoint = 10

// fieldCost is the cost of a field whose children cost child, after the
// lists service's bounds on its arguments. The cost follows the rows a
// field may read: a page costs its items' fields (limit, default 100),
// plus the keys it may look at beyond them (a distinct page, a page of a
// feature created again, a capped list's page below its newest item); a
// count or a histogram the keys it may look at (scanRows), a histogram
// its buckets too; a search or a removal the keys it may look at
// (--max-count), a search its items too, a removal what it deletes;
// entities their lists;
// an add its items; a list of features the fields of each feature the
// catalog's snapshot holds.
func (w costWalk) fieldCost(field string, f *ast.Field, child int) (int, error) {
	limits := w.lists.Limits()
	keys := func(rows int) int { return (rows + keyRowsPerPoint - 1) / keyRowsPerPoint }
	switch field {
	case "Query.listItems", "Entity.list":
		limit := lists.DefaultLimit
		if n, ok := intArg(w.arg(f, "limit")); ok {
			if err := w.lists.CheckLimit(n); err != nil {
				return 0, err
			}
			limit = int(n)
		}
		cost := 1 + child*limit
		feature := w.feature(field, f)
		distinct, _ := w.arg(f, "distinct").(bool)
		if distinct || (feature != nil && feature.ItemsSince != 0) {
			cost += keys(limit * limits.MaxScanFactor)
		}
		if feature != nil && feature.MaxItems > 0 && (w.arg(f, "after") != nil || w.arg(f, "maxTimestamp") != nil) {
			cost += keys(feature.MaxItems) // ranked from the newest item
		}
		return cost, nil
	case "Query.listCount", "Entity.listCount":
		return 1 + keys(w.scanRows(field, f)), nil
	case "Query.listHistogram", "Entity.listHistogram":
		n, err := w.buckets(f)
		if err != nil {
			return 0, err
		}
		return 1 + child*n + keys(w.scanRows(field, f)), nil
	case "Query.listFeatures":
		// As many features as the catalog holds: its data, not the
		// arguments, sets how many.
		entityType, _ := w.arg(f, "entityType").(string)
		return 1 + child*w.lists.KnownCount(entityType), nil
	case "Query.entities":
		ids := asList(w.arg(f, "entityIds"))
		if len(ids) > 0 {
			strs := make([]string, 0, len(ids))
			for _, id := range ids {
				s, _ := id.(string)
				strs = append(strs, s)
			}
			typ, _ := w.arg(f, "type").(string)
			if err := w.lists.CheckEntities(typ, strs); err != nil {
				return 0, err
			}
		}
		return 1 + child*max(1, len(ids)), nil
	case "Entity.listContains", "Mutation.removeListItemsWithValues", "Mutation.removeListItemsWithValue":
		n := 1
		if field != "Mutation.removeListItemsWithValue" {
			n = len(asList(w.arg(f, "values")))
			if err := w.lists.CheckValueCount(n); err != nil {
				return 0, err
			}
		}
		if field == "Entity.listContains" {
			return 1 + child*n + keys(limits.MaxCount), nil
		}
		return 1 + child + n + 2*keys(limits.MaxCount), nil // the keys looked at, and the rows deleted
	case "Mutation.addListItems":
		return 1 + child + len(asList(w.arg(f, "items"))), nil
	case "Mutation.addListItemsBatch":
		adds := asList(w.arg(f, "adds"))
		cost, items := 1, 0
		for _, a := range adds {
			m, _ := a.(map[string]any)
			n := len(asList(m["items"]))
			items += n
			cost += child + n
		}
		if err := w.lists.CheckBatch(len(adds), items); err != nil {
			return 0, err
		}
		return cost, nil
	}
	return 1 + child, nil
}

// scanRows is the most rows a count or histogram may look at: a capped
// list's cap (its scan stops past it), or --max-count, which it then
// shares with the operation's other such scans when they do not all fit
// (shareScans).
func (w costWalk) scanRows(field string, f *ast.Field) int {
	maxCount := w.lists.Limits().MaxCount
	if rows := store.CapRows(w.feature(field, f)); rows > 0 {
		return min(rows, maxCount)
	}
	*w.scans += w.copies
	return maxCount
}

// buckets checks a histogram's window and width, and says how many
// buckets it has. A window left open ends at the clock, so its figures
// are not kept. A time that does not parse is gqlgen's to refuse, later:
// it is priced as one bucket meanwhile.
func (w costWalk) buckets(f *ast.Field) (int, error) {
	seconds, ok := intArg(w.arg(f, "bucketSeconds"))
	from, okFrom := timeArg(w.arg(f, "minTimestamp"))
	to, okTo := timeArg(w.arg(f, "maxTimestamp"))
	if w.arg(f, "maxTimestamp") == nil {
		*w.varies = true
		to, okTo = w.lists.Now().UnixNano(), true
	}
	if !ok || !okFrom || !okTo || seconds > math.MaxInt32 {
		return 1, nil // gqlgen refuses a bucketSeconds past a 32-bit Int
	}
	return w.lists.CheckBuckets(from, to, seconds*int64(time.Second))
}

// timeArg reads a Time argument as it was sent: an RFC 3339 string.
func timeArg(v any) (int64, bool) {
	s, _ := v.(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UnixNano(), true
}

// feature is the feature a page, count or histogram reads, as the
// catalog's snapshot knows it (nil when it does not: the read finds out).
func (w costWalk) feature(field string, f *ast.Field) *store.Feature {
	entityType := w.entityType
	if strings.HasPrefix(field, "Query.") {
		entityType, _ = w.arg(f, "entityType").(string)
	}
	name, _ := w.arg(f, "feature").(string)
	version, _ := w.arg(f, "version").(string)
	return w.lists.Known(entityType, name, version)
}

// arg is the value of a field's argument as GraphQL gives it (numbers from
// a document or from JSON variables, lists as []any), or nil.
func (w costWalk) arg(f *ast.Field, name string) any {
	a := f.Arguments.ForName(name)
	if a == nil {
		return nil
	}
	if usesVariable(a.Value) {
		*w.varies = true
	}
	v, _ := a.Value.Value(w.oc.Variables)
	return v
}

func usesVariable(v *ast.Value) bool {
	if v.Kind == ast.Variable {
		return true
	}
	for _, c := range v.Children {
		if usesVariable(c.Value) {
			return true
		}
	}
	return false
}

// asList is an argument of list type as GraphQL coerces it: a single value
// stands for a list of one.
func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}

// intArg reads an integer argument, as it was sent (gqlgen's coercion
// refuses it later if it is not a 32-bit Int).
func intArg(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
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

// readsOnce reports whether an operation makes at most one read of a
// list: a query whose one root field is listItems, listCount or
// listHistogram, or entity with one list, listCount, listHistogram or
// listContains field.
func readsOnce(oc *graphql.OperationContext) bool {
	if oc.Operation.Operation != ast.Query {
		return false
	}
	root := graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Query"})
	if len(root) != 1 {
		return false
	}
	switch root[0].Name {
	case "listItems", "listCount", "listHistogram":
		return true
	case "entity":
		reads := 0
		for _, f := range graphql.CollectFields(oc, root[0].Selections, []string{"Entity"}) {
			if f.Name == "list" || f.Name == "listCount" || f.Name == "listHistogram" || f.Name == "listContains" {
				reads++
			}
		}
		return reads <= 1
	}
	return false
}
