package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/telemetry"
)

// In audit mode, an untrusted operation's log line names the operation
// and its document's SHA-256, once a minute per document, and no part of
// its text or variables, over POST, GET and a WebSocket alike; no log
// line at any level, and no span, carries them either, nor the value an
// error message quotes back to its client.
func TestAuditModeLogsNoQueryTextOrValue(t *testing.T) {
	const trusted = "query Read { listFeatures { key } }"
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	b, _ := json.Marshal(map[string]string{"read": trusted})
	if err := os.WriteFile(manifest, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	rec := tracetest.NewSpanRecorder()
	base := startLogging(t, telemetry.Options{SpanProcessor: rec}, telemetry.NewLogger(&logs, "json", slog.LevelDebug),
		"--data-dir", t.TempDir(), "--trusted-documents", manifest, "--trusted-documents-mode", "audit")
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "n", valueType: INT, ttlSeconds: 3600}) { key } }`)
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "s", valueType: STRING, ttlSeconds: 3600}) { key } }`)

	secrets := []string{"literal-c0ffee", "variable-f00d", "value-beef"}
	read := `query Leak($v: ListValue!) { entity(type: "user", entityId: "u1") { listContains(feature: "s", values: ["literal-c0ffee", $v]) { value } } }`
	readRequest := map[string]any{"query": read, "variables": map[string]any{"v": "variable-f00d"}}
	add := `mutation Add($v: ListValue!) { addListItems(list: {entityType: "user", entityId: "u1", feature: "n"}, items: [{value: $v}]) { added } }`
	if a, _ := gatewaytest.PostRequest(t, base, "", readRequest); a.Problem() != "" {
		t.Fatalf("the untrusted read over POST: %s", a)
	}
	if body := getRequest(t, base, readRequest); !strings.Contains(body, `"listContains"`) {
		t.Fatalf("the untrusted read over GET: %s", body)
	}
	if body := dialDocuments(t, base).send(readRequest); !strings.Contains(body, `"listContains"`) {
		t.Fatalf("the untrusted read over a WebSocket: %s", body)
	}
	if a, _ := gatewaytest.PostRequest(t, base, "", map[string]any{"query": add, "variables": map[string]any{"v": "value-beef"}}); !strings.Contains(string(a.Body), "value-beef") {
		t.Fatalf("the add of a string to an INT feature: %s; want its error to quote the value", a)
	}

	logs.mu.Lock()
	logged := logs.buf.String()
	logs.mu.Unlock()
	for _, s := range secrets {
		if strings.Contains(logged, s) {
			t.Errorf("the log carries %q:\n%s", s, logged)
		}
	}
	audited := map[string]string{}
	for line := range strings.SplitSeq(logged, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.Contains(m["msg"].(string), "--trusted-documents-mode audit") {
			audited[m["document"].(string)] = m["operation"].(string)
		}
	}
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return "sha256:" + hex.EncodeToString(sum[:]) }
	if audited[hash(read)] != "Leak" || audited[hash(add)] != "Add" {
		t.Errorf("audit lines (document: operation) %v, want %s: Leak and %s: Add", audited, hash(read), hash(add))
	}
	if n := strings.Count(logged, hash(read)); n != 1 {
		t.Errorf("the read sent three times was logged %d times within a minute, want once", n)
	}

	for _, s := range rec.Ended() {
		for _, secret := range secrets {
			if spanCarries(s, secret) {
				t.Errorf("span %q carries %q", s.Name(), secret)
			}
		}
	}
}

// spanCarries reports whether a span's status, attributes or events hold s.
func spanCarries(span sdktrace.ReadOnlySpan, s string) bool {
	if strings.Contains(span.Status().Description, s) {
		return true
	}
	for _, kv := range span.Attributes() {
		if strings.Contains(kv.Value.Emit(), s) {
			return true
		}
	}
	for _, e := range span.Events() {
		for _, kv := range e.Attributes {
			if strings.Contains(kv.Value.Emit(), s) {
				return true
			}
		}
	}
	return false
}

// In prod mode /metrics is served on --metrics-listen alone: the API
// listener answers 404 with a key or without, and the start-up line says
// metrics are off; with --metrics-listen they are served there.
func TestProdServesMetricsOnlyOnMetricsListen(t *testing.T) {
	sum := sha256.Sum256([]byte("the-key"))
	key := "ops " + hex.EncodeToString(sum[:]) + " lists:read,lists:write,features:admin,documents:any"
	base, line := startupLine(t, "--mode", "prod", "--api-keys", key, "--data-dir", t.TempDir())
	for _, token := range []string{"", "the-key"} {
		req, _ := http.NewRequest("GET", base+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("prod /metrics on the API listener, token %q: %d, want 404", token, resp.StatusCode)
		}
	}
	if line["metrics_listen"] != "off" {
		t.Errorf("the start-up line says metrics_listen %v, want off", line["metrics_listen"])
	}

	_, line = startupLine(t, "--mode", "prod", "--api-keys", key, "--data-dir", t.TempDir(), "--metrics-listen", "127.0.0.1:0")
	metrics, _ := line["metrics_listen"].(string)
	if status, body := get(t, "http://"+metrics+"/metrics"); status != http.StatusOK || !strings.Contains(body, "listgate_build_info{") {
		t.Errorf("prod /metrics on --metrics-listen: %d %.200s", status, body)
	}
}
