package guards

import (
	"regexp"
	"strconv"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/listgate/listgate/values"
)

// ValidationRules are gqlparser's, with KnownDirectives refusing the
// directives notServed, plus exactLiterals. They run once per document;
// the query cache keeps the result.
func ValidationRules() *rules.Rules {
	r := rules.NewDefaultRules()
	r.ReplaceRule(rules.KnownDirectivesRule.Name, servedDirectives)
	r.AddRule("ExactLiterals", exactLiterals)
	return r
}

// surrogateEscape finds \uD800–\uDFFF: the parser writes each half of a
// UTF-16 surrogate pair as U+FFFD, so "\ud83d\ude00" would not be 😀.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// exactLiterals refuses literals that the parser would change without a
// word: integers beyond 64 bits, numbers a 64-bit float cannot hold
// exactly, surrogate escapes, and enum literals where no enum is expected
// (inside a ListValue, a bare FOO would be stored as the string "FOO").
// Variables follow the same rules in values.Encode, so a value means the
// same written either way.
func exactLiterals(observers *core.Events, addError core.AddErrFunc) {
	checkedSource := false
	observers.OnOperation(func(_ *core.Walker, op *ast.OperationDefinition) {
		if checkedSource || op.Position == nil || op.Position.Src == nil {
			return
		}
		checkedSource = true
		if m := surrogateEscape.FindString(op.Position.Src.Input); m != "" {
			addError(core.Message("%s: escaped UTF-16 surrogates are not decoded by this server's GraphQL parser; write the character itself, or pass the value in variables", m), core.At(op.Position))
		}
	})
	observers.OnValue(func(_ *core.Walker, v *ast.Value) {
		switch v.Kind {
		case ast.IntValue:
			if _, err := strconv.ParseInt(v.Raw, 10, 64); err != nil {
				addError(core.Message("integer %s is beyond 64 bits", v.Raw), core.At(v.Position))
			}
		case ast.FloatValue:
			if err := values.CheckNumber(v.Raw); err != nil {
				addError(core.Message("%v", err), core.At(v.Position))
			}
		case ast.EnumValue:
			if v.Definition == nil || v.Definition.Kind != ast.Enum {
				addError(core.Message("%s: an enum literal is not a JSON value; write a string in quotes (\"%s\")", v.Raw, v.Raw), core.At(v.Position))
			}
		}
	})
}
