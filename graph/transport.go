package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/store"
)

// post is gqlgen's POST transport with one change: the data gqlgen's
// marshalers wrote, already compact JSON, goes into the reply as it is.
// gqlgen's own transport json.Marshals the whole response, and
// encoding/json validates and compacts a json.RawMessage byte by byte: 38%
// of the CPU of a 100-item read, measured. Everything else (what it
// accepts, status codes, content negotiation, error bodies) is gqlgen's,
// and transport_test.go compares the two byte for byte.
type post struct{ transport.POST }

var _ graphql.Transport = post{}

var rawParams = sync.Pool{New: func() any { return new(graphql.RawParams) }}

func (post) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	contentType := responseContentType(r)
	w.Header()["Content-Type"] = contentTypes[contentType]
	params := rawParams.Get().(*graphql.RawParams)
	defer func() {
		*params = graphql.RawParams{}
		rawParams.Put(params)
	}()
	start := graphql.Now()
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.WrapPath(nil, fmt.Errorf("%w %s", store.ErrInvalid, bodyTooLarge(tooLarge.Limit)))}))
		return
	}
	if err != nil {
		writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("could not read request body: %+v", err)}))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(params); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.Errorf("json request body could not be decoded: %+v body:%s", err, string(body))}))
		return
	}
	if !jsontext.Value(body).IsValid() {
		// encoding/json turns invalid UTF-8 and lone surrogates ("\ud800")
		// into U+FFFD, so distinct values would become one; refuse them.
		w.WriteHeader(http.StatusBadRequest)
		writeResponse(w, exec.DispatchError(ctx, gqlerror.List{gqlerror.WrapPath(nil, fmt.Errorf("%w %s", store.ErrInvalid, strictJSONError(body)))}))
		return
	}
	params.Headers = r.Header
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	rc, opErr := exec.CreateOperationContext(ctx, params)
	if opErr != nil {
		status := http.StatusOK
		if errcode.GetErrorKind(opErr) == errcode.KindProtocol {
			status = http.StatusUnprocessableEntity
			if contentType == graphQLResponseJSON {
				status = http.StatusBadRequest
			}
		}
		w.WriteHeader(status)
		writeResponse(w, exec.DispatchError(graphql.WithOperationContext(ctx, rc), opErr))
		return
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	writeResponse(w, responses(ctx))
}

// strictJSONError says why a body that encoding/json decoded is not strict
// JSON (RFC 8259 text in valid UTF-8, RFC 7493: no duplicate names).
func strictJSONError(body []byte) string {
	_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
	msg := "request body: not strict JSON"
	if err != nil {
		msg += ": " + strings.TrimPrefix(err.Error(), "jsontext: ")
	}
	return msg + " (strings must be valid UTF-8 without lone surrogates, and names unique)"
}

// get is gqlgen's GET transport, refusing what it would change silently:
// invalid UTF-8 in the query parameters, lone surrogates in variables.
type get struct{ transport.GET }

var _ graphql.Transport = get{}

func (g get) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	q := r.URL.Query()
	for _, name := range []string{"query", "operationName", "variables", "extensions"} {
		v := q.Get(name)
		bad := !utf8.ValidString(v)
		if !bad && v != "" && (name == "variables" || name == "extensions") {
			bad = !jsontext.Value(v).IsValid()
		}
		if bad {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			writeResponse(w, exec.DispatchError(r.Context(), gqlerror.List{gqlerror.WrapPath(nil,
				fmt.Errorf("%w %s parameter: not valid UTF-8, or not strict JSON (lone surrogates, duplicate names)", store.ErrInvalid, name))}))
			return
		}
	}
	g.GET.Do(w, r, exec)
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

// writeResponse writes what json.Marshal(resp) would. When the response is
// data alone (the common case) and holds nothing encoding/json would
// escape (<, >, &, U+2028, U+2029), the data is copied as it is.
func writeResponse(w io.Writer, resp *graphql.Response) {
	if resp == nil {
		// gqlgen gives no response when the client went away mid-request.
		io.WriteString(w, "null")
		return
	}
	if len(resp.Errors) > 0 || resp.Label != "" || resp.Path != nil || resp.HasNext != nil || len(resp.Extensions) > 0 || len(resp.Data) == 0 || htmlEscaped(resp.Data) {
		b, err := json.Marshal(resp)
		if err != nil {
			b, _ = json.Marshal(&graphql.Response{Errors: gqlerror.List{{Message: "internal error: the response could not be encoded"}}})
		}
		w.Write(b)
		return
	}
	// One buffer and a Content-Length: net/http then sends the reply in
	// one write, not in chunks of its 4 KiB buffer.
	out := make([]byte, 0, len(resp.Data)+len(`{"data":}`))
	out = append(append(append(out, `{"data":`...), resp.Data...), '}')
	if rw, ok := w.(http.ResponseWriter); ok {
		rw.Header()["Content-Length"] = []string{strconv.Itoa(len(out))}
	}
	w.Write(out)
}

// htmlEscaped reports whether encoding/json would rewrite part of a compact
// JSON text: <, > and &, and 0xE2, the first byte of U+2028 and U+2029.
// Each IndexByte is a vectorized scan.
func htmlEscaped(b []byte) bool {
	return bytes.IndexByte(b, '<') >= 0 || bytes.IndexByte(b, '>') >= 0 ||
		bytes.IndexByte(b, '&') >= 0 || bytes.IndexByte(b, 0xE2) >= 0
}
