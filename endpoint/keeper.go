package endpoint

import (
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/vektah/gqlparser/v2/ast"
)

// What a subscription runs, copied out of the document it came in
// (kept.go): names, literals and default values in memory of their own,
// no comments, positions without the text.

// keptSource is the text of every kept position: none. A position keeps
// its line and column.
var keptSource = &ast.Source{}

// copyDocument copies op, of doc, and the fragments it spreads, into a
// document of their own, and says about how many bytes the copy holds.
// doc is only read.
func copyDocument(doc *ast.QueryDocument, op *ast.OperationDefinition) (*ast.QueryDocument, int64) {
	k := keeper{doc: doc, fragments: map[*ast.FragmentDefinition]*ast.FragmentDefinition{}, definitions: map[*ast.VariableDefinition]*ast.VariableDefinition{}}
	if op.Position != nil {
		k.src = op.Position.Src
	}
	c := &ast.QueryDocument{Operations: ast.OperationList{k.operation(op)}}
	for _, f := range doc.Fragments {
		if fc := k.fragments[f]; fc != nil {
			c.Fragments = append(c.Fragments, fc)
		}
	}
	k.add(unsafe.Sizeof(*c) + uintptr(cap(c.Fragments)+1)*ptrSize)
	return c, k.bytes
}

// copyVariables copies coerced variables (a default value came from the
// document, a substring of its text), and says about how many bytes the
// copy holds.
func copyVariables(vars map[string]any) (map[string]any, int64) {
	var k keeper
	c := k.variables(vars)
	return c, k.bytes
}

const ptrSize = unsafe.Sizeof(uintptr(0))

// keeper copies the nodes of one document that run: each once, so that
// what pointed to one node points to its one copy. Nodes of the schema
// (definitions, and the types and values that have no position in the
// document) are pointed to as they are.
type keeper struct {
	doc         *ast.QueryDocument
	src         *ast.Source // the document's text
	fragments   map[*ast.FragmentDefinition]*ast.FragmentDefinition
	definitions map[*ast.VariableDefinition]*ast.VariableDefinition // of variables
	bytes       int64
}

func (k *keeper) add(n uintptr) { k.bytes += int64(n) }

// str is s in memory of its own: a substring of the text would keep it all.
func (k *keeper) str(s string) string {
	k.add(uintptr(len(s)))
	return strings.Clone(s)
}

// schemas reports whether a node at p belongs to another text than the
// document's: the schema's.
func (k *keeper) schemas(p *ast.Position) bool {
	return k.src != nil && p != nil && p.Src != nil && p.Src != k.src
}

func (k *keeper) position(p *ast.Position) *ast.Position {
	if p == nil {
		return nil
	}
	k.add(unsafe.Sizeof(*p))
	return &ast.Position{Start: p.Start, End: p.End, Line: p.Line, Column: p.Column, Src: keptSource}
}

func (k *keeper) operation(op *ast.OperationDefinition) *ast.OperationDefinition {
	k.add(unsafe.Sizeof(*op))
	c := &ast.OperationDefinition{Operation: op.Operation, Name: k.str(op.Name), Position: k.position(op.Position)}
	c.VariableDefinitions = k.variableDefinitions(op.VariableDefinitions)
	c.Directives = k.directives(op.Directives)
	c.SelectionSet = k.selections(op.SelectionSet)
	return c
}

func (k *keeper) variableDefinitions(l ast.VariableDefinitionList) ast.VariableDefinitionList {
	if l == nil {
		return nil
	}
	out := make(ast.VariableDefinitionList, len(l))
	k.add(uintptr(len(l)) * ptrSize)
	for i, v := range l {
		out[i] = k.variableDefinition(v)
	}
	return out
}

func (k *keeper) variableDefinition(v *ast.VariableDefinition) *ast.VariableDefinition {
	if v == nil {
		return nil
	}
	if c := k.definitions[v]; c != nil {
		return c
	}
	k.add(unsafe.Sizeof(*v))
	c := &ast.VariableDefinition{Variable: k.str(v.Variable), Position: k.position(v.Position), Definition: v.Definition, Used: v.Used}
	k.definitions[v] = c
	c.Type = k.typ(v.Type)
	c.DefaultValue = k.value(v.DefaultValue)
	c.Directives = k.directives(v.Directives)
	return c
}

func (k *keeper) typ(t *ast.Type) *ast.Type {
	if t == nil || k.schemas(t.Position) {
		return t
	}
	k.add(unsafe.Sizeof(*t))
	return &ast.Type{NamedType: k.str(t.NamedType), Elem: k.typ(t.Elem), NonNull: t.NonNull, Position: k.position(t.Position)}
}

func (k *keeper) value(v *ast.Value) *ast.Value {
	if v == nil || k.schemas(v.Position) {
		return v
	}
	k.add(unsafe.Sizeof(*v))
	c := &ast.Value{Raw: k.str(v.Raw), Kind: v.Kind, Position: k.position(v.Position), Definition: v.Definition,
		VariableDefinition: k.variableDefinition(v.VariableDefinition), ExpectedType: k.typ(v.ExpectedType), ExpectedTypeHasDefault: v.ExpectedTypeHasDefault}
	if v.Children != nil {
		c.Children = make(ast.ChildValueList, len(v.Children))
		k.add(uintptr(len(v.Children)) * ptrSize)
		for i, ch := range v.Children {
			k.add(unsafe.Sizeof(*ch))
			c.Children[i] = &ast.ChildValue{Name: k.str(ch.Name), Value: k.value(ch.Value), Position: k.position(ch.Position)}
		}
	}
	return c
}

func (k *keeper) directives(l ast.DirectiveList) ast.DirectiveList {
	if l == nil {
		return nil
	}
	out := make(ast.DirectiveList, len(l))
	k.add(uintptr(len(l)) * ptrSize)
	for i, d := range l {
		k.add(unsafe.Sizeof(*d))
		out[i] = &ast.Directive{Name: k.str(d.Name), Arguments: k.arguments(d.Arguments), Position: k.position(d.Position),
			ParentDefinition: d.ParentDefinition, Definition: d.Definition, Location: d.Location}
	}
	return out
}

func (k *keeper) arguments(l ast.ArgumentList) ast.ArgumentList {
	if l == nil {
		return nil
	}
	out := make(ast.ArgumentList, len(l))
	k.add(uintptr(len(l)) * ptrSize)
	for i, a := range l {
		k.add(unsafe.Sizeof(*a))
		out[i] = &ast.Argument{Name: k.str(a.Name), Value: k.value(a.Value), Position: k.position(a.Position)}
	}
	return out
}

func (k *keeper) selections(l ast.SelectionSet) ast.SelectionSet {
	if l == nil {
		return nil
	}
	out := make(ast.SelectionSet, len(l))
	k.add(uintptr(len(l)) * 2 * ptrSize) // interfaces
	for i, s := range l {
		switch s := s.(type) {
		case *ast.Field:
			k.add(unsafe.Sizeof(*s))
			out[i] = &ast.Field{Alias: k.str(s.Alias), Name: k.str(s.Name), Arguments: k.arguments(s.Arguments), Directives: k.directives(s.Directives),
				SelectionSet: k.selections(s.SelectionSet), Position: k.position(s.Position), Definition: s.Definition, ObjectDefinition: s.ObjectDefinition}
		case *ast.InlineFragment:
			k.add(unsafe.Sizeof(*s))
			out[i] = &ast.InlineFragment{TypeCondition: k.str(s.TypeCondition), Directives: k.directives(s.Directives),
				SelectionSet: k.selections(s.SelectionSet), ObjectDefinition: s.ObjectDefinition, Position: k.position(s.Position)}
		case *ast.FragmentSpread:
			k.add(unsafe.Sizeof(*s))
			def := s.Definition
			if def == nil {
				def = k.doc.Fragments.ForName(s.Name)
			}
			out[i] = &ast.FragmentSpread{Name: k.str(s.Name), Directives: k.directives(s.Directives), ObjectDefinition: s.ObjectDefinition,
				Definition: k.fragment(def), Position: k.position(s.Position)}
		}
	}
	return out
}

func (k *keeper) fragment(f *ast.FragmentDefinition) *ast.FragmentDefinition {
	if f == nil {
		return nil
	}
	if c := k.fragments[f]; c != nil {
		return c
	}
	k.add(unsafe.Sizeof(*f))
	c := &ast.FragmentDefinition{Name: k.str(f.Name), TypeCondition: k.str(f.TypeCondition), Definition: f.Definition, Position: k.position(f.Position)}
	k.fragments[f] = c // before its selections: a spread of it within them (which validation refuses) finds it
	c.VariableDefinition = k.variableDefinitions(f.VariableDefinition)
	c.Directives = k.directives(f.Directives)
	c.SelectionSet = k.selections(f.SelectionSet)
	return c
}

// variables copies coerced variables.
func (k *keeper) variables(vars map[string]any) map[string]any {
	if vars == nil {
		return nil
	}
	out := make(map[string]any, len(vars))
	for name, v := range vars {
		k.add(48) // the entry
		out[k.str(name)] = k.variable(v)
	}
	return out
}

func (k *keeper) variable(v any) any {
	k.add(16) // the interface
	switch v := v.(type) {
	case string:
		return k.str(v)
	case json.Number:
		return json.Number(k.str(string(v)))
	case map[string]any:
		return k.variables(v)
	case []any:
		out := make([]any, len(v))
		k.add(24)
		for i, e := range v {
			out[i] = k.variable(e)
		}
		return out
	}
	return v // a number or a boolean: nothing more
}
