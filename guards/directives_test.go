package guards

import (
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// @defer and @stream are refused with one error each, which says they are
// not served, whether the schema declares them (gqlparser declares @defer
// in every schema) or not; every other directive is checked as
// KnownDirectives checks it.
func TestDeferAndStreamAreNotServed(t *testing.T) {
	declared := gqlparser.MustLoadSchema(&ast.Source{Input: `type Query { a: [Int] b: Int }`})
	undeclared := *declared
	undeclared.Directives = map[string]*ast.DirectiveDefinition{}
	for name, d := range declared.Directives {
		if name != "defer" {
			undeclared.Directives[name] = d
		}
	}
	for _, c := range []struct {
		doc  string
		want []string // the start of each error
	}{
		{`{ ... @defer { a } }`, []string{"@defer is not served"}},
		{`{ ... F @defer(label: "l") } fragment F on Query { b }`, []string{"@defer is not served"}},
		{`{ a @defer }`, []string{"@defer is not served"}}, // and not where it may not be
		{`{ a @stream(initialCount: 1) }`, []string{"@stream is not served"}},
		{`{ a @stream b @defer }`, []string{"@stream is not served", "@defer is not served"}},
		{`{ a @foo }`, []string{`Unknown directive "@foo".`}},
		{`query @include(if: true) { a }`, []string{`Directive "@include" may not be used on QUERY.`}},
		{`{ a @skip(if: false) }`, nil},
	} {
		for name, schema := range map[string]*ast.Schema{"declared": declared, "undeclared": &undeclared} {
			doc, err := parser.ParseQuery(&ast.Source{Input: c.doc})
			if err != nil {
				t.Fatal(err)
			}
			errs := validator.ValidateWithRules(schema, doc, ValidationRules())
			ok := len(errs) == len(c.want)
			for i := range errs {
				ok = ok && strings.HasPrefix(errs[i].Message, c.want[i])
			}
			if !ok {
				t.Errorf("%s, @defer %s: errors %v; want %q", c.doc, name, errs, c.want)
			}
		}
	}
}
