package guards

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/errkind"
)

// depthLimit refuses operations nested deeper than max fields, before they
// run. Introspection fields are not counted (GraphiQL's own query nests
// types nine deep), and introspection is off in production.
type depthLimit struct{ max int }

// Depth is the guard of --max-depth.
func Depth(max int) graphql.HandlerExtension { return depthLimit{max} }

func (depthLimit) ExtensionName() string                   { return "DepthLimit" }
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (d depthLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if depth := selectionDepth(oc.Operation.SelectionSet, oc.Doc.Fragments, 0); depth > d.max {
		return gqlerror.WrapPath(nil, fmt.Errorf("%w operation: fields nested %d deep, more than the %d allowed (--max-depth)", errkind.Invalid, depth, d.max))
	}
	return nil
}

func selectionDepth(set ast.SelectionSet, fragments ast.FragmentDefinitionList, seen int) int {
	if seen > 64 { // fragment cycles are rejected by validation; stay bounded anyway
		return seen
	}
	deepest := 0
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			if strings.HasPrefix(s.Name, "__") {
				continue
			}
			d = 1 + selectionDepth(s.SelectionSet, fragments, seen+1)
		case *ast.InlineFragment:
			d = selectionDepth(s.SelectionSet, fragments, seen+1)
		case *ast.FragmentSpread:
			if f := fragments.ForName(s.Name); f != nil {
				d = selectionDepth(f.SelectionSet, fragments, seen+1)
			}
		}
		deepest = max(deepest, d)
	}
	return deepest
}

// oneStream refuses a subscription operation that does not select exactly
// one root field: a subscription is one stream. Validation refuses two
// distinct fields; this also refuses one field twice under two aliases.
type oneStream struct{}

// OneStream is the guard of a subscription's single root field.
func OneStream() graphql.HandlerExtension { return oneStream{} }

func (oneStream) ExtensionName() string                   { return "OneStream" }
func (oneStream) Validate(graphql.ExecutableSchema) error { return nil }

func (oneStream) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return nil
	}
	if n := len(graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Subscription"})); n != 1 {
		return gqlerror.WrapPath(nil, fmt.Errorf("%w subscription: it selects %d root fields; a subscription is one stream: select exactly one, and subscribe again for another", errkind.Invalid, n))
	}
	return nil
}
