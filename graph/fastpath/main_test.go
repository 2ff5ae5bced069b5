package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/codegen"
	"github.com/99designs/gqlgen/codegen/config"
)

const execFile = "../exec/exec.go"

// The generated code has the fast path in place: a `go generate` that
// left it out (gqlgen run alone, say) fails here.
func TestExecHasTheFastPath(t *testing.T) {
	src, err := os.ReadFile(execFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(src, writers); err != nil {
		t.Fatal(err)
	}
}

// Rewriting gqlgen's own output gives exactly the committed file, and
// rewriting that again changes nothing.
func TestRewriteIsIdempotent(t *testing.T) {
	committed, err := os.ReadFile(execFile)
	if err != nil {
		t.Fatal(err)
	}
	stock, targets := unrewrite(t, committed)
	if len(targets) != len(writers) {
		t.Fatalf("%d rewritten marshalers, want %d", len(targets), len(writers))
	}
	if err := check(stock, writers); err == nil {
		t.Fatal("check accepts gqlgen's own output")
	}
	once, err := rewrite(stock, targets)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(once, committed) {
		t.Fatal("rewriting gqlgen's output does not give the committed exec.go")
	}
	twice, err := rewrite(once, targets)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(twice, once) {
		t.Fatal("a second rewrite changed the file")
	}
}

// unrewrite turns a rewritten exec.go back into what gqlgen wrote: each
// dispatcher X (with its comment) goes, and X_gqlgen is X again. It
// returns the targets it found.
func unrewrite(t *testing.T, src []byte) ([]byte, []target) {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	methods := execMethods(file)
	type cut struct {
		from, to, nameAt int
		name             string
	}
	var cuts []cut
	var targets []target
	for name, d := range methods {
		g := methods[name+"_gqlgen"]
		if g == nil {
			continue
		}
		for _, w := range writers {
			if checkDispatch(d, "model", w.fn) == nil {
				targets = append(targets, target{method: name, fn: w.fn, what: w.gqlType})
			}
		}
		cuts = append(cuts, cut{fset.Position(d.Doc.Pos()).Offset, fset.Position(g.Pos()).Offset, fset.Position(g.Name.Pos()).Offset, name})
	}
	slices.SortFunc(cuts, func(a, b cut) int { return b.from - a.from })
	out := string(src)
	for _, c := range cuts {
		out = out[:c.from] + out[c.to:c.nameAt] + c.name + out[c.nameAt+len(c.name+"_gqlgen"):]
	}
	return []byte(out), targets
}

// The plugin refuses a schema in which an object a writer handles is not
// plain any more, or differs from what the writer knows, naming the object
// and why.
func TestPluginRefusesObjectsThatAreNotPlain(t *testing.T) {
	t.Chdir("../..")         // gqlgen.yml's paths are the repository's
	var first *config.Config // its packages, loaded once, serve every case
	data := func(t *testing.T, edit func(schema string, cfg *config.Config) string) *codegen.Data {
		t.Helper()
		cfg, err := config.LoadConfig("gqlgen.yml")
		if err != nil {
			t.Fatal(err)
		}
		// The models gqlgen generates are bound as they are.
		cfg.AutoBind = append(cfg.AutoBind, "github.com/listgate/listgate/graph/model")
		cfg.Sources[0].Input = edit(cfg.Sources[0].Input, cfg)
		if err := cfg.LoadSchema(); err != nil {
			t.Fatal(err)
		}
		if first != nil {
			cfg.Packages = first.Packages
		}
		if err := cfg.Init(); err != nil {
			t.Fatal(err)
		}
		d, err := codegen.BuildData(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = cfg
		}
		return d
	}
	asIs := func(s string, _ *config.Config) string { return s }
	// without returns the first writer with one field left out of what it
	// knows.
	without := func(object, field string) []writer {
		w := writers[0]
		w.types = maps.Clone(w.types)
		w.types[object] = maps.Clone(w.types[object])
		delete(w.types[object], field)
		return []writer{w}
	}
	with := func(object, field, typ string) []writer {
		w := without(object, "")
		w[0].types[object][field] = typ
		return w
	}
	for _, tc := range []struct {
		name    string
		edit    func(schema string, cfg *config.Config) string
		writers []writer
		error   string // "" accepts
	}{
		{"the schema as it is", asIs, writers, ""},
		{"a field the Go type lacks", func(s string, _ *config.Config) string {
			return strings.Replace(s, "type ListItem {", "type ListItem {\n  rank: Int!", 1)
		}, writers, "ListItem: a field has a resolver"},
		{"a field with a resolver", func(s string, cfg *config.Config) string {
			m := cfg.Models["ListItem"]
			m.Fields = map[string]config.TypeMapField{"cursor": {Resolver: true}}
			cfg.Models["ListItem"] = m
			return s
		}, writers, "ListItem: a field has a resolver"},
		{"a field with a directive", func(s string, cfg *config.Config) string {
			cfg.Directives["upper"] = config.DirectiveConfig{}
			s = strings.Replace(s, "type ListPage {", "directive @upper on FIELD_DEFINITION\ntype ListPage {", 1)
			return strings.Replace(s, "hasMore: Boolean!", "hasMore: Boolean! @upper", 1)
		}, writers, "ListPage: field hasMore has a directive"},
		{"a field of another type", func(s string, _ *config.Config) string {
			return strings.Replace(s, "endCursor: String\n", "endCursor: String!\n", 1)
		}, writers, "ListPage: field endCursor is of type String!, not String"},
		{"a field the writer does not know", asIs, without("ListItem", "cursor"), "ListItem: field cursor is new"},
		{"a field the schema lacks", asIs, with("ListItem", "rank", "Int!"), "ListItem: it has 5 of the 6 fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plugin{writers: tc.writers}
			err := p.GenerateCode(data(t, tc.edit))
			switch {
			case tc.error == "" && err != nil:
				t.Fatal(err)
			case tc.error == "" && len(p.targets) != len(tc.writers):
				t.Fatalf("targets %v", p.targets)
			case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
				t.Fatalf("got %v, want an error with %q", err, tc.error)
			}
		})
	}
}
