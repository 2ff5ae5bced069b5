package graph

import (
	"context"
	"io"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/graph/exec"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
)

// NewExecutableSchema is gqlgen's generated executable schema with a plan
// in front of it for the hottest operation, a query whose one root field
// is listItems: that plan calls the resolver and writes the page straight
// into the response, without gqlgen's field set, field contexts and
// argument maps around the one resolver. Everything else, and every such
// query the plan cannot answer exactly as gqlgen would, goes to gqlgen.
// The plan runs where gqlgen's execution would (inside the executor, after
// every guard and extension has met the operation, before the response
// interceptors), so every transport and every rule meets it alike.
func NewExecutableSchema(svc *lists.Service) graphql.ExecutableSchema {
	r := NewResolver(svc)
	return planned{ExecutableSchema: exec.NewExecutableSchema(exec.Config{Resolvers: r}), query: &queryResolver{r}}
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
	if p, ok := s.listItemsPlan(ctx); ok {
		return p.responses()
	}
	return s.ExecutableSchema.Exec(ctx)
}

// listItemsPlan is the plan of an operation that is one listItems query,
// or false for gqlgen to run it. Tests compare the two through
// model.WithGQLGenMarshaling, under which gqlgen runs every operation.
func (s planned) listItemsPlan(ctx context.Context) (listItemsPlan, bool) {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation.Operation != ast.Query || model.GQLGenMarshaling(ctx) || ctx.Value(withoutPlans{}) != nil {
		return listItemsPlan{}, false
	}
	// The root fields as gqlgen collects them: fragments, @skip and
	// @include resolved.
	fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, queryImplementors)
	if len(fields) != 1 || fields[0].Name != "listItems" || len(fields[0].Deferrables) > 0 {
		return listItemsPlan{}, false
	}
	args, ok := listItemsArgs(fields[0].ArgumentMap(oc.Variables))
	if !ok {
		return listItemsPlan{}, false // gqlgen words the error
	}
	return listItemsPlan{resolver: s.query, oc: oc, field: fields[0], args: args}, true
}

// listItemsArguments are listItems's arguments, converted as gqlgen's
// generated code converts them.
type listItemsArguments struct {
	entityType, entityID, feature string
	version, after                *string
	minTimestamp, maxTimestamp    *model.Time
	limit                         *int32
	distinct                      *bool
}

// listItemsArgs converts the arguments of listItems (defaults applied,
// variables substituted), or reports false when one does not convert:
// gqlgen then answers with its error and path.
func listItemsArgs(raw map[string]any) (a listItemsArguments, ok bool) {
	ok = true
	str := func(name string, to *string) {
		if v, present := raw[name]; present && ok {
			*to, ok = v.(string) // validation left nothing else for String and a variable ID
		}
	}
	optStr := func(name string) *string {
		v, present := raw[name]
		if !present || v == nil || !ok {
			return nil
		}
		s, isStr := v.(string)
		ok = isStr
		return &s
	}
	optTime := func(name string) *model.Time {
		v, present := raw[name]
		if !present || v == nil || !ok {
			return nil
		}
		t := new(model.Time)
		ok = t.UnmarshalGQL(v) == nil
		return t
	}
	str("entityType", &a.entityType)
	str("entityId", &a.entityID)
	str("feature", &a.feature)
	a.version, a.after = optStr("version"), optStr("after")
	a.minTimestamp, a.maxTimestamp = optTime("minTimestamp"), optTime("maxTimestamp")
	if v, present := raw["limit"]; present && v != nil && ok {
		n, err := model.UnmarshalInt32(v)
		a.limit, ok = &n, err == nil
	}
	if v, present := raw["distinct"]; present && v != nil && ok {
		b, isBool := v.(bool)
		a.distinct, ok = &b, isBool
	}
	return a, ok
}

type listItemsPlan struct {
	resolver *queryResolver
	oc       *graphql.OperationContext
	field    graphql.CollectedField
	args     listItemsArguments
}

// responses answers once, as gqlgen's generated Exec does for a query
// without @defer.
func (p listItemsPlan) responses() graphql.ResponseHandler {
	first := true
	return func(ctx context.Context) *graphql.Response {
		if !first {
			return nil
		}
		first = false
		return &graphql.Response{Data: p.data(ctx)}
	}
}

// data runs the resolver as gqlgen's generated code does (the same field
// context, resolver middleware, error location and panic recovery) and
// writes {"alias": page}, or null when it failed: listItems is non-null,
// so its error nulls the whole data, as gqlgen's does.
func (p listItemsPlan) data(ctx context.Context) []byte {
	ctx = graphql.WithFieldContext(ctx, &graphql.FieldContext{Object: "Query"})
	ctx = graphql.WithRootFieldContext(ctx, &graphql.RootFieldContext{Object: p.field.Name, Field: p.field})
	var page model.ListPage
	ok := false
	p.oc.RootResolverMiddleware(ctx, func(ctx context.Context) graphql.Marshaler {
		fc := &graphql.FieldContext{Object: "Query", Field: p.field, IsMethod: true, IsResolver: true}
		page, ok = p.resolve(graphql.WithFieldContext(ctx, fc), fc)
		return nil
	})
	if !ok {
		return []byte("null")
	}
	// Room for most pages at once: growing the buffer item by item costs
	// more than the page's writing.
	w := byteWriter{b: make([]byte, 0, 128+256*len(page.Items))}
	w.b = append(w.b, '{')
	graphql.MarshalString(p.field.Alias).MarshalGQL(&w)
	w.b = append(w.b, ':')
	model.WriteListPage(p.oc, p.field.Selections, &page).MarshalGQL(&w)
	return append(w.b, '}')
}

func (p listItemsPlan) resolve(ctx context.Context, fc *graphql.FieldContext) (page model.ListPage, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			p.oc.Error(ctx, p.oc.Recover(ctx, r))
			ok = false
		}
	}()
	a := p.args
	res, err := p.oc.ResolverMiddleware(ctx, func(ctx context.Context) (any, error) {
		return p.resolver.ListItems(ctx, a.entityType, a.entityID, a.feature, a.version, a.minTimestamp, a.maxTimestamp, a.limit, a.after, a.distinct)
	})
	if err != nil {
		p.oc.Error(ctx, graphql.AddFieldLocationToError(ctx, err))
		return model.ListPage{}, false
	}
	page, ok = res.(model.ListPage)
	if !ok {
		p.oc.Errorf(ctx, "unexpected type %T from middleware/directive chain, should be %T", res, page)
		return model.ListPage{}, false
	}
	fc.Result = page
	return page, true
}

// byteWriter is an io.Writer that appends to one slice, which becomes the
// response's data without a copy.
type byteWriter struct{ b []byte }

var _ io.Writer = (*byteWriter)(nil)

func (w *byteWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
