// Command fastpath is the second step of `go generate`: it points gqlgen's
// generated marshalers of ListPage and [ListItem!]! at
// model.WriteListPage and model.WriteListItems, keeping gqlgen's own
// under new names for the tests that prove both write the same bytes. It
// refuses to run when either type stops being a plain struct (a field with
// a resolver or a directive, a field the fast path does not know, an
// interface), since the fast path would then skip what gqlgen does per
// field.
package main

import (
	"fmt"
	"go/format"
	"os"
	"regexp"
	"strings"
)

const execFile = "graph/exec/exec.go"

// plain types and the fields model's marshalers write.
var plain = map[string][]string{
	"ListPage": {"items", "hasMore", "endCursor"},
	"ListItem": {"value", "timestamp", "expiresAt", "cursor"},
}

// rewrites are the generated functions that get a dispatcher, and what it
// calls when model.FastMarshal is on.
var rewrites = []struct{ signature, fast string }{
	{`func (ec *executionContext) _ListPage(ctx context.Context, sel ast.SelectionSet, obj *model.ListPage) graphql.Marshaler {`,
		`model.WriteListPage(ec.OperationContext, sel, obj)`},
	{`func (ec *executionContext) marshalNListItem2ᚕgithubᚗcomᚋlistgateᚋlistgateᚋgraphᚋmodelᚐListItemᚄ(ctx context.Context, sel ast.SelectionSet, v []model.ListItem) graphql.Marshaler {`,
		`model.WriteListItems(ec.OperationContext, sel, v)`},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fastpath:", err)
		os.Exit(1)
	}
}

func run() error {
	src, err := os.ReadFile(execFile)
	if err != nil {
		return err
	}
	code := string(src)
	for typ, fields := range plain {
		if err := checkPlain(code, typ, fields); err != nil {
			return fmt.Errorf("%s: %w", execFile, err)
		}
	}
	for _, r := range rewrites {
		at := strings.Index(code, r.signature+"\n")
		if at < 0 || strings.Count(code, r.signature) != 1 {
			return fmt.Errorf("%s: no single %q", execFile, r.signature)
		}
		name := r.signature[strings.Index(r.signature, ") ")+2 : strings.Index(r.signature, "(ctx")]
		args := "ctx, sel, obj"
		if strings.Contains(r.signature, "v []") {
			args = "ctx, sel, v"
		}
		dispatch := fmt.Sprintf("// %[1]s is rewritten by graph/fastpath.\n%[2]s\n\tif model.FastMarshal.Load() {\n\t\treturn %[3]s\n\t}\n\treturn ec.%[1]sGenerated(%[4]s)\n}\n\n",
			name, r.signature, r.fast, args)
		generated := strings.Replace(r.signature, name+"(", name+"Generated(", 1)
		code = code[:at] + dispatch + generated + code[at+len(r.signature):]
	}
	out, err := format.Source([]byte(code))
	if err != nil {
		return err
	}
	return os.WriteFile(execFile, out, 0o644)
}

// checkPlain verifies that typ implements no interface and that each of
// its fields, and only those, is a struct field read with no resolver and
// no directive.
func checkPlain(code, typ string, fields []string) error {
	lower := strings.ToLower(typ[:1]) + typ[1:]
	if !strings.Contains(code, fmt.Sprintf("var %sImplementors = []string{%q}", lower, typ)) {
		return fmt.Errorf("%s implements an interface now; the fast path does not handle that", typ)
	}
	fieldFunc := regexp.MustCompile(`func \(ec \*executionContext\) _` + typ + `_(\w+)\(ctx context\.Context, field graphql\.CollectedField, obj \*model\.` + typ + `\) \(ret graphql\.Marshaler\) \{\n((?:.*\n)*?)\}\n`)
	found := map[string]bool{}
	for _, m := range fieldFunc.FindAllStringSubmatch(code, -1) {
		body := m[2]
		if !regexp.MustCompile(`\n\t\tfunc\(ctx context\.Context\) \(any, error\) \{\n\t\t\treturn obj\.\w+, nil\n\t\t\},\n\t\tnil,\n`).MatchString(body) {
			return fmt.Errorf("%s.%s is not a plain struct field any more (a resolver or a directive); the fast path cannot write it", typ, m[1])
		}
		found[m[1]] = true
	}
	for _, f := range fields {
		if !found[f] {
			return fmt.Errorf("%s.%s: no generated field function", typ, f)
		}
		delete(found, f)
	}
	for f := range found {
		return fmt.Errorf("%s has a field %q the fast path does not write", typ, f)
	}
	return nil
}
