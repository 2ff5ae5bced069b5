package endpoint

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/validator"
)

// What a subscription keeps of its operation is the operation, not its
// text: nothing it reaches lies in the text's memory (a name, a literal, a
// default value of a variable, a comment, a position's source), and it is
// the same operation, with its fragment, less the document's other
// operations and its comments.
func TestKeptOperationHoldsNoText(t *testing.T) {
	schema := gqlparser.MustLoadSchema(&ast.Source{Name: "schema", Input: `
		type Query { a: Int }
		type Subscription { listItemsAdded(entityType: String!, entityId: ID!, feature: String!, tags: [String!]): ListItem! }
		type ListItem { value: String! timestamp: String! cursor: String! }`})
	text := `# what the client's bundler left in
subscription Watch($e: ID! = "u-default", $withTime: Boolean!) { # the list
  listItemsAdded(entityType: "user", entityId: $e, feature: "seen", tags: ["a", "b"]) {
    ...Item @include(if: $withTime)
    ... on ListItem { cursor }
  }
}
fragment Item on ListItem { value timestamp }
query Other { a }
` + strings.Repeat("# padding\n", 10_000)
	doc, errs := gqlparser.LoadQuery(schema, text)
	if errs != nil {
		t.Fatal(errs)
	}
	op := doc.Operations.ForName("Watch")
	vars, err := validator.VariableValues(schema, op, map[string]any{"withTime": true})
	if err != nil {
		t.Fatal(err)
	}
	rc := &graphql.OperationContext{RawQuery: text, Doc: doc, Operation: op, OperationName: "Watch", Variables: vars,
		Extensions: map[string]any{"cost": true}}
	copies := newKeptDocuments(16)
	k, size := copies.kept(rc)

	start := uintptr(unsafe.Pointer(unsafe.StringData(text)))
	walk(t, reflect.ValueOf(k), map[uintptr]bool{}, func(path string, v reflect.Value) {
		switch x := v.Interface().(type) {
		case string:
			if p := uintptr(unsafe.Pointer(unsafe.StringData(x))); len(x) > 0 && p >= start && p < start+uintptr(len(text)) {
				t.Errorf("%s (%.40q) is a substring of the text", path, x)
			}
		case *ast.Source:
			if x != nil && x.Input == text {
				t.Errorf("%s is the text", path)
			}
		case *ast.CommentGroup:
			if x != nil {
				t.Errorf("%s keeps a comment", path)
			}
		}
	})
	if k.RawQuery != "" || k.Extensions != nil || k.Variables["e"] != "u-default" || k.Variables["withTime"] != true {
		t.Errorf("kept: RawQuery %.20q, Extensions %v, Variables %v", k.RawQuery, k.Extensions, k.Variables)
	}
	format := func(d *ast.QueryDocument) string {
		var b strings.Builder
		formatter.NewFormatter(&b).FormatQueryDocument(d)
		return b.String()
	}
	want := format(&ast.QueryDocument{Operations: ast.OperationList{op}, Fragments: doc.Fragments[:1]})
	if got := format(k.Doc); got != want || k.Operation != k.Doc.Operations[0] || k.OperationName != "Watch" {
		t.Errorf("kept:\n%s\nwant:\n%s", got, want)
	}
	if size < 1000 || size > int64(len(text))/20 {
		t.Errorf("kept %d bytes of a text of %d, its operation about 300", size, len(text))
	}

	// Another subscription of the same document (the query cache's) runs
	// the same copy, with variables of its own.
	vars2, err := validator.VariableValues(schema, op, map[string]any{"e": "u2", "withTime": false})
	if err != nil {
		t.Fatal(err)
	}
	k2, size2 := copies.kept(&graphql.OperationContext{RawQuery: text, Doc: doc, Operation: op, OperationName: "Watch", Variables: vars2})
	if k2.Doc != k.Doc || k2.Operation != k.Operation || size2 != size-int64(len("u-default")-len("u2")) || k2.Variables["e"] != "u2" || k.Variables["e"] != "u-default" {
		t.Errorf("a second subscription of the document: its own copy %v, %d bytes (%d), variables %v", k2.Doc != k.Doc, size2, size, k2.Variables)
	}
}

// walk calls visit with every value reachable from v, each pointer once.
func walk(t *testing.T, v reflect.Value, seen map[uintptr]bool, visit func(path string, v reflect.Value)) {
	var rec func(path string, v reflect.Value)
	rec = func(path string, v reflect.Value) {
		if !v.IsValid() {
			return
		}
		if v.CanInterface() {
			visit(path, v)
		}
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			rec(path, v.Elem())
		case reflect.Interface:
			rec(path, v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					rec(path+"."+v.Type().Field(i).Name, v.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				rec(path+"[]", v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				rec(path+"{key}", it.Key())
				rec(path+"{}", it.Value())
			}
		}
	}
	rec("kept", v)
}
