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
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/guards"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
	"github.com/listgate/listgate/pool"
)

// Every byte of a response counts against --max-response-bytes: its list
// items and features (charged by the lists service, per field, as it
// resolves), its errors (charged by the error presenter, each as it is
// made), and what else it writes (responseBound, once it is written).
//
// The bytes of the answers of queries and mutations, all together, are a
// pool, --max-in-flight-response-bytes, of which a caller holds its share
// (--caller-max-in-flight-share): its pages take their part before they
// are read (package lists), its answer once built holds what it writes
// (responseBound settles it), and gives it back once written (Handler.end,
// connection.end). A client that does not read its answers holds that,
// and no slot of --max-in-flight or complexity, which are given back
// once an answer is made, before it is written.

// newAnswers returns the bytes of answers being built and written, of
// which one caller holds at most share (and at least one answer of
// --max-response-bytes), held being the gauge
// listgate_inflight_response_bytes, and the pages waiting for room in
// them listgate_inflight_response_bytes_waiting; nil (unbounded) when
// MaxInFlightResponseBytes is 0.
func newAnswers(l Limits, share float64, meter metric.Meter) (*pool.Pool, error) {
	if l.MaxInFlightResponseBytes <= 0 {
		return nil, nil // unbounded
	}
	size := max(l.MaxInFlightResponseBytes, int64(l.MaxResponseBytes))
	p := pool.New(size, max(int64(share*float64(size)), int64(l.MaxResponseBytes)))
	_, err := meter.Int64ObservableGauge("listgate.inflight.response.bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes of the answers being built and written, out of --max-in-flight-response-bytes."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(p.Used())
			return nil
		}))
	if err != nil {
		return nil, err
	}
	_, err = meter.Int64ObservableGauge("listgate.inflight.response.bytes.waiting",
		metric.WithDescription("Pages waiting for room in --max-in-flight-response-bytes, or in their caller's share of it."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(p.Waiting())
			return nil
		}))
	return p, err
}

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
// larger than the bound is answered with that error alone. Queries and
// mutations then hold what they write of the answers' bytes (hold).
type responseBound struct {
	lists   *lists.Service
	callers *guards.Callers // counts a caller refused for its share of the answers' bytes
}

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = responseBound{}

func (responseBound) ExtensionName() string                   { return "ResponseBound" }
func (responseBound) Validate(graphql.ExecutableSchema) error { return nil }
func (r responseBound) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	op := operation.From(ctx)
	if op != nil {
		lists.SetCaller(ctx, op.Caller) // its pages take their bytes from its share
	}
	resp := next(ctx)
	if resp == nil {
		return nil
	}
	resp = r.bound(op, resp)
	if graphql.HasOperationContext(ctx) {
		if oc := graphql.GetOperationContext(ctx); oc.Operation != nil && oc.Operation.Operation != ast.Subscription {
			// Not a refusal before an operation was made, which is small,
			// nor a subscription's result, which its buffers bound.
			resp = r.hold(ctx, op, resp)
		}
	}
	if op != nil && slices.ContainsFunc(resp.Errors, func(e *gqlerror.Error) bool { return errors.Is(e.Err, lists.ErrAnswersShare) }) {
		r.callers.Shared(ctx, op.Caller)
	}
	return resp
}

// bound keeps the first error that says the response passed its bound,
// and answers with that error alone a response whose other bytes pass it.
func (r responseBound) bound(op *operation.Operation, resp *graphql.Response) *graphql.Response {
	full := false
	resp.Errors = slices.DeleteFunc(resp.Errors, func(e *gqlerror.Error) bool {
		if !errors.Is(e.Err, lists.ErrResponseFull) {
			return false
		}
		seen := full
		full = true
		return seen
	})
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

// hold has the operation hold, of the bytes of answers, what its answer
// writes until it is written, and charges its caller what it writes past
// its cost (guards.Callers.ChargeAnswer); an answer that found no room in
// its caller's share, or in the pool, by its deadline is answered with
// that error alone.
func (r responseBound) hold(ctx context.Context, op *operation.Operation, resp *graphql.Response) *graphql.Response {
	n := written(resp)
	err := r.lists.Settle(ctx, n)
	if err == nil {
		if op != nil {
			// What it writes past its cost, its caller pays for too.
			op.Quota = r.callers.ChargeAnswer(ctx, op.Caller, op.Principal, op.Quota, op.Cost, n)
		}
		return resp
	}
	code := classify(err)
	if op != nil {
		op.AddCode(code)
	}
	return &graphql.Response{Errors: gqlerror.List{{Err: err, Message: err.Error(), Extensions: map[string]any{"code": code}}}, Extensions: resp.Extensions}
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
