package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/guards"
	"github.com/listgate/listgate/operation"
)

// The HTTP transports read a request's GraphQL parameters: a POST's JSON
// body, or a GET's query string. They refuse what they would change
// silently: JSON that is not strict (invalid UTF-8, lone surrogates, a
// name twice) and invalid UTF-8 in a query string. Everything else (what
// they accept, status codes, content negotiation, error bodies) is what
// gqlgen's own POST and GET transports do, and transport_test.go compares
// the two byte for byte.

// transportOf names the HTTP transport that serves r, or "" for none: a
// POST of application/json, or a GET.
func transportOf(r *http.Request) string {
	switch r.Method {
	case http.MethodGet:
		return operation.GET
	case http.MethodPost:
		if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && mediaType == "application/json" {
			return operation.POST
		}
	}
	return ""
}

// unsupported says what a request no transport takes should be.
func unsupported(w http.ResponseWriter, r *http.Request) (int, error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		return http.StatusMethodNotAllowed, fmt.Errorf(`%w: method %s: send a POST with a JSON body, a GET with ?query=…, or a WebSocket upgrade`, errkind.Malformed, errkind.Clip(r.Method))
	}
	return http.StatusUnsupportedMediaType, fmt.Errorf(
		`%w: Content-Type %s: send Content-Type: application/json with a body such as {"query": "{ listFeatures { key } }"}`, errkind.Malformed, errkind.Quote(r.Header.Get("Content-Type")))
}

// readBody reads a POST's body, at most maxBytes of it, by the deadline:
// a client that sends slowly holds no slot of --max-in-flight while it
// does, and is answered once the deadline passes.
func readBody(w http.ResponseWriter, r *http.Request, maxBytes int64, deadline time.Time) ([]byte, int, error) {
	if r.ContentLength > maxBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("%w %s", errkind.Invalid, bodyTooLarge(maxBytes))
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline) // unsupported only by test recorders
	body, err := readAll(http.MaxBytesReader(w, r.Body, maxBytes), r.ContentLength)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("%w %s", errkind.Invalid, bodyTooLarge(tooLarge.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, http.StatusRequestTimeout, fmt.Errorf("%w: the request body did not arrive by the request's deadline (--request-timeout)", errkind.Malformed)
	case err != nil:
		return nil, http.StatusBadRequest, fmt.Errorf("%w: reading the request body: %v", errkind.Malformed, err)
	}
	return body, 0, nil
}

// readAll is io.ReadAll into a buffer of the body's declared length, read
// once: no buffer grown and copied on the way. A body declared longer than
// presizedBody grows as it arrives, as io.ReadAll grows it: a client that
// declares a large body and sends it slowly holds what it sent, not what
// it declared.
func readAll(r io.Reader, length int64) ([]byte, error) {
	if length <= 0 || length > presizedBody {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, length+1) // +1: the read that finds the end
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			// Longer than declared: net/http's body reader refuses that;
			// read on as io.ReadAll would.
			rest, err := io.ReadAll(r)
			return append(b, rest...), err
		}
	}
}

// presizedBody is the longest body readAll reads into a buffer of its
// declared length: as much as net/http's own buffers of a connection, so
// that a connection that declares a body and sends none holds no more
// than twice what any connection holds.
const presizedBody = 8 << 10

func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body larger than %d bytes (--max-body-bytes)", limit)
}

// rawParams keep the parameters of POSTs, whose operations give them back
// when they end.
var rawParams = sync.Pool{New: func() any { return new(graphql.RawParams) }}

// decodeParams decodes a POST's body, or a subscribe message's payload
// (what says which), into params.
func decodeParams(what string, body []byte, params *graphql.RawParams) (documentID string, err error) {
	// documentId names a trusted document (GraphQL over HTTP).
	withID := struct {
		*graphql.RawParams
		DocumentID string `json:"documentId"`
	}{RawParams: params}
	if err := decodeJSON(body, &withID); err != nil {
		if json.Valid(body) && !jsontext.Value(body).IsValid() {
			// Syntax encoding/json would take, but invalid UTF-8, a lone
			// surrogate ("\ud800") or a name twice: decoded leniently,
			// distinct values would become one; refuse them.
			return "", fmt.Errorf("%w %s", errkind.Invalid, strictJSONError(what, body))
		}
		return "", fmt.Errorf(`%w: the %s is not a JSON object such as {"query": "{ listFeatures { key } }", "variables": {}}: %s`, errkind.Malformed, what, jsonError(err))
	}
	return withID.DocumentID, nil
}

// getParams decodes a GET's query string into req; with keep, a
// variables parameter that is an object is kept as its JSON, for a plan.
func getParams(r *http.Request, req *request, keep bool) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fmt.Errorf("%w: query string: %v", errkind.Malformed, err)
	}
	params := req.params
	params.Query, params.OperationName = q.Get("query"), q.Get("operationName")
	for _, name := range []string{"query", "operationName", "variables", "extensions", "documentId"} {
		v := q.Get(name)
		bad := !utf8.ValidString(v)
		if !bad && v != "" && (name == "variables" || name == "extensions") {
			bad = !jsontext.Value(v).IsValid()
		}
		if bad {
			return fmt.Errorf("%w %s parameter: not valid UTF-8, or not strict JSON (lone surrogates, duplicate names)", errkind.Invalid, name)
		}
	}
	for name, into := range map[string]*map[string]any{"variables": &params.Variables, "extensions": &params.Extensions} {
		v := q.Get(name)
		if keep && name == "variables" && strings.HasPrefix(strings.TrimLeft(v, " \t\r\n"), "{") {
			req.variables = jsontext.Value(v) // an object: strict JSON, checked above
			continue
		}
		if v != "" {
			if err := decodeJSON([]byte(v), into); err != nil {
				return fmt.Errorf("%w: the %s parameter is not a JSON object: %s", errkind.Malformed, name, jsonError(err))
			}
		}
	}
	req.documentID = q.Get("documentId")
	req.compilable = keep && onlyCost(params.Extensions)
	return nil
}

// jsonOptions decode a request's JSON as gqlgen's transports do with
// encoding/json (names matched without regard to case, numbers kept as
// json.Number), but strictly: RFC 8259 text in valid UTF-8 without lone
// surrogates, no name twice (RFC 7493), nothing after the value. One pass,
// about half encoding/json's allocations.
var jsonOptions = jsonv2.JoinOptions(
	jsonv2.MatchCaseInsensitiveNames(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *any) error {
		if dec.PeekKind() != '0' {
			return jsonv2.SkipFunc
		}
		raw, err := dec.ReadValue()
		*v = json.Number(raw)
		return err
	})))

func decodeJSON(data []byte, into any) error {
	return jsonv2.Unmarshal(data, into, jsonOptions)
}

// jsonError is decodeJSON's error without its package's prefix, bounded
// as gqlgen's messages are: it may quote a name of the request (one given
// twice) and a JSON Pointer to it.
func jsonError(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"jsontext: ", "json: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	return foreignMessage(msg)
}

// strictJSONError says why a text that encoding/json would take is not
// strict JSON.
func strictJSONError(what string, body []byte) string {
	_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
	msg := what + ": not strict JSON"
	if err != nil {
		msg += ": " + jsonError(err)
	}
	return msg + " (strings must be valid UTF-8 without lone surrogates, and names unique)"
}

// operationErrorStatus is gqlgen's status for an operation that could not
// be made: 422 (400 for application/graphql-response+json) when the
// request is malformed, 200 otherwise.
func operationErrorStatus(errs gqlerror.List, contentType string) int {
	if errcode.GetErrorKind(errs) != errcode.KindProtocol {
		return http.StatusOK
	}
	if contentType == graphQLResponseJSON {
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// writeResult writes an operation's response. gqlgen gives none when the
// request's context ended first: past the deadline that is a TIMEOUT error
// (a client must never read a bare null), with extensions.cost if op asked
// for it; a client that went away gets nothing. One UNAVAILABLE as a
// whole is 503 (unserved).
func writeResult(w http.ResponseWriter, ctx context.Context, resp *graphql.Response, contentType string, exec graphql.GraphExecutor, op *operation.Operation, callers *guards.Callers) {
	if resp == nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			w.WriteHeader(http.StatusGatewayTimeout)
			writeResponse(w, withCost(exec.DispatchError(ctx, gqlerror.List{gqlerror.WrapPath(nil, errkind.DeadlinePassed)}), op, callers))
		}
		return
	}
	if unserved(resp, contentType) {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	writeResponse(w, resp)
}

// unserved says whether an answer is UNAVAILABLE as a whole: every error
// UNAVAILABLE (the store failed, or a bound of the gateway's refused it),
// and no data came of it. Such an answer has the status of a gateway that
// is starting, or at --max-in-flight: 503 with Retry-After, so that one
// code has one status, and load balancers, retrying clients (Apollo's
// RetryLink retries a 5xx, not a GraphQL error) and 5xx alerts see it.
// No data is data null, or, in application/json, every root field null
// (a mutation's payloads are nullable); application/graphql-response+json
// requires a 2xx for any data but null. An answer with data served is 200
// whatever its fields' errors: that data must reach the client.
func unserved(resp *graphql.Response, contentType string) bool {
	if len(resp.Errors) == 0 {
		return false
	}
	for _, e := range resp.Errors {
		if code, _ := e.Extensions["code"].(string); code != CodeUnavailable {
			return false
		}
	}
	if len(resp.Data) == 0 || string(resp.Data) == "null" {
		return true
	}
	if contentType != "application/json" {
		return false
	}
	var fields map[string]jsontext.Value
	if jsonv2.Unmarshal(resp.Data, &fields) != nil {
		return false
	}
	for _, v := range fields {
		if string(v) != "null" {
			return false
		}
	}
	return true
}

const graphQLResponseJSON = "application/graphql-response+json"

// contentTypes are the Content-Type header values, made once.
var contentTypes = map[string][]string{"application/json": {"application/json"}, graphQLResponseJSON: {graphQLResponseJSON}}

// responseContentType negotiates as gqlgen does: application/json unless
// the client accepts application/graphql-response+json and not
// application/json first.
func responseContentType(r *http.Request) string {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return "application/json"
	}
	for part := range strings.SplitSeq(accept, ",") {
		mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mediaType {
		case "*/*", "application/*", "application/json":
			return "application/json"
		case graphQLResponseJSON:
			return graphQLResponseJSON
		}
	}
	return graphQLResponseJSON
}

// largeAnswer is the data past which an answer is written without a copy;
// so is one of smallAnswer bytes or less, which fits, whole, the buffer
// net/http writes a response through (2 KiB).
const (
	largeAnswer = 64 << 10
	smallAnswer = 2000
)

// writeResponse writes what json.Marshal(resp) would, without parsing the
// data again: encoding/json validates a json.RawMessage and refuses one
// nested past 10,000 levels, and one stored value must not make a whole
// response fail. When the response is data alone (the common case) and
// holds nothing encoding/json would escape (<, >, &, U+2028, U+2029), the
// data is copied as it is.
func writeResponse(w io.Writer, resp *graphql.Response) {
	data := resp.Data
	if len(data) == 0 {
		data = []byte("null")
	}
	simple := len(resp.Errors) == 0 && resp.Label == "" && resp.Path == nil && resp.HasNext == nil && len(resp.Extensions) == 0
	if simple && !htmlEscaped(data) {
		if rw, ok := w.(http.ResponseWriter); ok {
			rw.Header()["Content-Length"] = []string{strconv.Itoa(len(data) + len(`{"data":}`))}
		}
		if len(data) > largeAnswer {
			// Written as it is: a copy would hold the answer twice while
			// its client reads it.
			w.Write([]byte(`{"data":`))
			w.Write(data)
			w.Write([]byte{'}'})
			return
		}
		if len(data) <= smallAnswer {
			// net/http buffers these three writes together and sends
			// them, with the headers, in one write.
			w.Write([]byte(`{"data":`))
			w.Write(data)
			w.Write([]byte{'}'})
			return
		}
		// One buffer and a Content-Length: net/http then sends the reply
		// in one write, not in chunks of its 4 KiB buffer.
		out := make([]byte, 0, len(data)+len(`{"data":}`))
		w.Write(append(append(append(out, `{"data":`...), data...), '}'))
		return
	}
	out := []byte{'{'}
	if len(resp.Errors) > 0 {
		out = appendMember(out, "errors", resp.Errors)
	}
	out = appendHTMLEscaped(append(out, `"data":`...), data)
	if resp.Label != "" {
		out = appendMember(append(out, ','), "label", resp.Label)
	}
	if resp.Path != nil {
		out = appendMember(append(out, ','), "path", resp.Path)
	}
	if resp.HasNext != nil {
		out = appendMember(append(out, ','), "hasNext", resp.HasNext)
	}
	if len(resp.Extensions) > 0 {
		out = appendMember(append(out, ','), "extensions", resp.Extensions)
	}
	w.Write(append(out, '}'))
}

// appendMember appends "name":value, the value as encoding/json writes it
// (errors, paths and extensions are the gateway's own, and always encode).
func appendMember(out []byte, name string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	out = append(append(append(out, '"'), name...), `":`...)
	out = append(out, b...)
	if name == "errors" {
		out = append(out, ',')
	}
	return out
}

// appendHTMLEscaped appends compact JSON with <, >, &, U+2028 and U+2029
// escaped as encoding/json escapes them. Those appear only inside strings
// in JSON, where the escapes mean the same.
func appendHTMLEscaped(out, data []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '<' || c == '>' || c == '&' {
			out = append(append(out, data[start:i]...), '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			start = i + 1
		} else if c == 0xE2 && i+2 < len(data) && data[i+1] == 0x80 && data[i+2]&^1 == 0xA8 {
			out = append(append(out, data[start:i]...), '\\', 'u', '2', '0', '2', hex[data[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(out, data[start:]...)
}

// htmlEscaped reports whether encoding/json would rewrite part of a compact
// JSON text: <, > and &, and 0xE2, the first byte of U+2028 and U+2029.
// Each IndexByte is a vectorized scan.
func htmlEscaped(b []byte) bool {
	return bytes.IndexByte(b, '<') >= 0 || bytes.IndexByte(b, '>') >= 0 ||
		bytes.IndexByte(b, '&') >= 0 || bytes.IndexByte(b, 0xE2) >= 0
}
