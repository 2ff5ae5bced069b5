package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/internal/wsclient"
)

// --trusted-documents-mode audit counts exactly the requests enforce mode
// refuses, over POST, GET and a WebSocket's subscribe message alike: a
// text not in the manifest, an APQ hash not in it (alone, or with the
// text it hashes), a documentId not in it; and none that enforce runs.
func TestAuditCountsWhatEnforceRefusesOnEveryTransport(t *testing.T) {
	const trusted = "query Read { listFeatures { key } }"
	const other = "query Other { listFeatures { valueType } }"
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	b, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1,
		"operations": []map[string]string{{"id": hash(trusted), "body": trusted, "name": "Read", "type": "query"}}})
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	persisted := func(h string) map[string]any {
		return map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": h}}
	}
	requests := []struct {
		name    string
		request map[string]any
		refused bool // by enforce mode, and so counted by audit mode
	}{
		{"a trusted text", map[string]any{"query": trusted}, false},
		{"a trusted documentId", map[string]any{"documentId": "sha256:" + hash(trusted)}, false},
		{"a trusted APQ hash alone", map[string]any{"extensions": persisted(hash(trusted))}, false},
		{"a text not in the manifest", map[string]any{"query": other}, true},
		{"an APQ hash not in the manifest, alone", map[string]any{"extensions": persisted(hash(other))}, true},
		{"an APQ hash not in the manifest, with its text", map[string]any{"query": other, "extensions": persisted(hash(other))}, true},
		{"a documentId not in the manifest", map[string]any{"documentId": "sha256:" + hash(other)}, true},
	}
	for _, mode := range []string{"audit", "enforce"} {
		t.Run(mode, func(t *testing.T) {
			base := start(t, "--data-dir", t.TempDir(), "--trusted-documents", manifest, "--trusted-documents-mode", mode)
			ws := dialDocuments(t, base)
			for _, transport := range []struct {
				name string
				send func(request map[string]any) string // the answer's body, or its error messages
			}{
				{"POST", func(request map[string]any) string {
					a, _ := gatewaytest.PostRequest(t, base, "", request)
					return string(a.Body)
				}},
				{"GET", func(request map[string]any) string { return getRequest(t, base, request) }},
				{"WebSocket", ws.send},
			} {
				for _, r := range requests {
					before := untrustedCount(t, base, mode)
					answer := transport.send(r.request)
					counted := untrustedCount(t, base, mode) - before
					refused := strings.Contains(answer, "PERSISTED_QUERY_NOT_IN_LIST") || strings.Contains(answer, "QUERY_NOT_IN_SAFELIST")
					switch {
					case counted != map[bool]float64{true: 1}[r.refused]:
						t.Errorf("%s, %s: counted %v, want %v", transport.name, r.name, counted, map[bool]int{true: 1}[r.refused])
					case mode == "enforce" && refused != r.refused:
						t.Errorf("%s, %s: refused %v, want %v: %s", transport.name, r.name, refused, r.refused, answer)
					case mode == "audit" && refused && !strings.HasPrefix(r.name, "a documentId"):
						t.Errorf("%s, %s: refused in audit mode: %s", transport.name, r.name, answer)
					}
				}
			}
		})
	}
}

// untrustedCount is listgate_untrusted_operations_total{mode}.
func untrustedCount(t *testing.T, base, mode string) float64 {
	t.Helper()
	var n float64
	if f := metricFamilies(t, base)["listgate_untrusted_operations_total"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "mode" && l.GetValue() == mode {
					n += m.Counter.GetValue()
				}
			}
		}
	}
	return n
}

// getRequest sends a request as a GET's query string, and returns the
// answer's body.
func getRequest(t *testing.T, base string, request map[string]any) string {
	t.Helper()
	q := url.Values{}
	for k, v := range request {
		if s, ok := v.(string); ok {
			q.Set(k, s)
			continue
		}
		b, _ := json.Marshal(v)
		q.Set(k, string(b))
	}
	resp, err := http.Get(base + "/graphql?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// documentsSocket sends requests as subscribe messages on one WebSocket.
type documentsSocket struct {
	t    *testing.T
	conn *wsclient.Conn
	id   int
}

func dialDocuments(t *testing.T, base string) *documentsSocket {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, base, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &documentsSocket{t: t, conn: c}
}

// send sends one subscribe message and returns the payloads of the
// messages it got, up to its complete or error.
func (s *documentsSocket) send(request map[string]any) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.id++
	id := fmt.Sprint(s.id)
	if err := s.conn.SubscribeRequest(ctx, id, request); err != nil {
		s.t.Fatal(err)
	}
	var got strings.Builder
	for {
		m, err := s.conn.Read(ctx)
		if err != nil {
			s.t.Fatalf("subscribe %v: %v (after %s)", request, err, got.String())
		}
		if m.ID != id {
			continue
		}
		got.Write(m.Payload)
		if m.Type == "complete" || m.Type == "error" {
			return got.String()
		}
	}
}
