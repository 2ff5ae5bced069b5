package graph

import (
	"context"
	"io"
	"maps"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/graph/exec"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
)

// NewExecutableSchema is gqlgen's generated executable schema with plans
// in front of it for the hottest operations, a query whose one root field
// is listItems or listCount: a plan calls the resolver and writes its
// result straight into the response, without gqlgen's field set, field
// contexts and argument maps around the one resolver. Everything else,
// and every such query a plan cannot answer exactly as gqlgen would, goes
// to gqlgen. A plan runs where gqlgen's execution would (inside the
// executor, after every guard and extension has met the operation, before
// the response interceptors), so every transport and every rule meets it
// alike.
func NewExecutableSchema(svc *lists.Service) graphql.ExecutableSchema {
	r := NewResolver(svc)
	generated := exec.NewExecutableSchema(exec.Config{Resolvers: r})
	es := exec.NewExecutableSchema(exec.Config{Resolvers: r, Schema: servedSchema(generated.Schema())})
	return planned{ExecutableSchema: es, query: &queryResolver{r}}
}

// servedSchema is the generated schema without @defer, which gqlparser
// declares in every schema: no transport here sends a deferred part, and
// the guards refuse it (introspection does not offer it).
func servedSchema(generated *ast.Schema) *ast.Schema {
	s := *generated
	s.Directives = maps.Clone(generated.Directives)
	delete(s.Directives, "defer")
	return &s
}

// withoutPlans is the context key of WithoutPlans.
type withoutPlans struct{}

// WithoutPlans returns a context in which gqlgen executes every operation,
// for tests to compare the plans with. The gateway never sets it.
func WithoutPlans(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutPlans{}, true)
}

type planned struct {
	graphql.ExecutableSchema // gqlgen's, for everything the plan does not answer
	query                    *queryResolver
}

var queryImplementors = []string{"Query"}

func (s planned) Exec(ctx context.Context) graphql.ResponseHandler {
	if p, ok := s.plan(ctx); ok {
		return p.responses()
	}
	return s.ExecutableSchema.Exec(ctx)
}

// plan is the plan of an operation that is a query of one listItems or
// listCount field, or false for gqlgen to run it. Tests compare the two
// through model.WithGQLGenMarshaling, under which gqlgen runs every
// operation.
func (s planned) plan(ctx context.Context) (rootPlan, bool) {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation.Operation != ast.Query || model.GQLGenMarshaling(ctx) || ctx.Value(withoutPlans{}) != nil {
		return rootPlan{}, false
	}
	var f graphql.CollectedField
	var a listArguments
	writePage := writePage
	var sel *model.PageSelection // collected when compiled
	if b, ok := ctx.Value(boundKey{}).(*Bound); ok && b.c.operation == oc.Operation {
		f, a = b.c.field, b.args // compiled, and bound to this request's variables
		writePage = b.c.writePage
		sel = &b.c.page
	} else {
		// The root fields as gqlgen collects them: fragments, @skip and
		// @include resolved.
		fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, queryImplementors)
		if len(fields) != 1 || len(fields[0].Deferrables) > 0 {
			return rootPlan{}, false
		}
		f = fields[0]
		if f.Name != "listItems" && f.Name != "listCount" {
			return rootPlan{}, false
		}
		if a, ok = listArgs(f.ArgumentMap(oc.Variables)); !ok {
			return rootPlan{}, false // gqlgen words the error
		}
	}
	p := rootPlan{oc: oc, field: f}
	if f.Name == "listCount" {
		p.resolver = func(ctx context.Context) (any, error) {
			return s.query.ListCount(ctx, a.entityType, a.entityID, a.feature, a.version, a.minTimestamp, a.maxTimestamp)
		}
		p.write = writeCount
		return p, true
	}
	p.resolver = func(ctx context.Context) (any, error) {
		if sel != nil {
			ctx = model.WithSelection(ctx, sel)
		}
		return s.query.ListItems(ctx, a.entityType, a.entityID, a.feature, a.version, a.minTimestamp, a.maxTimestamp, a.limit, a.after, a.distinct)
	}
	p.write = writePage
	return p, true
}

// listArguments are the arguments of listItems and listCount (which has
// no limit, after or distinct), converted as gqlgen's generated code
// converts them.
type listArguments struct {
	entityType, entityID, feature string
	version, after                *string
	minTimestamp, maxTimestamp    *model.Time
	limit                         *int32
	distinct                      *bool
}

// listArgs converts the arguments of listItems or listCount (defaults
// applied, variables substituted), or reports false when one does not
// convert: gqlgen then answers with its error and path.
func listArgs(raw map[string]any) (a listArguments, ok bool) {
	for name, v := range raw {
		if !a.set(name, v) {
			return a, false
		}
	}
	return a, true
}

// set converts one argument as gqlgen's generated code converts it, or
// reports false when it does not convert. A name that is not an argument
// of listItems or listCount is left alone: validation refused any other.
func (a *listArguments) set(name string, v any) bool {
	optStr := func(to **string) bool {
		if v == nil {
			*to = nil
			return true
		}
		s, ok := v.(string)
		*to = &s
		return ok
	}
	optTime := func(to **model.Time) bool {
		if v == nil {
			*to = nil
			return true
		}
		*to = new(model.Time)
		return (*to).UnmarshalGQL(v) == nil
	}
	var ok bool
	switch name {
	case "entityType":
		a.entityType, ok = v.(string) // validation left nothing else for String and a variable ID
	case "entityId":
		a.entityID, ok = v.(string)
	case "feature":
		a.feature, ok = v.(string)
	case "version":
		ok = optStr(&a.version)
	case "after":
		ok = optStr(&a.after)
	case "minTimestamp":
		ok = optTime(&a.minTimestamp)
	case "maxTimestamp":
		ok = optTime(&a.maxTimestamp)
	case "limit":
		if v == nil {
			a.limit = nil
			return true
		}
		n, err := model.UnmarshalInt32(v)
		a.limit, ok = &n, err == nil
	case "distinct":
		if v == nil {
			a.distinct = nil
			return true
		}
		b, isBool := v.(bool)
		a.distinct, ok = &b, isBool
	default:
		return true
	}
	return ok
}

// rootPlan runs one root field's resolver and writes its non-null
// result.
type rootPlan struct {
	oc       *graphql.OperationContext
	field    graphql.CollectedField
	resolver func(ctx context.Context) (any, error)
	// write writes {"alias": result}, or reports false when the result is
	// not of the field's type.
	write func(oc *graphql.OperationContext, field graphql.CollectedField, res any) ([]byte, bool)
}

// responses answers once, as gqlgen's generated Exec does for a query
// without @defer.
func (p rootPlan) responses() graphql.ResponseHandler {
	first := true
	return func(ctx context.Context) *graphql.Response {
		if !first {
			return nil
		}
		first = false
		return &graphql.Response{Data: p.data(ctx)}
	}
}

// data runs the resolver as gqlgen's generated code does (the same root
// and field contexts, resolver middleware, error location and panic
// recovery) and writes {"alias": result}, or null when it failed: both
// fields are non-null, so an error nulls the whole data, as gqlgen's does.
// As in gqlgen's, a panic while writing is not the field's: it is the
// operation's.
func (p rootPlan) data(ctx context.Context) []byte {
	ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: "Query"})
	ctx = graphql.WithRootFieldContext(ctx, &graphql.RootFieldContext{Object: p.field.Name, Field: p.field})
	var data []byte
	p.oc.RootResolverMiddleware(ctx, func(ctx context.Context) graphql.Marshaler {
		fc := &graphql.FieldContext{Object: "Query", Field: p.field, IsMethod: true, IsResolver: true}
		ctx = graphql.WithFieldContext(ctx, fc)
		res, ok := p.resolve(ctx)
		if !ok {
			return nil
		}
		if data, ok = p.write(p.oc, p.field, res); !ok {
			var want any = model.ListPage{}
			if p.field.Name == "listCount" {
				want = int32(0)
			}
			p.oc.Errorf(ctx, "unexpected type %T from middleware/directive chain, should be %T", res, want)
			return nil
		}
		fc.Result = res
		return nil
	})
	if data == nil {
		return []byte("null")
	}
	return data
}

// resolve runs the resolver, or reports false with its error, or its
// panic's, added to the response.
func (p rootPlan) resolve(ctx context.Context) (res any, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			p.oc.Error(ctx, p.oc.Recover(ctx, r))
			res, ok = nil, false
		}
	}()
	res, err := p.oc.ResolverMiddleware(ctx, p.resolver)
	if err != nil {
		p.oc.Error(ctx, graphql.AddFieldLocationToError(ctx, err))
		return nil, false
	}
	return res, true
}

// writePage writes {"alias": page} with the page writer gqlgen's
// generated code calls.
func writePage(oc *graphql.OperationContext, field graphql.CollectedField, res any) ([]byte, bool) {
	return appendPage(field, res, func(p *model.ListPage) graphql.Marshaler { return model.WriteListPage(oc, field.Selections, p) })
}

// writePage writes {"alias": page} with the page's selection collected
// when the document was compiled.
func (c *Compiled) writePage(_ *graphql.OperationContext, field graphql.CollectedField, res any) ([]byte, bool) {
	return appendPage(field, res, c.page.Write)
}

func appendPage(field graphql.CollectedField, res any, writer func(*model.ListPage) graphql.Marshaler) ([]byte, bool) {
	page, ok := res.(model.ListPage)
	if !ok {
		return nil, false
	}
	// Room for most pages at once: growing the buffer item by item costs
	// more than the page's writing. An item takes its value and cursor
	// and about 100 bytes more with every field.
	size := 128 + len(field.Alias)
	for i := range page.Items {
		size += 128 + len(page.Items[i].Value.Bytes) + len(page.Items[i].Cursor)
	}
	w := byteWriter{b: make([]byte, 0, size)}
	w.b = append(w.b, '{')
	graphql.MarshalString(field.Alias).MarshalGQL(&w)
	w.b = append(w.b, ':')
	writer(&page).MarshalGQL(&w)
	return append(w.b, '}'), true
}

// writeCount writes {"alias": n} as gqlgen's marshaler of Int! does.
func writeCount(_ *graphql.OperationContext, field graphql.CollectedField, res any) ([]byte, bool) {
	n, ok := res.(int32)
	if !ok {
		return nil, false
	}
	w := byteWriter{b: make([]byte, 0, len(field.Alias)+16)}
	w.b = append(w.b, '{')
	graphql.MarshalString(field.Alias).MarshalGQL(&w)
	w.b = append(w.b, ':')
	model.MarshalInt32(n).MarshalGQL(&w)
	return append(w.b, '}'), true
}

// byteWriter is an io.Writer that appends to one slice, which becomes the
// response's data without a copy.
type byteWriter struct{ b []byte }

var _ io.Writer = (*byteWriter)(nil)

func (w *byteWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
