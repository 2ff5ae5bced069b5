package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/errkind"
)

// envelope is what an answer may carry beyond --max-response-bytes: the
// one error that says it was passed, the data of fields that failed, and
// a WebSocket message's own fields.
const envelope = 4 << 10

// unescapedJSON is v as JSON with <, > and & as they are: what a client
// that does not escape them sends, six times shorter than escaped.
func unescapedJSON(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// boundGateway is a gateway answering at most maxResponse bytes of list
// items and errors, with a server for WebSockets.
func boundGateway(t *testing.T, maxResponse int) (*gateway, string) {
	g, srv := subscriptionGateway(t, embeddedStore(t), func(c *endpoint.Config) {
		c.Limits = unthrottled()
		c.Limits.MaxResponseBytes = maxResponse
	})
	return g, srv.URL
}

// answer sends one request by transport ("post", "get" or "websocket")
// and returns its answer: the body of a POST or GET, the first message of
// a WebSocket operation (a next, or an error). params are the request's
// (query, variables, …); $type in the query is the test's entity type. A
// WebSocket's client reads at most limit bytes of the answer.
func (g *gateway) answer(base, transport string, params map[string]any, limit int) []byte {
	g.t.Helper()
	if q, ok := params["query"].(string); ok {
		params["query"] = strings.ReplaceAll(q, "$type", g.entityType)
	}
	switch transport {
	case "post":
		req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", bytes.NewReader(unescapedJSON(params)))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		g.h.ServeHTTP(w, req)
		return w.Body.Bytes()
	case "get":
		q := url.Values{}
		for k, v := range params {
			if s, ok := v.(string); ok {
				q.Set(k, s)
			} else {
				q.Set(k, string(unescapedJSON(v)))
			}
		}
		w := httptest.NewRecorder()
		g.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://localhost/graphql?"+q.Encode(), nil))
		return w.Body.Bytes()
	}
	c, _, err := dial(g.t, base, "")
	if err != nil {
		g.t.Fatal(err)
	}
	if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
		g.t.Fatalf("init: %+v %v", m, err)
	}
	c.conn.SetReadLimit(int64(limit))
	msg := append([]byte(`{"type":"subscribe","id":"1","payload":`), unescapedJSON(params)...)
	if err := c.conn.Write(c.ctx, websocket.MessageText, append(msg, '}')); err != nil {
		g.t.Fatal(err)
	}
	for {
		_, b, err := c.conn.Read(c.ctx)
		if err != nil {
			g.t.Fatalf("reading the answer (at most %d bytes): %v", limit, err)
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			g.t.Fatalf("message %.200s: %v", b, err)
		}
		if m.Type == "next" || m.Type == "error" {
			return b
		}
	}
}

// answerErrors are the errors of an answer: a response's, or a WebSocket
// message's (a next's payload, or an error's).
func answerErrors(t *testing.T, b []byte) []gqlError {
	t.Helper()
	var resp struct {
		Type    string
		Payload json.RawMessage
		Errors  []gqlError
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("answer %.200s: %v", b, err)
	}
	switch resp.Type {
	case "next":
		return answerErrors(t, resp.Payload)
	case "error":
		var errs []gqlError
		if err := json.Unmarshal(resp.Payload, &errs); err != nil {
			t.Fatalf("error message %.200s: %v", b, err)
		}
		return errs
	}
	return resp.Errors
}

// aliases is a query of n aliases of field, with the variables vars
// declares.
func aliases(n int, vars, field string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "query(%s) {", vars)
	for i := range n {
		fmt.Fprintf(&b, " a%d: %s", i, field)
	}
	return b.String() + " }"
}

// The finding: one Time variable of 300,000 '<' used by 300 aliases. Each
// field failed with an error quoting the whole value, escaped to 1.8 MB,
// and errors were not counted against --max-response-bytes: a request of
// 329 KB was answered with 540 MB. Now each error quotes the value's first
// bytes, every error is counted with the list items, and past the bound
// one error says so in place of the rest: over POST, GET and a WebSocket,
// and for a subscription's argument.
func TestErrorsOfAVariableManyFieldsUseAreBounded(t *testing.T) {
	value := strings.Repeat("<", 300_000)
	query := aliases(300, "$t: Time", `listItems(entityType: "$type", entityId: "u1", feature: "f", minTimestamp: $t) { hasMore }`)
	for _, tc := range []struct {
		name        string
		maxResponse int
		all         bool // every field's error fits
	}{
		{"every error fits", 1 << 20, true},
		{"past the bound", 16 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, base := boundGateway(t, tc.maxResponse)
			g.createFeature("f", "STRING", 3600)
			for _, transport := range []string{"post", "get", "websocket"} {
				b := g.answer(base, transport, map[string]any{"query": query, "variables": map[string]any{"t": value}}, tc.maxResponse+envelope)
				if len(b) > tc.maxResponse+envelope {
					t.Fatalf("%s: an answer of %d bytes, more than --max-response-bytes %d and %d more", transport, len(b), tc.maxResponse, envelope)
				}
				errs := answerErrors(t, b)
				full := 0
				for _, e := range errs {
					if strings.Contains(e.Message, "--max-response-bytes") {
						full++
						continue
					}
					if strings.Count(e.Message, "<") > errkind.MaxQuoted || e.Extensions.Code != "BAD_USER_INPUT" {
						t.Fatalf("%s: error %q (%s) quotes more than %d bytes of the value", transport, e.Message, e.Extensions.Code, errkind.MaxQuoted)
					}
				}
				switch {
				case tc.all && (len(errs) != 300 || full != 0):
					t.Fatalf("%s: %d errors, %d of them past the bound; want the 300 fields' own", transport, len(errs), full)
				case !tc.all && (full != 1 || len(errs) >= 300):
					t.Fatalf("%s: %d errors, %d of them naming --max-response-bytes; want fewer than 300, one naming it", transport, len(errs), full)
				}
				t.Logf("%s: %d errors, %d bytes", transport, len(errs), len(b))
			}
			// A subscription's argument, over its WebSocket.
			b := g.answer(base, "websocket", map[string]any{"variables": map[string]any{"t": value},
				"query": `subscription($t: Time) { listItemsAdded(entityType: "$type", entityId: "u1", feature: "f", since: $t) { value } }`}, tc.maxResponse+envelope)
			if errs := answerErrors(t, b); len(errs) != 1 || strings.Count(errs[0].Message, "<") > errkind.MaxQuoted {
				t.Fatalf("subscription: errors %.300s; want one quoting at most %d bytes of the value", b, errkind.MaxQuoted)
			}
		})
	}
}

// longestRun is the most bytes c that s holds one after another.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
}

// Every error quotes at most errkind.MaxQuoted bytes of what was sent, in
// its message and its path, whatever type it was sent as: each scalar,
// the enum and each input object of the schema, as a variable or a
// literal, and the request's own parameters. Each value is 100,000 bytes
// of one character.
func TestErrorsQuoteTheStartOfWhatWasSent(t *testing.T) {
	g, base := boundGateway(t, 1<<20)
	g.createFeature("f", "STRING", 3600)
	g.createFeature("n", "INT", 3600)
	long := func(c string) string { return strings.Repeat(c, 100_000) }
	lt, zeros := long("<"), long("0")
	ref := map[string]any{"entityType": g.entityType, "entityId": "u1", "feature": "n"}
	for _, tc := range []struct {
		name, transport string
		params          map[string]any
		fill            byte // the character the value repeats
	}{
		{"Time", "post", map[string]any{"query": `query($v: Time) { listItems(entityType: "$type", entityId: "u1", feature: "f", minTimestamp: $v) { hasMore } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"Time literal", "post", map[string]any{"query": `{ listCount(entityType: "$type", entityId: "u1", feature: "f", maxTimestamp: "` + lt + `") }`}, '<'},
		{"ListValue", "post", map[string]any{"query": `mutation($v: ListValue!) { addListItems(list: {entityType: "$type", entityId: "u1", feature: "n"}, items: [{value: $v}]) { added } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"ListValue number", "post", map[string]any{"query": `query($v: [ListValue!]!) { entity(type: "$type", entityId: "u1") { listContains(feature: "n", values: $v) { value } } }`, "variables": map[string]any{"v": []any{json.Number("1." + zeros + "1")}}}, '0'},
		{"Int", "post", map[string]any{"query": `query($v: Int) { listItems(entityType: "$type", entityId: "u1", feature: "f", limit: $v) { hasMore } }`, "variables": map[string]any{"v": zeros + "1"}}, '0'},
		{"Int number", "post", map[string]any{"query": `query($v: Int) { listItems(entityType: "$type", entityId: "u1", feature: "f", limit: $v) { hasMore } }`, "variables": map[string]any{"v": json.Number("1." + zeros)}}, '0'},
		{"Int literal", "post", map[string]any{"query": `{ listItems(entityType: "$type", entityId: "u1", feature: "f", limit: "` + lt + `") { hasMore } }`}, '<'},
		{"ID", "post", map[string]any{"query": `query($v: ID!) { listItems(entityType: "$type", entityId: $v, feature: "f") { hasMore } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"[ID!]", "get", map[string]any{"query": `query($v: [ID!]!) { entities(type: "$type", entityIds: $v) { id } }`, "variables": map[string]any{"v": []any{"u1", lt}}}, '<'},
		{"String: a name", "post", map[string]any{"query": `query($v: String!) { listItems(entityType: "$type", entityId: "u1", feature: $v) { hasMore } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"String: a version", "get", map[string]any{"query": `query($v: String) { listFeature(entityType: "$type", name: "f", version: $v) { key } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"String: a cursor", "websocket", map[string]any{"query": `query($v: String) { listItems(entityType: "$type", entityId: "u1", feature: "f", after: $v) { hasMore } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"String: a position", "websocket", map[string]any{"query": `subscription($v: String) { listItemsAdded(entityType: "$type", entityId: "u1", feature: "f", after: $v) { value } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"Boolean", "post", map[string]any{"query": `query($v: Boolean) { listItems(entityType: "$type", entityId: "u1", feature: "f", distinct: $v) { hasMore } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"ValueType", "post", map[string]any{"query": `mutation($v: ValueType!) { createListFeature(input: {entityType: "$type", name: "g", valueType: $v, ttlSeconds: 60}) { key } }`, "variables": map[string]any{"v": lt}}, '<'},
		{"ValueType literal", "post", map[string]any{"query": `mutation { createListFeature(input: {entityType: "$type", name: "g", valueType: ` + long("A") + `, ttlSeconds: 60}) { key } }`}, 'A'},
		{"CreateListFeatureInput", "post", map[string]any{"query": `mutation($v: CreateListFeatureInput!) { createListFeature(input: $v) { key } }`, "variables": map[string]any{"v": map[string]any{"entityType": lt, "name": "g", "valueType": "INT", "ttlSeconds": 60}}}, '<'},
		{"CreateListFeatureInput: a field it has not", "post", map[string]any{"query": `mutation($v: CreateListFeatureInput!) { createListFeature(input: $v) { key } }`, "variables": map[string]any{"v": map[string]any{"entityType": "e", "name": "g", "valueType": "INT", "ttlSeconds": 60, lt: 1}}}, '<'},
		{"CreateListFeatureInput: its ValueType", "post", map[string]any{"query": `mutation($v: CreateListFeatureInput!) { createListFeature(input: $v) { key } }`, "variables": map[string]any{"v": map[string]any{"entityType": "e", "name": "g", "valueType": lt, "ttlSeconds": 60}}}, '<'},
		{"ListRefInput", "post", map[string]any{"query": `mutation($v: ListRefInput!) { removeAllListItems(list: $v) }`, "variables": map[string]any{"v": map[string]any{"entityType": g.entityType, "entityId": "u1", "feature": "f", "version": lt}}}, '<'},
		{"ListItemInput", "post", map[string]any{"query": `mutation($v: ListItemInput!) { addListItems(list: {entityType: "$type", entityId: "u1", feature: "n"}, items: [$v]) { added } }`, "variables": map[string]any{"v": map[string]any{"value": 1, "timestamp": lt}}}, '<'},
		{"ListAddInput", "websocket", map[string]any{"query": `mutation($v: ListAddInput!) { addListItemsBatch(adds: [$v]) { added } }`, "variables": map[string]any{"v": map[string]any{"list": ref, "items": []any{map[string]any{"value": lt}}}}}, '<'},
		{"operationName", "post", map[string]any{"query": `{ __typename }`, "operationName": lt}, '<'},
		{"documentId", "get", map[string]any{"query": `{ __typename }`, "documentId": lt}, '<'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := g.answer(base, tc.transport, tc.params, 1<<20)
			errs := answerErrors(t, b)
			if len(errs) == 0 {
				t.Fatalf("no error: %.300s", b)
			}
			for _, e := range errs {
				quoted := longestRun(e.Message, tc.fill)
				for _, p := range e.Path {
					quoted = max(quoted, longestRun(fmt.Sprint(p), tc.fill))
				}
				if quoted > errkind.MaxQuoted || e.Extensions.Code != "BAD_USER_INPUT" {
					t.Fatalf("error %q at %.100v (%s) quotes %d bytes of the value; want at most %d", e.Message, e.Path, e.Extensions.Code, quoted, errkind.MaxQuoted)
				}
			}
			t.Logf("%.300s", errs[0].Message)
		})
	}
}

// fields is n aliases of field, for a selection.
func fields(n int, field string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " f%d: %s", i, field)
	}
	return b.String()
}

// Each alias of an item's field writes it again, and is counted again: 10
// items of 30 KB with 100 aliases of their value were counted as 300 KB
// and answered as 30 MB. Now the page is refused before it is written,
// the field's error naming --max-response-bytes.
func TestAliasesOfAnItemsFieldsAreCounted(t *testing.T) {
	const maxResponse = 1 << 20
	g, base := boundGateway(t, maxResponse)
	g.createFeature("f", "STRING", 3600)
	now := time.Now()
	var items []item
	for i := range 10 {
		items = append(items, item{strings.Repeat("x", 30_000), ts(now.Add(-time.Duration(i) * time.Second))})
	}
	g.add("u1", "f", items...)
	for _, tc := range []struct{ name, query string }{
		{"values", `{ listItems(entityType: "$type", entityId: "u1", feature: "f") { items {` + fields(100, "value") + ` } } }`},
		{"selections of the items", `{ listItems(entityType: "$type", entityId: "u1", feature: "f") {` + fields(100, "items { value }") + ` } }`},
		{"listContains", `{ entity(type: "$type", entityId: "u1") { listContains(feature: "f", values: ["` + strings.Repeat("x", 30_000) + `"]) {` + fields(900, "value") + ` } } }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := g.answer(base, "post", map[string]any{"query": tc.query}, maxResponse+envelope)
			if len(b) > maxResponse+envelope {
				t.Fatalf("an answer of %d bytes, more than --max-response-bytes %d and %d more", len(b), maxResponse, envelope)
			}
			if errs := answerErrors(t, b); len(errs) != 1 || !strings.Contains(errs[0].Message, "--max-response-bytes") || len(errs[0].Path) == 0 {
				t.Fatalf("errors %+v; want the field's, naming --max-response-bytes", errs)
			}
		})
	}
}

// What a response's list items and errors are not (ids, names, features)
// counts too, once written: a response larger than --max-response-bytes is
// answered with the one error that names it, over POST, GET, WebSocket, and
// for a subscription's result.
func TestEveryByteOfAResponseCounts(t *testing.T) {
	const maxResponse = 64 << 10
	g, base := boundGateway(t, maxResponse)
	g.createFeature("f", "STRING", 3600)
	var ids []any
	for i := range 100 {
		ids = append(ids, fmt.Sprintf("%0256d", i))
	}
	// 100 ids of 256 bytes, each written 20 times: 540 KB.
	query := `query($ids: [ID!]!) { entities(type: "$type", entityIds: $ids) {` + fields(20, "entityId") + ` } }`
	for _, transport := range []string{"post", "get", "websocket"} {
		b := g.answer(base, transport, map[string]any{"query": query, "variables": map[string]any{"ids": ids}}, maxResponse+envelope)
		if len(b) > maxResponse+envelope {
			t.Fatalf("%s: an answer of %d bytes, more than --max-response-bytes %d and %d more", transport, len(b), maxResponse, envelope)
		}
		if errs := answerErrors(t, b); len(errs) != 1 || !strings.Contains(errs[0].Message, "--max-response-bytes") {
			t.Fatalf("%s: errors %+v; want one naming --max-response-bytes", transport, errs)
		}
	}

	// A subscription's result: an item of 30 KB, its value written 40 times.
	c, _, err := dial(t, base, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	c.conn.SetReadLimit(maxResponse + envelope)
	c.subscribe("1", `subscription { listItemsAdded(entityType: "`+g.entityType+`", entityId: "u1", feature: "f", since: "2000-01-01T00:00:00Z") {`+fields(40, "value")+` } }`)
	g.add("u1", "f", item{Value: strings.Repeat("x", 30_000)})
	m, err := c.next()
	if err != nil {
		t.Fatalf("reading the result (at most %d bytes): %v", maxResponse+envelope, err)
	}
	if errs := answerErrors(t, m.Payload); m.Type != "next" || len(errs) != 1 || !strings.Contains(errs[0].Message, "--max-response-bytes") {
		t.Fatalf("subscription: %s %.300s; want a result of one error naming --max-response-bytes", m.Type, m.Payload)
	}
}
