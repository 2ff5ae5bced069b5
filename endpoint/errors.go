package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/operation"
)

// Error codes a client sees in extensions.code.
const (
	CodeBadRequest      = "BAD_REQUEST"
	CodeBadUserInput    = "BAD_USER_INPUT"
	CodeConflict        = "CONFLICT"
	CodeNotFound        = "NOT_FOUND"
	CodeUnauthenticated = "UNAUTHENTICATED"
	CodeForbidden       = "FORBIDDEN"
	CodeUnavailable     = "UNAVAILABLE"
	CodeTimeout         = "TIMEOUT"
	CodeTooSlow         = "TOO_SLOW"
	CodePositionExpired = "POSITION_EXPIRED"
	CodeThrottled       = "THROTTLED"
	// As Apollo Router names them: an operation not in the trusted
	// documents, and an id or hash not among them.
	CodeNotInSafelist = "QUERY_NOT_IN_SAFELIST"
	CodeNotInList     = "PERSISTED_QUERY_NOT_IN_LIST"
	CodeInternal      = "INTERNAL"
)

// errorPresenter is the one place that decides what a client sees of an
// error: a code from the fixed set, mapped from the error's kind
// (package errkind), and a message a person can act on. Store and driver
// details stay in the log.
//
// A subscription the watch hub refused is counted by onRefused.
func errorPresenter(log *slog.Logger, onRefused func(context.Context, error)) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		message := gqlErr.Message
		code := classify(err)
		var intErr *graphql.IntegerError
		var numErr *strconv.NumError
		switch code {
		case "":
			// Parse and validation errors, and arguments gqlgen could not
			// coerce: the request is at fault.
			code = CodeBadUserInput
			if c, _ := gqlErr.Extensions["code"].(string); c == "PERSISTED_QUERY_NOT_FOUND" {
				code = c // automatic persisted query clients rely on this code
			}
		case CodeBadUserInput:
			if errors.As(err, &intErr) || errors.As(err, &numErr) || errors.Is(err, errkind.Coercion) {
				// An argument gqlgen could not coerce: name it.
				if n := len(gqlErr.Path); n > 0 {
					message = fmt.Sprintf("%v: %s", gqlErr.Path[n-1], message)
				}
			}
		case CodeUnavailable:
			switch {
			case errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, errkind.Refused):
				// The store gave up because the operation's deadline passed.
				code, message = CodeTimeout, errkind.DeadlinePassed.Error()
			case errors.Is(err, errkind.Refused):
				message = err.Error()
				onRefused(ctx, err)
			case errors.Is(err, context.Canceled):
				message = "the request was cancelled"
			default:
				message = "the list store did not answer in time; retry later"
			}
		case CodeTimeout:
			if !errors.Is(err, errkind.Timeout) {
				message = errkind.DeadlinePassed.Error() // not the driver's "context deadline exceeded"
			}
		case CodeInternal:
			log.ErrorContext(ctx, "internal error", "path", gqlErr.Path.String(), "err", err)
			message = "internal error"
		}
		if op := operation.From(ctx); op != nil {
			op.AddCode(code)
		}
		ext := map[string]any{"code": code}
		var resume interface{ ResumePosition() string }
		if errors.As(err, &resume) {
			// Where a subscription that ended resumes: its after.
			ext["position"] = resume.ResumePosition()
		}
		return &gqlerror.Error{
			Message:    message,
			Path:       gqlErr.Path,
			Locations:  gqlErr.Locations,
			Extensions: ext,
		}
	}
}

// classify maps an error to its code; "" for errors gqlgen raised itself.
func classify(err error) string {
	switch {
	case errors.Is(err, documents.ErrNotSafelisted):
		return CodeNotInSafelist
	case errors.Is(err, documents.ErrNotInList):
		return CodeNotInList
	case errors.Is(err, errkind.Malformed):
		return CodeBadRequest
	case errors.Is(err, errkind.Invalid):
		return CodeBadUserInput
	case errors.Is(err, errkind.Conflict):
		return CodeConflict
	case errors.As(err, new(*graphql.IntegerError)), errors.As(err, new(*strconv.NumError)):
		return CodeBadUserInput // an Int argument out of range, or not a number
	case errors.Is(err, errkind.NotFound):
		return CodeNotFound
	case errors.Is(err, errkind.Timeout), errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, errkind.TooSlow):
		return CodeTooSlow
	case errors.Is(err, errkind.PositionExpired):
		return CodePositionExpired
	case errors.Is(err, errkind.Throttled):
		return CodeThrottled
	case errors.Is(err, errkind.Forbidden):
		return CodeForbidden
	case errors.Is(err, errkind.Unauthenticated):
		return CodeUnauthenticated
	case errors.Is(err, errkind.Unavailable), errors.Is(err, context.Canceled):
		return CodeUnavailable
	}
	var gqlErr *gqlerror.Error
	if errors.As(err, &gqlErr) && gqlErr.Unwrap() == nil {
		return ""
	}
	return CodeInternal
}

// recoverPanic turns a panic in a resolver or a loader's read into an
// INTERNAL error, logged with its stack and counted.
func recoverPanic(log *slog.Logger, panics metric.Int64Counter) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		panics.Add(ctx, 1)
		log.ErrorContext(ctx, "panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return errors.New("panic")
	}
}

// WriteError answers a request the GraphQL endpoint does not serve (a path
// no route has, a method its route does not take, a failing /readyz) in
// the endpoint's shape: a JSON body of one error with its code.
func WriteError(w http.ResponseWriter, status int, code, message string) {
	w.Header()["Content-Type"] = contentTypes["application/json"]
	w.WriteHeader(status)
	writeResponse(w, &graphql.Response{Errors: gqlerror.List{{Message: message, Extensions: map[string]any{"code": code}}}})
}
