package guards

import (
	"slices"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// notServed are the directives of incremental delivery. gqlgen executes
// @defer, but every transport here answers an operation with one
// response: a deferred fragment's fields would come back null, without an
// error, and never be sent. Both are refused until they are served.
var notServed = []string{"defer", "stream"}

// servedDirectives is gqlparser's KnownDirectives rule with the
// directives notServed refused as such, whether or not the schema declares
// them: one error for each, which says so, where KnownDirectives would
// call @stream unknown, or say nothing of @defer.
func servedDirectives(observers *core.Events, addError core.AddErrFunc) {
	refused := map[gqlerror.Location]bool{}
	observers.OnDirective(func(_ *core.Walker, d *ast.Directive) {
		if !slices.Contains(notServed, d.Name) {
			return
		}
		refused[gqlerror.Location{Line: d.Position.Line, Column: d.Position.Column}] = true
		addError(core.Message("@%s is not served: this gateway answers every operation with one response, and sends no part of it later; ask for the fields without @%s", d.Name, d.Name),
			core.At(d.Position))
	})
	// Registered after the observer above, so that it meets each
	// directive second, and leaves out what was said of one refused.
	rules.KnownDirectivesRule.RuleFunc(observers, func(options ...core.ErrorOption) {
		var e gqlerror.Error
		for _, o := range options {
			o(&e)
		}
		if len(e.Locations) == 1 && refused[e.Locations[0]] {
			return
		}
		addError(options...)
	})
}
