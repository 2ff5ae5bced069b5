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
)

// raw POSTs a body as it is and returns the status and the errors.
func (g *gateway) raw(body string) (int, []gqlError) {
	g.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", strings.NewReader(strings.ReplaceAll(body, "$type", g.entityType)))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, req)
	var resp struct{ Errors []gqlError }
	if err := json.NewDecoder(bytes.NewReader(w.Body.Bytes())).Decode(&resp); err != nil {
		g.t.Fatalf("HTTP %d, decoding %q: %v", w.Code, w.Body.String(), err)
	}
	return w.Code, resp.Errors
}

// Input the JSON decoder or the GraphQL parser would change without a word
// is refused, and nothing is written: invalid UTF-8, lone surrogates,
// surrogate escapes in the query text, a tenth fractional digit of a time,
// integers out of an argument's range.
func TestInputThatWouldChangeIsRefused(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	g.createFeature("f", "STRING", 3600)
	add := `{"query": "mutation($v: ListValue!) { addListItems(list: {entityType: \"$type\", entityId: \"u1\", feature: \"f\"}, items: [{value: $v}]) { added } }", "variables": {"v": %s}}`
	for _, c := range []struct{ name, value string }{
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udfff"`},
		{"invalid UTF-8", "\"a\xffb\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, errs := g.raw(strings.Replace(add, "%s", c.value, 1))
			if status != http.StatusBadRequest || len(errs) != 1 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, "UTF-8") {
				t.Fatalf("HTTP %d %+v; want 400 and one BAD_USER_INPUT about UTF-8", status, errs)
			}
		})
	}
	// A pair is one character, kept.
	if status, errs := g.raw(strings.Replace(add, "%s", `"\ud83d\ude00"`, 1)); status != http.StatusOK || len(errs) != 0 {
		t.Fatalf("surrogate pair: HTTP %d %+v", status, errs)
	}
	equal(t, "values", values(g.listItems("u1", "f", nil)), []any{"😀"})

	for _, c := range []struct{ name, query, says string }{
		{"surrogate escape in the query", `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "\ud83d\ude00"}]) { added } }`, "surrogates"},
		{"tenth fractional digit", `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "x", timestamp: "2001-09-09T01:46:40.1234567891Z"}]) { added } }`, "9 fractional digits"},
		{"ttlSeconds past 32 bits", `mutation { createListFeature(input: {entityType: "$type", name: "g", valueType: STRING, ttlSeconds: 36028797019050368}) { key } }`, "ttlSeconds"},
		{"version ttlSeconds past 32 bits", `mutation { createListFeatureVersion(entityType: "$type", name: "f", version: "v2", ttlSeconds: 36028797018963973) { key } }`, "ttlSeconds"},
		{"limit past 32 bits", `{ listItems(entityType: "$type", entityId: "u1", feature: "f", limit: 4294967297) { hasMore } }`, "limit 4294967297"},
		{"a cap of 0", `mutation { createListFeature(input: {entityType: "$type", name: "c", valueType: STRING, ttlSeconds: 60, maxItems: 0}) { key } }`, "maxItems 0: must be from 1"},
		{"an enum literal in a value", `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: FOO}]) { added } }`, "an enum literal is not a JSON value"},
		{"an enum literal inside a JSON value", `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: {a: [BAR]}}]) { added } }`, "BAR: an enum literal"},
		{"integer literal past 64 bits", `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: 18446744073709551617}]) { added } }`, "64 bits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, errs := g.do(c.query, nil)
			if len(errs) == 0 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, c.says) || len(data) > 0 && !strings.Contains(fmt.Sprint(data), "<nil>") {
				t.Fatalf("data %v, errors %+v; want BAD_USER_INPUT saying %q first", data, errs, c.says)
			}
		})
	}
	if data, _ := g.do(`{ listFeature(entityType: "$type", name: "f", version: "v2") { key } }`, nil); data["listFeature"] != nil {
		t.Fatalf("version v2 was created: %v", data)
	}
	equal(t, "values", values(g.listItems("u1", "f", nil)), []any{"😀"})

	// A number means the same written in the query or sent in variables.
	g.createFeature("n", "INT", 3600)
	g.createFeature("x", "FLOAT", 3600)
	for _, c := range []struct{ feature, literal, variable, says string }{
		{"n", "1e2", "1e2", "exponent"},
		{"n", "9007199254740993", "9007199254740993", "as strings"},
		{"x", "0.1000000000000000000001", "0.1000000000000000000001", "64-bit float"},
		{"x", "9007199254740993", "9007199254740993", "64-bit float"},
	} {
		lit := `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "` + c.feature + `"}, items: [{value: ` + c.literal + `}]) { added } }`
		if _, errs := g.do(lit, nil); len(errs) == 0 || !strings.Contains(errs[0].Message, c.says) {
			t.Errorf("literal %s for %s: errors %+v; want one saying %q", c.literal, c.feature, errs, c.says)
		}
		status, errs := g.raw(`{"query": "mutation($v: ListValue!) { addListItems(list: {entityType: \"$type\", entityId: \"u1\", feature: \"` + c.feature + `\"}, items: [{value: $v}]) { added } }", "variables": {"v": ` + c.variable + `}}`)
		if status != http.StatusOK || len(errs) != 1 || !strings.Contains(errs[0].Message, c.says) {
			t.Errorf("variable %s for %s: HTTP %d, errors %+v; want one saying %q", c.variable, c.feature, status, errs, c.says)
		}
	}
	// Int arguments are coerced as the spec says: no strings, no
	// fractions; an error quotes what was sent.
	read := `{"query": "query($n: Int) { listItems(entityType: \"$type\", entityId: \"u1\", feature: \"f\", limit: $n) { hasMore } }", "variables": {"n": %s}}`
	for _, c := range []struct{ value, says string }{{`"2"`, `Int "2": a string`}, {`1.0`, "Int 1.0: not an integer"}, {`4294967297`, "limit 4294967297"}} {
		if status, errs := g.raw(strings.Replace(read, "%s", c.value, 1)); len(errs) != 1 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, c.says) {
			t.Errorf("limit %s: HTTP %d %+v; want BAD_USER_INPUT saying %q", c.value, status, errs, c.says)
		}
	}
	// BYTES are standard base64 in one spelling: no line breaks.
	g.createFeature("b", "BYTES", 3600)
	if status, errs := g.raw(`{"query": "mutation { addListItems(list: {entityType: \"$type\", entityId: \"u1\", feature: \"b\"}, items: [{value: \"AA==\\n\"}]) { added } }"}`); len(errs) != 1 || !strings.Contains(errs[0].Message, "without line breaks") {
		t.Errorf("BYTES with a line break: HTTP %d %+v", status, errs)
	}
	equal(t, "INT list", len(g.listItems("u1", "n", nil).Items), 0)
	equal(t, "FLOAT list", len(g.listItems("u1", "x", nil).Items), 0)

	// GET: the same rules for query parameters.
	for _, q := range []string{"query=%7Bx%FF%7D", "query=" + url.QueryEscape(`query($v: String) { listFeatures(entityType: $v) { key } }`) + "&variables=" + url.QueryEscape(`{"v":"\udfff"}`)} {
		req := httptest.NewRequest(http.MethodGet, "http://localhost/graphql?"+q, nil)
		w := httptest.NewRecorder()
		g.h.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "BAD_USER_INPUT") {
			t.Errorf("GET ?%s: HTTP %d %s; want 400 BAD_USER_INPUT", q, w.Code, w.Body)
		}
	}
}
