// Command fastpath is the second step of `go generate`: it points gqlgen's
// generated marshaler of [ListItem!]! at model.MarshalListItems, keeping
// gqlgen's own under a new name for the tests that prove both write the
// same bytes. It refuses to run when ListItem is no longer a plain struct
// (a field with a resolver, a directive or a nullable type), because the
// fast path would then skip what gqlgen does per field.
package main

import (
	"fmt"
	"go/format"
	"os"
	"regexp"
	"strings"
)

const execFile = "graph/exec/exec.go"

var (
	sliceMarshaler = regexp.MustCompile(`(?m)^func \(ec \*executionContext\) (marshalNListItem2ᚕ\S+)\(ctx context\.Context, sel ast\.SelectionSet, v \[\]model\.ListItem\) graphql\.Marshaler \{$`)
	plainField     = regexp.MustCompile(`(?s)func \(ec \*executionContext\) _ListItem_(\w+)\(ctx context\.Context, field graphql\.CollectedField, obj \*model\.ListItem\) \(ret graphql\.Marshaler\) \{\n\treturn graphql\.ResolveField\(.*?\n\t\tfunc\(ctx context\.Context\) \(any, error\) \{\n\t\t\treturn obj\.\w+, nil\n\t\t\},\n\t\tnil,\n.*?\n\t\ttrue,\n\t\ttrue,\n\t\)\n\}`)
	anyField       = regexp.MustCompile(`func \(ec \*executionContext\) _ListItem_(\w+)\(`)
)

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
	if !strings.Contains(code, `var listItemImplementors = []string{"ListItem"}`) {
		return fmt.Errorf("%s: ListItem implements an interface now; model.MarshalListItems does not handle that", execFile)
	}
	plain := map[string]bool{}
	for _, m := range plainField.FindAllStringSubmatch(code, -1) {
		plain[m[1]] = true
	}
	for _, m := range anyField.FindAllStringSubmatch(code, -1) {
		if !plain[m[1]] {
			return fmt.Errorf("%s: ListItem.%s is not a plain non-null field any more (a resolver, a directive or a nullable type); the fast path cannot write it", execFile, m[1])
		}
	}
	want := map[string]bool{"value": true, "timestamp": true, "expiresAt": true, "cursor": true}
	for f := range plain {
		if !want[f] {
			return fmt.Errorf("%s: ListItem has a field %q that model.MarshalListItems does not write", execFile, f)
		}
	}
	m := sliceMarshaler.FindStringSubmatchIndex(code)
	if m == nil {
		return fmt.Errorf("%s: no generated marshaler of []model.ListItem", execFile)
	}
	name := code[m[2]:m[3]]
	dispatch := fmt.Sprintf(`// %[1]s is rewritten by graph/fastpath: model.MarshalListItems writes
// the items, unless model.FastListItems is off.
func (ec *executionContext) %[1]s(ctx context.Context, sel ast.SelectionSet, v []model.ListItem) graphql.Marshaler {
	if model.FastListItems.Load() {
		return model.MarshalListItems(ec.OperationContext, sel, v)
	}
	return ec.%[1]sGenerated(ctx, sel, v)
}

`, name)
	code = code[:m[0]] + dispatch + strings.Replace(code[m[0]:], name+"(", name+"Generated(", 1)
	out, err := format.Source([]byte(code))
	if err != nil {
		return err
	}
	return os.WriteFile(execFile, out, 0o644)
}
