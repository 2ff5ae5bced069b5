// Package guards are the checks that refuse an operation before anything
// of it runs: the size of its document, the caller's scopes, its depth and
// shape, its complexity and the process's budget for it, and the check
// run of a mutation. Each is a gqlgen extension the endpoint installs; a
// guard refuses with an error wrapping an errkind, never writes, and never
// reads a list.
package guards

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/operation"
)

// authorization enforces @scope before an operation runs: every root field
// it selects (through fragments too) must carry a scope the caller holds,
// or the whole operation is refused and nothing runs. Validate fails when a
// root field has no known @scope, so no field can ship without a rule.
type authorization struct {
	scopes        map[string]string // "Query.listItems" → "lists:read"
	introspection bool              // __schema and __type answered
	roots         *opMemo[[]rootField]
}

// rootField is a root field an operation selects.
type rootField struct{ alias, name string }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &authorization{}

func (*authorization) ExtensionName() string { return "Authorization" }

func (a *authorization) Validate(es graphql.ExecutableSchema) error {
	a.scopes = map[string]string{}
	s := es.Schema()
	for _, root := range []*ast.Definition{s.Query, s.Mutation, s.Subscription} {
		if root == nil {
			continue
		}
		for _, f := range root.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			d := f.Directives.ForName("scope")
			if d == nil || d.Arguments.ForName("requires") == nil {
				return fmt.Errorf("%s.%s has no @scope(requires: …): every root field needs an access rule", root.Name, f.Name)
			}
			scope := d.Arguments.ForName("requires").Value.Raw
			if !slices.Contains(auth.Scopes, scope) {
				return fmt.Errorf("%s.%s: @scope(requires: %q) is not one of %s", root.Name, f.Name, scope, strings.Join(auth.Scopes, ", "))
			}
			a.scopes[root.Name+"."+f.Name] = scope
		}
	}
	return nil
}

func (a *authorization) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	var p *auth.Principal
	if op := operation.From(ctx); op != nil {
		p = op.Principal
	}
	root := rootType(oc.Operation.Operation)
	for _, f := range a.rootFields(oc, root) {
		if f.name == "__schema" || f.name == "__type" {
			if !a.introspection {
				return gqlerror.WrapPath(ast.Path{ast.PathName(f.alias)},
					fmt.Errorf("%w: introspection is off on this gateway (--introspection)", errkind.Forbidden))
			}
			continue // on for every authenticated caller
		}
		scope := a.scopes[root+"."+f.name]
		if p == nil || scope == "" || !p.Has(scope) {
			name := "the caller"
			if p != nil {
				name = p.Name
			}
			return gqlerror.WrapPath(ast.Path{ast.PathName(f.alias)},
				fmt.Errorf("%w: %s needs the scope %s, which %s's token does not grant; nothing was run", errkind.Forbidden, f.name, scope, name))
		}
	}
	return nil
}

// rootFields are the root fields an operation selects (fragments
// expanded, @skip and @include resolved), but __typename: kept by
// operation when its document has no directive, whose fields then do not
// depend on its variables.
func (a *authorization) rootFields(oc *graphql.OperationContext, root string) []rootField {
	if fields, ok := a.roots.get(oc.Operation); ok {
		return fields
	}
	var fields []rootField
	for _, f := range graphql.CollectFields(oc, oc.Operation.SelectionSet, []string{root}) {
		if f.Name != "__typename" {
			// Copies: the document's names are substrings of its text,
			// which a kept name would keep whole (a subscription keeps
			// none of its text: endpoint/kept.go).
			fields = append(fields, rootField{alias: strings.Clone(f.Alias), name: strings.Clone(f.Name)})
		}
	}
	if !strings.Contains(oc.RawQuery, "@") {
		a.roots.add(oc.Operation, fields)
	}
	return fields
}

// CheckScopes reports whether every root field of a schema (SDL, with
// @scope declared for it) carries a known @scope: what NewHandler checks of
// the real schema.
func CheckScopes(sdl string) error {
	s, err := gqlparser.LoadSchema(&ast.Source{Input: `directive @scope(requires: String!) on FIELD_DEFINITION ` + sdl})
	if err != nil {
		return err
	}
	return (&authorization{}).Validate(&graphql.ExecutableSchemaMock{SchemaFunc: func() *ast.Schema { return s }})
}

// Scopes is the guard of @scope; with introspection, __schema and __type
// are answered for every authenticated caller.
func Scopes(introspection bool) graphql.HandlerExtension {
	return &authorization{introspection: introspection, roots: newOpMemo[[]rootField](4096)}
}
