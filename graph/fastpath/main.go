// Command fastpath generates the executable schema (`go generate ./...`):
// gqlgen's own code generation, run through its api.Generate with one
// plugin, which puts graph/model's writers in place of gqlgen's marshalers
// for the plain objects they write, and for lists of them.
//
// gqlgen marshals every object field by field, each with a field context,
// a context value and a middleware closure, and every list of objects with
// a goroutine per element (PERFORMANCE.md). For an object that has no
// resolver, no directive and no interface, and whose fields are plain
// struct fields, none of that can change what is written, so one writer
// may append the whole object to a buffer. The plugin decides from gqlgen's
// typed codegen data which objects qualify, and refuses to generate when
// an object a writer handles stops qualifying or gains a field the writer
// does not know.
//
// gqlgen runs its plugins before it writes exec.go and offers no hook
// after, so the command rewrites the file once api.Generate has written
// it: the generated marshaler of each object or list a writer handles is
// renamed (_ListPage becomes _ListPage_gqlgen, kept for tests that compare
// the two byte for byte) and a marshaler of the original name calls the
// writer. api.Generate writes exec.go afresh each time, so running the
// command again gives the same file.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen"
	"github.com/99designs/gqlgen/codegen/config"
)

// modelPath is the package of the writers.
const modelPath = "github.com/listgate/listgate/graph/model"

// A writer replaces gqlgen's marshaler of one object, or of one list of
// objects.
type writer struct {
	gqlType string // the GraphQL type it writes: an object, or a list of objects ("[ListItem]")
	fn      string // the writer, in graph/model
	// types are the objects it writes (the object and those its fields
	// hold, or the list's elements), each field with its GraphQL type,
	// exactly as the writer handles them.
	types map[string]map[string]string
}

var (
	listItem = map[string]string{"value": "ListValue!", "timestamp": "Time!", "expiresAt": "Time!", "cursor": "String!", "position": "String"}
	writers  = []writer{{
		gqlType: "ListPage",
		fn:      "WriteListPage",
		types: map[string]map[string]string{
			"ListPage": {"items": "[ListItem!]!", "hasMore": "Boolean!", "endCursor": "String"},
			"ListItem": listItem,
		},
	}, {
		gqlType: "[ListItem]",
		fn:      "WriteNullableListItems",
		types:   map[string]map[string]string{"ListItem": listItem},
	}}
)

func main() {
	if err := generate(); err != nil {
		fmt.Fprintln(os.Stderr, "fastpath:", err)
		os.Exit(1)
	}
}

func generate() error {
	cfg, err := config.LoadConfigFromDefaultLocations()
	if err != nil {
		return err
	}
	p := &plugin{writers: writers}
	if err := api.Generate(cfg, api.AddPlugin(p)); err != nil {
		return err
	}
	src, err := os.ReadFile(cfg.Exec.Filename)
	if err != nil {
		return err
	}
	out, err := rewrite(src, p.targets)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Exec.Filename, err)
	}
	return os.WriteFile(cfg.Exec.Filename, out, 0o644)
}

// plugin decides, from gqlgen's codegen data, which marshalers the
// writers take over.
type plugin struct {
	writers []writer
	targets []target
}

// target is a generated marshaler a writer takes over.
type target struct {
	method string // the marshaler, a method of exec's executionContext
	fn     string // the writer
	what   string // the GraphQL type
}

func (p *plugin) Name() string { return "fastpath" }

// GenerateCode checks every object each writer handles; gqlgen calls it
// with the data it is about to generate from.
func (p *plugin) GenerateCode(data *codegen.Data) error {
	objects := map[string]*codegen.Object{}
	for _, o := range data.Objects {
		objects[o.Name] = o
	}
	p.targets = nil
	for _, w := range p.writers {
		for name, fields := range w.types {
			o := objects[name]
			if o == nil {
				return fmt.Errorf("model.%s writes %s, which the schema has no object of", w.fn, name)
			}
			if err := plain(o, fields); err != nil {
				return fmt.Errorf("model.%s cannot write %s: %w; change the writer and this plugin's description of it, or drop the writer", w.fn, name, err)
			}
		}
		method := "_" + w.gqlType
		if strings.HasPrefix(w.gqlType, "[") {
			method = ""
			for _, ref := range data.ReferencedTypes {
				if ref.GQL.String() == w.gqlType {
					method = ref.MarshalFunc()
				}
			}
			if method == "" {
				return fmt.Errorf("model.%s writes %s, which the schema does not use", w.fn, w.gqlType)
			}
		}
		p.targets = append(p.targets, target{method: method, fn: w.fn, what: w.gqlType})
	}
	return nil
}

// plain checks that nothing but the object's field values decides what
// gqlgen writes for it: no resolver, directive or interface, and exactly
// the fields given, each a struct field of the GraphQL type given.
func plain(o *codegen.Object, fields map[string]string) error {
	switch {
	case o.Root || o.Stream:
		return fmt.Errorf("it is a root type")
	case len(o.Implements) > 0:
		return fmt.Errorf("it implements an interface")
	case len(o.Directives) > 0:
		return fmt.Errorf("it has a directive")
	case o.HasResolvers() || o.IsConcurrent():
		return fmt.Errorf("a field has a resolver")
	}
	seen := 0
	for _, f := range o.Fields {
		want, ok := fields[f.Name]
		switch {
		case !ok:
			return fmt.Errorf("field %s is new", f.Name)
		case f.TypeReference.GQL.String() != want:
			return fmt.Errorf("field %s is of type %s, not %s", f.Name, f.TypeReference.GQL, want)
		case !f.IsVariable() || f.IsResolver || f.IsBatch() || f.MethodHasContext:
			return fmt.Errorf("field %s is not a plain struct field", f.Name)
		case len(f.Directives) > 0 || len(f.Args) > 0:
			return fmt.Errorf("field %s has a directive or arguments", f.Name)
		}
		seen++
	}
	if seen != len(fields) {
		return fmt.Errorf("it has %d of the %d fields the writer writes", seen, len(fields))
	}
	return nil
}

// rewrite renames each target marshaler gqlgen generated and puts one of
// the original name before it that calls the writer. Targets rewritten
// already are left as they are.
func rewrite(src []byte, targets []target) ([]byte, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	pkg, err := importName(file, modelPath)
	if err != nil {
		return nil, err
	}
	methods := execMethods(file)
	type edit struct {
		at, end int
		text    string
	}
	var edits []edit
	for _, t := range targets {
		fd := methods[t.method]
		if fd == nil {
			return nil, fmt.Errorf("no generated marshaler %s", t.method)
		}
		if methods[t.method+"_gqlgen"] != nil {
			if err := checkDispatch(fd, pkg, t.fn); err != nil {
				return nil, fmt.Errorf("%s_gqlgen exists, but %w", t.method, err)
			}
			continue // rewritten already
		}
		params := fd.Type.Params.List
		if len(params) != 3 || len(params[0].Names) != 1 || len(params[1].Names) != 1 || len(params[2].Names) != 1 {
			return nil, fmt.Errorf("%s: not the (ctx, sel, v) marshaler gqlgen generates", t.method)
		}
		ctx, sel, v := params[0].Names[0].Name, params[1].Names[0].Name, params[2].Names[0].Name
		text := func(n ast.Node) string {
			return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
		}
		var b bytes.Buffer
		comment(&b, fmt.Sprintf("%[1]s writes %[4]s with %[2]s.%[3]s, put in place by graph/fastpath: "+
			"the objects it holds are plain, so one writer appends them to a buffer without gqlgen's per-item and per-field work. "+
			"%[1]s_gqlgen is gqlgen's own marshaler; a context from %[2]s.WithGQLGenMarshaling selects it (tests compare the two).",
			t.method, pkg, t.fn, t.what))
		fmt.Fprintf(&b, "func %s %s%s %s {\n", text(fd.Recv), t.method, text(fd.Type.Params), text(fd.Type.Results))
		fmt.Fprintf(&b, "\tif %s.GQLGenMarshaling(%s) {\n\t\treturn ec.%s_gqlgen(%s, %s, %s)\n\t}\n", pkg, ctx, t.method, ctx, sel, v)
		fmt.Fprintf(&b, "\treturn %s.%s(ec.OperationContext, %s, %s)\n}\n\n", pkg, t.fn, sel, v)
		at := fset.Position(fd.Pos()).Offset
		nameAt := fset.Position(fd.Name.Pos()).Offset
		edits = append(edits, edit{at, at, b.String()}, edit{nameAt, nameAt + len(t.method), t.method + "_gqlgen"})
	}
	slices.SortFunc(edits, func(a, b edit) int { return b.at - a.at })
	out := slices.Clone(src)
	for _, e := range edits {
		out = slices.Concat(out[:e.at], []byte(e.text), out[e.end:])
	}
	return format.Source(out)
}

// comment writes text as a line comment wrapped at 76 columns.
func comment(b *bytes.Buffer, text string) {
	line := "//"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 76 && line != "//" {
			b.WriteString(line + "\n")
			line = "//"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
}

// check verifies that src, an exec.go, has the fast path in place: for
// every writer, one marshaler X that returns it and gqlgen's own beside it
// as X_gqlgen.
func check(src []byte, writers []writer) error {
	file, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		return err
	}
	pkg, err := importName(file, modelPath)
	if err != nil {
		return err
	}
	methods := execMethods(file)
	for _, w := range writers {
		n := 0
		for name, fd := range methods {
			if checkDispatch(fd, pkg, w.fn) == nil && methods[name+"_gqlgen"] != nil {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d marshalers of %s return %s.%s beside gqlgen's own, want 1: the fast path is not in place (run go generate ./...)", n, w.gqlType, pkg, w.fn)
		}
	}
	return nil
}

// checkDispatch verifies that fd returns the writer's result.
func checkDispatch(fd *ast.FuncDecl, pkg, fn string) error {
	calls := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if ret, ok := n.(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
			if call, ok := ret.Results[0].(*ast.CallExpr); ok {
				if s, ok := call.Fun.(*ast.SelectorExpr); ok {
					if id, ok := s.X.(*ast.Ident); ok && id.Name == pkg && s.Sel.Name == fn {
						calls = true
					}
				}
			}
		}
		return !calls
	})
	if !calls {
		return fmt.Errorf("%s does not return %s.%s", fd.Name.Name, pkg, fn)
	}
	return nil
}

// execMethods are the methods of *executionContext in file, by name.
func execMethods(file *ast.File) map[string]*ast.FuncDecl {
	methods := map[string]*ast.FuncDecl{}
	for _, d := range file.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
			continue
		}
		if star, ok := fd.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "executionContext" {
				methods[fd.Name.Name] = fd
			}
		}
	}
	return methods
}

// importName is the name file uses for the package at path.
func importName(file *ast.File, path string) (string, error) {
	for _, imp := range file.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name, nil
			}
			return path[strings.LastIndex(path, "/")+1:], nil
		}
	}
	return "", fmt.Errorf("%s is not imported", path)
}
