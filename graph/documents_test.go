package graph_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/endpoint"
)

// In enforce mode a trusted document runs by its documentId over POST, GET
// and a WebSocket, by its APQ hash, or by its text; any other operation is
// refused QUERY_NOT_IN_SAFELIST, and an unknown id PERSISTED_QUERY_NOT_IN_LIST,
// on every path; a caller with the scope documents:any runs anything. In
// audit mode the other operation runs.
func TestTrustedDocumentsOnEveryPath(t *testing.T) {
	const read = "query Read { listFeatures { key } }"
	const other = "query Other { listFeatures { valueType } }"
	hash := documentHash(read)
	manifest := writeManifest(t, read)
	authn, err := auth.New(auth.Config{APIKeys: []string{keyLine("app", "app", "lists:read"), keyLine("engineer", "eng", "lists:read,documents:any")}})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []documents.Mode{documents.Enforce, documents.Audit} {
		t.Run(string(mode), func(t *testing.T) {
			docs, err := documents.New(manifest, mode, slog.New(slog.DiscardHandler), metricnoop.NewMeterProvider().Meter(""))
			if err != nil {
				t.Fatal(err)
			}
			g, srv := subscriptionGateway(t, embeddedStore(t), func(c *endpoint.Config) {
				c.Auth = authn
				c.Documents = docs
			})
			send := func(token string, body map[string]any) string {
				return g.post(token, body).Body.String()
			}
			get := func(token, rawQuery string) string {
				t.Helper()
				req := httptest.NewRequest(http.MethodGet, "http://localhost/graphql?"+rawQuery, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				w := httptest.NewRecorder()
				g.h.ServeHTTP(w, req)
				return w.Body.String()
			}
			ok := func(what, answer string) {
				t.Helper()
				if !strings.Contains(answer, `"listFeatures"`) || strings.Contains(answer, `"errors"`) {
					t.Errorf("%s: %s", what, answer)
				}
			}
			refused := func(what, answer, code string) {
				t.Helper()
				if !strings.Contains(answer, `"`+code+`"`) {
					t.Errorf("%s: %s, want %s", what, answer, code)
				}
			}
			ok("POST by documentId", send("app", map[string]any{"documentId": "sha256:" + hash}))
			ok("POST by the manifest's id", send("app", map[string]any{"documentId": hash}))
			ok("POST by APQ hash", send("app", map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}}))
			ok("POST of the text, spaced otherwise", send("app", map[string]any{"query": "query Read {\n  listFeatures {\n    key\n  }\n}"}))
			ok("GET by documentId", get("app", "documentId="+url.QueryEscape("sha256:"+hash)))
			refused("POST of an unknown documentId", send("app", map[string]any{"documentId": "sha256:0000"}), "PERSISTED_QUERY_NOT_IN_LIST")
			refused("GET of an unknown documentId", get("app", "documentId=nope"), "PERSISTED_QUERY_NOT_IN_LIST")
			ok("POST of another text by documents:any", send("eng", map[string]any{"query": other}))
			c, _, err := dial(t, srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			c.init("app")
			c.send(wsMessage{ID: "1", Type: "subscribe", Payload: json.RawMessage(`{"documentId":"sha256:` + hash + `"}`)})
			if m, err := c.next(); err != nil || m.Type != "next" || !strings.Contains(string(m.Payload), `"listFeatures"`) {
				t.Fatalf("a subscribe by documentId: %+v %v", m, err)
			}
			c.next() // complete
			if mode == documents.Enforce {
				refused("POST of another text", send("app", map[string]any{"query": other}), "QUERY_NOT_IN_SAFELIST")
				refused("GET of another text", get("app", "query="+url.QueryEscape(other)), "QUERY_NOT_IN_SAFELIST")
				if _, errs := c.query("2", other); !strings.Contains(errs, "QUERY_NOT_IN_SAFELIST") {
					t.Errorf("a subscribe of another text: %s", errs)
				}
				refused("POST of an unknown APQ hash", send("app", map[string]any{"query": other, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("0", 64)}}}), "PERSISTED_QUERY_NOT_IN_LIST")
			} else {
				ok("POST of another text, audited", send("app", map[string]any{"query": other}))
				if next, errs := c.query("2", other); errs != "" || !strings.Contains(string(next), "listFeatures") {
					t.Errorf("a subscribe of another text, audited: %s %s", next, errs)
				}
			}
		})
	}
}

// documentHash is a document's id in a manifest: its SHA-256, in hex.
func documentHash(doc string) string {
	sum := sha256.Sum256([]byte(doc))
	return hex.EncodeToString(sum[:])
}

// writeManifest writes an Apollo persisted query manifest of docs, each
// by its documentHash, in a folder of the test's own, and returns its path.
func writeManifest(tb testing.TB, docs ...string) string {
	tb.Helper()
	var ops []map[string]string
	for _, d := range docs {
		ops = append(ops, map[string]string{"id": documentHash(d), "body": d, "type": "query"})
	}
	manifest := filepath.Join(tb.TempDir(), "manifest.json")
	b, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1, "operations": ops})
	if err := os.WriteFile(manifest, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return manifest
}
