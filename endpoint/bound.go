package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
)

// Every byte of a response counts against --max-response-bytes: its list
// items and features (charged by the lists service, per field, as it
// resolves), its errors (charged by the error presenter, each as it is
// made), and what else it writes (responseBound, once it is written).

// responseFull is the error that says a response passed its bound: the
// one error it shows past it.
func responseFull(budget *lists.Service, path ast.Path) *gqlerror.Error {
	full := budget.ResponseFull()
	return &gqlerror.Error{Err: full, Message: full.Error(), Path: path, Extensions: map[string]any{"code": CodeBadUserInput}}
}

// errorBytes is what an error adds to a response: its JSON, as
// writeResponse writes it.
func errorBytes(e *gqlerror.Error) int {
	b, _ := json.Marshal(e)
	return len(b) + 1 // and a comma
}

// responseBound bounds each response (a query's or mutation's, a
// subscription's result, an error answered instead) to
// --max-response-bytes, with the envelope of the message that carries it
// (a WebSocket's). Its list items, the features its queries read and its
// errors were charged as they were made, and past the bound the error
// presenter showed each error as the one that says so: it keeps the first
// of those, and none after. What else the data holds (names, ids, the
// feature a mutation returns) is counted once it is written: a response
// larger than the bound is answered with that error alone.
type responseBound struct{ lists *lists.Service }

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = responseBound{}

func (responseBound) ExtensionName() string                   { return "ResponseBound" }
func (responseBound) Validate(graphql.ExecutableSchema) error { return nil }
func (r responseBound) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp == nil {
		return nil
	}
	full := false
	resp.Errors = slices.DeleteFunc(resp.Errors, func(e *gqlerror.Error) bool {
		if !errors.Is(e.Err, lists.ErrResponseFull) {
			return false
		}
		seen := full
		full = true
		return seen
	})
	op := operation.From(ctx)
	envelope := 0
	if op != nil {
		envelope = op.Envelope
	}
	if written(resp)+envelope <= r.lists.Limits().MaxResponseBytes {
		return resp
	}
	if op != nil {
		op.AddCode(CodeBadUserInput)
	}
	return &graphql.Response{Errors: gqlerror.List{responseFull(r.lists, nil)}, Extensions: resp.Extensions}
}

// written is about what writeResponse writes of resp: its data, with the
// escapes it adds, and its errors.
func written(resp *graphql.Response) int {
	n := len(resp.Data)
	if htmlEscaped(resp.Data) {
		// <, > and & become \u003c, 5 bytes more; U+2028 and U+2029
		// \u2028, 3 more.
		n += 5*(bytes.Count(resp.Data, []byte("<"))+bytes.Count(resp.Data, []byte(">"))+bytes.Count(resp.Data, []byte("&"))) +
			3*(bytes.Count(resp.Data, []byte("\u2028"))+bytes.Count(resp.Data, []byte("\u2029")))
	}
	for _, e := range resp.Errors {
		n += errorBytes(e)
	}
	return n
}
