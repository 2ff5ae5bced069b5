package endpoint

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/graph"
	"github.com/listgate/listgate/guards"
	"github.com/listgate/listgate/operation"
)

// Compiled documents. Production clients send the same few documents
// again and again, so what gqlgen does for each request that does not
// depend on its variables is done once per document: the first request of
// a document goes through gqlgen (parsed, validated, its variables
// coerced, every guard), and its operation is compiled then (graph.Compile)
// and kept by its text and operation name. A later request of it skips
// gqlgen's decoding of the body into maps, its parameter extensions (APQ
// and the document limits, which the document passed), its document cache
// and its coercion of variables: the plan reads the variables from their
// JSON bytes. Every guard that meets an operation's context then meets it
// as on gqlgen's path: the same extensions, called in the same order
// (Scopes, Depth, OneStream, Complexity with the budgets, and the rest),
// and it is dispatched by the same executor, whose interceptors (the
// response bound, extensions.cost, the span, the check run of mutations)
// and error presenter are gqlgen's path's. A request a plan cannot take
// exactly as gqlgen would (see graph.Compiled) goes to gqlgen.

// request is a request's GraphQL parameters as they were read: a POST's
// body or a subscribe message's payload split into its members, its
// variables kept as their JSON until gqlgen needs them as a map; or, for
// what split does not take, decoded whole into params.
type request struct {
	params     *graphql.RawParams
	documentID string
	// variables is the variables' JSON as sent (split only); nil when
	// decoded into params, or none were sent.
	variables jsontext.Value
	// compilable: split, with no extension but cost (a persisted query
	// goes through gqlgen's APQ).
	compilable bool
}

// paramNames are the members of a request that split takes, named
// exactly so.
var paramNames = [...]string{"query", "operationName", "variables", "extensions", "documentId"}

// split reads body as a strict JSON object of query, operationName and
// documentId (strings or null), variables and extensions (objects or
// null), each named exactly so, leaving the variables as JSON. It reports
// false for anything else, which decodeParams then decodes or refuses as
// before.
func split(body []byte, req *request) bool {
	d := splitters.Get().(*splitter)
	defer splitters.Put(d)
	d.r.Reset(body)
	d.dec.Reset(&d.r)
	if tok, err := d.dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	var extensions jsontext.Value
	for d.dec.PeekKind() == '"' {
		tok, err := d.dec.ReadToken()
		if err != nil {
			return false
		}
		name, kind := tok.String(), d.dec.PeekKind()
		switch {
		case kind == 'n' && slices.Contains(paramNames[:], name):
			if _, err := d.dec.ReadToken(); err != nil {
				return false
			}
		case kind == '"' && (name == "query" || name == "operationName" || name == "documentId"):
			tok, err := d.dec.ReadToken()
			if err != nil {
				return false
			}
			switch name {
			case "query":
				req.params.Query = tok.String()
			case "operationName":
				req.params.OperationName = tok.String()
			default:
				req.documentID = tok.String()
			}
		case kind == '{' && (name == "variables" || name == "extensions"):
			v, err := d.dec.ReadValue()
			if err != nil {
				return false
			}
			// The value as it is in the body, which outlives the decoder's
			// buffer.
			end := int(d.dec.InputOffset())
			v = jsontext.Value(body[end-len(v) : end])
			if name == "variables" {
				req.variables = v
			} else {
				extensions = v
			}
		default:
			for _, known := range paramNames {
				if strings.EqualFold(name, known) {
					return false // of the wrong kind, or named in another case: decodeParams's
				}
			}
			if d.dec.SkipValue() != nil {
				return false
			}
		}
	}
	if tok, err := d.dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return false
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return false // something after the object
	}
	if extensions != nil && decodeJSON(extensions, &req.params.Extensions) != nil {
		return false
	}
	req.compilable = onlyCost(req.params.Extensions)
	return true
}

// onlyCost reports whether a request's extensions are none but cost: any
// other (a persisted query) is gqlgen's.
func onlyCost(extensions map[string]any) bool {
	_, cost := extensions["cost"]
	return len(extensions) == 0 || len(extensions) == 1 && cost
}

// splitters split requests.
var splitters = sync.Pool{New: func() any { return new(splitter) }}

type splitter struct {
	r   bytes.Reader
	dec jsontext.Decoder
}

// variablesDecoded puts the variables in params, decoded as decodeParams
// decodes them, for gqlgen.
func (req *request) variablesDecoded() {
	if req.variables != nil {
		_ = decodeJSON(req.variables, &req.params.Variables) // strict JSON, checked by split
		req.variables = nil
	}
}

// plan is what a request of a compiled document needs: the document as
// gqlgen parsed and validated it, its compiled operation, and what gqlgen
// put in its operation context that is the executor's, not the request's.
type plan struct {
	doc      *ast.QueryDocument
	compiled *graph.Compiled // nil: every request of it goes to gqlgen
	recover  graphql.RecoverFunc
	fields   graphql.FieldMiddleware
	roots    graphql.RootFieldMiddleware
}

// planKey names the plan of one operation of one document.
type planKey struct{ query, operationName string }

// plans keep the plans of the documents seen last, bounded in bytes as the
// parsed-query cache is: a plan keeps its document alive, counted as that
// cache counts it.
type plans = guards.LRU[planKey, *plan]

func newPlans(maxBytes int) *plans {
	return guards.NewLRU(maxBytes, maxBytes/16, func(k planKey, _ *plan) int {
		return guards.AstBytesPerByte*len(k.query) + len(k.operationName)
	})
}

// learn compiles the operation gqlgen made of a request, unless a plan of
// it is kept already. Only a query may compile: a mutation or a
// subscription keeps nothing here (a subscription keeps none of its text:
// kept.go), and a query that does not compile keeps no document.
func (h *Handler) learn(k planKey, oc *graphql.OperationContext) {
	if oc.Operation.Operation != ast.Query {
		return
	}
	if _, ok := h.plans.Get(k); ok {
		return
	}
	pl := &plan{compiled: graph.Compile(oc)}
	if pl.compiled != nil {
		pl.doc, pl.recover, pl.fields, pl.roots = oc.Doc, oc.RecoverFunc, oc.ResolverMiddleware, oc.RootResolverMiddleware
	}
	h.plans.Add(k, pl)
}

// operationContext makes the operation of a request whose document is
// resolved: through its document's plan when it has one that takes the
// request's variables, else through gqlgen's CreateOperationContext, after
// which the document's operation is compiled. Either way every guard has
// met it; the context returned is the one to dispatch it in.
func (h *Handler) operationContext(ctx context.Context, op *operation.Operation, req *request) (context.Context, *graphql.OperationContext, gqlerror.List) {
	key := planKey{req.params.Query, req.params.OperationName}
	if h.plans != nil && req.compilable {
		if pl, ok := h.plans.Get(key); ok && pl.compiled != nil {
			if vars, bound, ok := pl.compiled.Bind(req.variables); ok {
				p := req.params
				oc := &graphql.OperationContext{
					RawQuery: p.Query, Variables: vars, OperationName: p.OperationName, Doc: pl.doc, Extensions: p.Extensions, Headers: p.Headers,
					Operation: pl.compiled.Operation(), DisableIntrospection: true,
					RecoverFunc: pl.recover, ResolverMiddleware: pl.fields, RootResolverMiddleware: pl.roots,
					Stats: graphql.Stats{Read: p.ReadTime, OperationStart: graphql.GetStartTime(ctx)},
				}
				oc.Stats.Validation.End = oc.Stats.Read.End
				h.observer.made(true)
				octx := graphql.WithOperationContext(ctx, oc)
				for _, m := range h.mutators {
					if err := m.MutateOperationContext(octx, oc); err != nil {
						return ctx, oc, gqlerror.List{err}
					}
				}
				return graph.WithBound(ctx, bound), oc, nil
			}
		}
	}
	h.observer.made(false)
	req.variablesDecoded()
	oc, errs := h.exec.CreateOperationContext(ctx, req.params)
	if errs == nil && h.plans != nil && req.compilable {
		h.learn(key, oc)
	}
	return ctx, oc, errs
}

// recording is the executor's setup that also keeps, in the order they
// are installed, the extensions that meet an operation's context: the
// guards a compiled operation meets.
type recording struct {
	setup
	mutators []graphql.OperationContextMutator
}

func (r *recording) Use(e graphql.HandlerExtension) {
	r.setup.Use(e)
	if m, ok := e.(graphql.OperationContextMutator); ok {
		r.mutators = append(r.mutators, m)
	}
}
