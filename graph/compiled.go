package graph

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/graph/model"
)

// A Compiled is what one operation of a known document needs of its
// request, worked out once from the operation as gqlgen parsed, validated
// and admitted it: its one root field, the arguments it gives as literals,
// already converted, and, for each variable, how its JSON is read into the
// value gqlgen's coercion of variables would give. Bind then reads a
// request's variables straight from their JSON bytes, and Exec answers
// with the field and its arguments as bound, without collecting the
// fields or converting the arguments again.
//
// Only what is known to give gqlgen's answer compiles: a query of one
// listItems or listCount field, in a document without directives (so its
// fields do not depend on its variables), whose variables are scalars of
// String, ID, Int, Boolean or Time. Bind refuses whatever gqlgen would
// coerce otherwise or refuse (a number for a String, an Int past 64 bits,
// null for a non-null, an argument that does not convert): that request
// goes to gqlgen, which words the error.
type Compiled struct {
	operation *ast.OperationDefinition
	field     graphql.CollectedField
	page      model.PageSelection // listItems's selection
	base      listArguments       // the arguments given as literals, or by default
	vars      []variable
	binds     []binding
}

// variable is one variable of the operation and how its JSON is read.
type variable struct {
	name    string
	kind    byte // 's' String, ID and Time (a JSON string), 'i' Int, 'b' Boolean
	nonNull bool
	def     any // its default, as gqlparser gives it
	hasDef  bool
}

// binding is an argument given by a variable.
type binding struct {
	arg, variable string
	def           any // the argument's default, when the variable is absent
	hasDef        bool
}

// Compile compiles oc's operation, or returns nil when its requests must
// all go through gqlgen.
func Compile(oc *graphql.OperationContext) *Compiled {
	if oc.Operation == nil || oc.Operation.Operation != ast.Query || strings.IndexByte(oc.RawQuery, '@') >= 0 {
		return nil
	}
	fields := graphql.CollectFields(oc, oc.Operation.SelectionSet, queryImplementors)
	if len(fields) != 1 || len(fields[0].Deferrables) > 0 || fields[0].Definition == nil {
		return nil
	}
	f := fields[0]
	if f.Name != "listItems" && f.Name != "listCount" {
		return nil
	}
	c := &Compiled{operation: oc.Operation, field: f}
	if f.Name == "listItems" {
		c.page = model.CollectPage(oc, f.Selections)
	}
	for _, v := range oc.Operation.VariableDefinitions {
		cv := variable{name: v.Variable, nonNull: v.Type.NonNull}
		if v.Type.Elem != nil {
			return nil
		}
		switch v.Type.NamedType {
		case "String", "ID", "Time":
			cv.kind = 's'
		case "Int":
			cv.kind = 'i'
		case "Boolean":
			cv.kind = 'b'
		default:
			return nil
		}
		if v.DefaultValue != nil {
			d, err := v.DefaultValue.Value(nil)
			if err != nil || !cv.takes(d) {
				return nil
			}
			cv.def, cv.hasDef = d, true
		}
		c.vars = append(c.vars, cv)
	}
	for _, def := range f.Definition.Arguments {
		a := f.Arguments.ForName(def.Name)
		var argDef any
		hasDef := def.DefaultValue != nil
		if hasDef {
			var err error
			if argDef, err = def.DefaultValue.Value(nil); err != nil {
				return nil
			}
		}
		switch {
		case a != nil && a.Value.Kind == ast.Variable:
			c.binds = append(c.binds, binding{arg: def.Name, variable: a.Value.Raw, def: argDef, hasDef: hasDef})
		case a != nil:
			v, err := a.Value.Value(nil)
			if err != nil || !c.base.set(def.Name, v) {
				return nil // every request of it fails: gqlgen words the error
			}
		case hasDef:
			if !c.base.set(def.Name, argDef) {
				return nil
			}
		}
	}
	return c
}

// takes reports whether d is a value gqlgen's coercion of variables keeps
// as it is for this variable.
func (v variable) takes(d any) bool {
	switch d.(type) {
	case nil:
		return !v.nonNull
	case string:
		return v.kind == 's'
	case int64:
		return v.kind == 'i'
	case bool:
		return v.kind == 'b'
	}
	return false
}

// Bound is a compiled operation bound to one request's variables.
type Bound struct {
	c    *Compiled
	args listArguments
}

// decoders read the variables of requests.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

type decoder struct {
	r   bytes.Reader
	dec jsontext.Decoder
}

// Bind reads a request's variables (a JSON object, strict JSON already
// checked, or nothing) into the map gqlgen's coercion of variables would
// give, and binds the arguments they give. It reports false when any of
// it is not what gqlgen would take as it is: that request goes to gqlgen.
func (c *Compiled) Bind(raw []byte) (map[string]any, *Bound, bool) {
	vars := make(map[string]any, len(c.vars))
	if len(raw) > 0 && !c.read(raw, vars) {
		return nil, nil, false
	}
	for _, v := range c.vars {
		if _, given := vars[v.name]; given {
			continue
		}
		switch {
		case v.hasDef:
			vars[v.name] = v.def
		case v.nonNull:
			return nil, nil, false // gqlgen: must be defined
		}
	}
	b := &Bound{c: c, args: c.base}
	for _, bd := range c.binds {
		v, given := vars[bd.variable]
		if !given && bd.hasDef {
			v, given = bd.def, true
		}
		if given && !b.args.set(bd.arg, v) {
			return nil, nil, false
		}
	}
	return vars, b, true
}

// read reads the variables' JSON object into vars.
func (c *Compiled) read(raw []byte, vars map[string]any) bool {
	d := decoders.Get().(*decoder)
	defer decoders.Put(d)
	d.r.Reset(raw)
	d.dec.Reset(&d.r)
	switch tok, err := d.dec.ReadToken(); {
	case err != nil:
		return false
	case tok.Kind() == 'n':
		return true // null: no variables
	case tok.Kind() != '{':
		return false
	}
	for d.dec.PeekKind() == '"' {
		name, err := d.dec.ReadToken()
		if err != nil {
			return false
		}
		v := c.variable(name.String())
		if v == nil {
			if d.dec.SkipValue() != nil { // gqlgen ignores what the operation does not declare
				return false
			}
			continue
		}
		switch kind := d.dec.PeekKind(); {
		case kind == 'n' && !v.nonNull:
			vars[v.name] = nil
		case kind == '"' && v.kind == 's':
			tok, err := d.dec.ReadToken()
			if err != nil {
				return false
			}
			vars[v.name] = tok.String()
			continue
		case kind == '0' && v.kind == 'i':
			val, err := d.dec.ReadValue()
			if err != nil {
				return false
			}
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil {
				return false
			}
			vars[v.name] = n
			continue
		case (kind == 't' || kind == 'f') && v.kind == 'b':
			vars[v.name] = kind == 't'
		default:
			return false
		}
		if _, err := d.dec.ReadToken(); err != nil { // null, true or false
			return false
		}
	}
	tok, err := d.dec.ReadToken()
	return err == nil && tok.Kind() == '}'
}

func (c *Compiled) variable(name string) *variable {
	for i := range c.vars {
		if c.vars[i].name == name {
			return &c.vars[i]
		}
	}
	return nil
}

// boundKey is the context key of WithBound.
type boundKey struct{}

// WithBound returns a context in which the executable schema answers b's
// operation with b, without collecting its fields or converting its
// arguments again.
func WithBound(ctx context.Context, b *Bound) context.Context {
	return context.WithValue(ctx, boundKey{}, b)
}

// Operation is the operation compiled.
func (c *Compiled) Operation() *ast.OperationDefinition { return c.operation }
