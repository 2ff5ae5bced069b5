package guards

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/lists"
)

// checkMutationsFirst makes a mutation operation all or nothing as to its
// input: when it has more than one root field, it runs once in check mode,
// where every resolver checks its input (feature, ids, values, timestamps,
// limits) and writes nothing, and only when no field failed, for real. A
// field's input is thus checked even when an earlier field would have
// written. Failures at run time (the database did not answer) still fail
// only their own field.
type checkMutationsFirst struct{}

// CheckMutationsFirst is the guard of a mutation's check run.
func CheckMutationsFirst() graphql.HandlerExtension { return checkMutationsFirst{} }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
} = checkMutationsFirst{}

func (checkMutationsFirst) ExtensionName() string                   { return "CheckMutationsFirst" }
func (checkMutationsFirst) Validate(graphql.ExecutableSchema) error { return nil }

func (checkMutationsFirst) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Mutation || writingFields(oc) < 2 {
		return next(ctx)
	}
	checkCtx := lists.CheckOnly(ctx)
	if resp := next(checkCtx)(checkCtx); resp == nil || len(resp.Errors) > 0 {
		if resp == nil { // the client went away
			return func(context.Context) *graphql.Response { return nil }
		}
		return graphql.OneShot(&graphql.Response{Errors: resp.Errors}) // "data": null: nothing ran
	}
	return next(ctx)
}

// writingFields counts the root fields of a mutation, as they will run.
func writingFields(oc *graphql.OperationContext) int {
	n := 0
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{"Mutation"}) {
		if f.Name != "__typename" {
			n++
		}
	}
	return n
}
