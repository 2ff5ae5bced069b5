package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/lists"
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
	CodeClockSkew       = "CLOCK_SKEW"
	// As Apollo Router names them: an operation not in the trusted
	// documents, and an id or hash not among them.
	CodeNotInSafelist = "QUERY_NOT_IN_SAFELIST"
	CodeNotInList     = "PERSISTED_QUERY_NOT_IN_LIST"
	CodeInternal      = "INTERNAL"
)

// errorPresenter is the one place that decides what a client sees of an
// error: a code from the fixed set, mapped from the error's kind
// (package errkind), and a message a person can act on, quoting at most
// the start of what the client sent. Store and driver details stay in the
// log.
//
// Every error is charged to its operation's response, with its list items,
// against --max-response-bytes (lists.Service.ChargeError): one that does
// not fit is shown as the error that says so, and the response keeps only
// the first of those (responseBound). gqlgen shows every error the
// presenter returns, so none is left out here: a response left without
// errors could carry neither data nor errors.
//
// A subscription the watch hub refused is counted by onRefused.
func errorPresenter(log *slog.Logger, onRefused func(context.Context, error), budget *lists.Service) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		presented := present(ctx, log, onRefused, err)
		if budget.ChargeError(ctx, errorBytes(presented)) {
			return presented
		}
		return responseFull(budget, presented.Path)
	}
}

// present makes what a client sees of err.
func present(ctx context.Context, log *slog.Logger, onRefused func(context.Context, error), err error) *gqlerror.Error {
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
		message = foreignMessage(message)
		if c, _ := gqlErr.Extensions["code"].(string); c == "PERSISTED_QUERY_NOT_FOUND" {
			code = c // automatic persisted query clients rely on this code
		}
	case CodeBadUserInput:
		if errors.As(err, &intErr) || errors.As(err, &numErr) {
			message = foreignMessage(message)
		}
		if intErr != nil || numErr != nil || errors.Is(err, errkind.Coercion) {
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
	case CodeClockSkew:
		onRefused(ctx, err)
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
		Path:       variablePath(gqlErr.Path),
		Locations:  gqlErr.Locations,
		Extensions: ext,
	}
}

// foreignMessage bounds a message gqlgen or gqlparser wrote, which may
// quote a name or value of the request whole, as errkind.Quote bounds
// ours: each string it quotes is clipped, so is the value of the messages
// that name one without quotes (an operation name, an enum value), and
// what may still be long (a list literal, say) is cut past maxForeign.
func foreignMessage(msg string) string {
	if msg == noOperationName {
		return "the document has several operations: name the one to run with \"operationName\""
	}
	msg = clipQuoted(quoteUnquoted(msg))
	if len(msg) <= maxForeign {
		return msg
	}
	n := maxForeign
	for n > maxForeign-utf8.UTFMax && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n] + "…"
}

// noOperationName is gqlgen's message for a document sent without
// operationName whose operations are several: it names no operation, and
// says nothing of what to do.
const noOperationName = "operation  not found"

// maxForeign is the longest message of gqlgen's or gqlparser's own a client
// sees.
const maxForeign = 4 * errkind.MaxQuoted

// quoteUnquoted quotes, clipped, the value of a message of gqlgen's or
// gqlparser's that names one without quotes.
func quoteUnquoted(msg string) string {
	if name, ok := strings.CutPrefix(msg, "operation "); ok {
		if name, ok := strings.CutSuffix(name, " not found"); ok {
			return "operation " + errkind.Quote(name) + " not found" // gqlgen: no operation of operationName
		}
	}
	if i := strings.LastIndex(msg, " is not a valid "); i >= 0 {
		return errkind.Quote(msg[:i]) + msg[i:] // gqlparser: a variable's enum value
	}
	return msg
}

// clipQuoted clips each string msg quotes (with Go's escapes) as
// errkind.Quote does.
func clipQuoted(msg string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(msg, '"')
		if i < 0 {
			break
		}
		n := quotedLen(msg[i:])
		if n < 0 {
			break
		}
		q := msg[i : i+n]
		if s, err := strconv.Unquote(q); err != nil {
			q = `"` + errkind.Clip(q[1:n-1]) + `"`
		} else if len(s) > errkind.MaxQuoted {
			q = errkind.Quote(s)
		}
		b.WriteString(msg[:i])
		b.WriteString(q)
		msg = msg[i+n:]
	}
	if b.Len() == 0 {
		return msg
	}
	b.WriteString(msg)
	return b.String()
}

// quotedLen is the length of the quoted string s starts with, quotes
// included, or -1 when it does not end.
func quotedLen(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// variablePath clips the names of a path into a variable, where gqlparser
// puts the keys a client sent (an unknown field of an input object);
// the path of a field is the document's own, and names data the response
// carries.
func variablePath(p ast.Path) ast.Path {
	if len(p) == 0 || p[0] != ast.PathName("variable") {
		return p
	}
	out := make(ast.Path, len(p))
	for i, el := range p {
		if name, ok := el.(ast.PathName); ok {
			el = ast.PathName(errkind.Clip(string(name)))
		}
		out[i] = el
	}
	return out
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
	case errors.Is(err, errkind.ClockSkew):
		return CodeClockSkew
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
