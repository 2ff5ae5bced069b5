package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/telemetry"
)

// syncBuffer is a log a gateway writes while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startupLine starts the gateway with args, logging JSON at Info, and
// returns its base URL and the fields of its one start-up line.
func startupLine(t *testing.T, args ...string) (string, map[string]any) {
	t.Helper()
	var logs syncBuffer
	base := startLogging(t, telemetry.Options{}, telemetry.NewLogger(&logs, "json", slog.LevelInfo), args...)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var found []map[string]any
	for line := range strings.SplitSeq(logs.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "listgate serving" {
			found = append(found, m)
		}
	}
	if len(found) != 1 || found[0]["level"] != "INFO" {
		t.Fatalf("start-up lines: %v; the log:\n%s", found, logs.buf.String())
	}
	return base, found[0]
}

// The start-up line says the version, the mode, the store and its folder,
// the listener, how callers authenticate and where /metrics and the
// profiles are served.
func TestStartupLineSaysWhatRuns(t *testing.T) {
	sum := sha256.Sum256([]byte("the-key"))
	key := "ops " + hex.EncodeToString(sum[:]) + " lists:read"
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), "jwt.pem")
	if err := os.WriteFile(keysFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, mode, auth string
		args             []string
	}{
		{"dev without keys", "dev", "none (dev)", nil},
		{"dev with an API key", "dev", "API keys (1)", []string{"--api-keys", key}},
		{"prod with keys and JWTs", "prod", "API keys (2), JWT (keys file " + keysFile + ")", []string{"--mode", "prod", "--api-keys", key + ";" + key, "--jwt-keys-file", keysFile, "--jwt-audience", "listgate"}},
		// Nothing answers there: a failed fetch is only logged.
		{"prod with a JWKS", "prod", "JWT (JWKS URL http://idp:xxxxx@127.0.0.1:1/keys)", []string{"--mode", "prod", "--jwt-jwks-url", "http://idp:secret@127.0.0.1:1/keys", "--jwt-audience", "listgate"}},
		{"JWTs of both kinds", "dev", "JWT (keys file " + keysFile + "; JWKS URL http://127.0.0.1:1/keys)", []string{"--jwt-keys-file", keysFile, "--jwt-jwks-url", "http://127.0.0.1:1/keys"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, line := startupLine(t, append([]string{"--data-dir", dir}, c.args...)...)
			metrics := strings.TrimPrefix(base, "http://")
			if c.mode == "prod" {
				metrics = "off" // served on --metrics-listen alone
			}
			want := map[string]any{
				"version": readBuild().Version, "mode": c.mode, "auth": c.auth,
				"store":  map[string]any{"kind": "embedded", "data_dir": dir},
				"listen": strings.TrimPrefix(base, "http://"), "metrics_listen": metrics, "pprof_listen": "off",
			}
			for k, v := range want {
				if fmt.Sprint(line[k]) != fmt.Sprint(v) {
					t.Errorf("%s = %v, want %v", k, line[k], v)
				}
			}
		})
	}
}

// On a cluster the line names its hosts, keyspace, local data centre and
// consistency levels.
func TestStartupLineNamesTheCluster(t *testing.T) {
	cfg := cqltest.Config(t)
	hosts := strings.Join(cfg.Hosts, ",")
	_, line := startupLine(t, "--cql-hosts", hosts, "--cql-keyspace", cfg.Keyspace, "--cql-timeout", "10s",
		"--cql-read-consistency", "one", "--cql-write-consistency", "QUORUM")
	want := map[string]any{"kind": "cql", "hosts": hosts, "keyspace": cfg.Keyspace, "local_dc": "", "read_consistency": "ONE", "write_consistency": "QUORUM", "tls": "off"}
	if fmt.Sprint(line["store"]) != fmt.Sprint(want) {
		t.Errorf("store = %v, want %v", line["store"], want)
	}
}

// With --metrics-listen, /metrics moves there, off the public listener;
// the profiles join it only when --pprof-listen names the same address.
// An operator's listener answers another path naming what it serves, and
// nothing else.
func TestMetricsListen(t *testing.T) {
	for _, c := range []struct {
		name        string
		args        []string
		pprofShared bool
		serves      string // what the metrics listener's 404 says it serves
	}{
		{"metrics alone", []string{"--metrics-listen", "127.0.0.1:0"}, false, "/metrics"},
		{"metrics and profiles on one address", []string{"--metrics-listen", "127.0.0.1:0", "--pprof-listen", "127.0.0.1:0"}, true, "/metrics and /debug/pprof/"},
		{"metrics and profiles on two", []string{"--metrics-listen", "127.0.0.1:0", "--pprof-listen", "localhost:0"}, false, "/metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, line := startupLine(t, append([]string{"--data-dir", t.TempDir()}, c.args...)...)
			metrics, _ := line["metrics_listen"].(string)
			pprof, _ := line["pprof_listen"].(string)
			if metrics == "" || "http://"+metrics == base || (pprof == metrics) != c.pprofShared {
				t.Fatalf("metrics_listen %q, pprof_listen %q, public %s", metrics, pprof, base)
			}
			if status, body := get(t, "http://"+metrics+"/metrics"); status != http.StatusOK || !strings.Contains(body, "listgate_build_info{") {
				t.Errorf("/metrics on --metrics-listen: %d %.200s", status, body)
			}
			if status, _ := get(t, base+"/metrics"); status != http.StatusNotFound {
				t.Errorf("/metrics on the public listener: %d, want 404", status)
			}
			if status, body := get(t, "http://"+metrics+"/graphql"); status != http.StatusNotFound || errorMessage(body) != "no such path: this listener serves "+c.serves {
				t.Errorf("/graphql on --metrics-listen: %d %s, want 404 naming %s alone", status, body, c.serves)
			}
			want := http.StatusNotFound
			if c.pprofShared {
				want = http.StatusOK
			}
			if status, _ := get(t, "http://"+metrics+"/debug/pprof/"); status != want {
				t.Errorf("/debug/pprof/ on --metrics-listen: %d, want %d", status, want)
			}
			if pprof != "off" && pprof != metrics {
				if status, _ := get(t, "http://"+pprof+"/debug/pprof/"); status != http.StatusOK {
					t.Errorf("/debug/pprof/ on --pprof-listen: %d", status)
				}
				if status, body := get(t, "http://"+pprof+"/metrics"); status != http.StatusNotFound || errorMessage(body) != "no such path: this listener serves /debug/pprof/" {
					t.Errorf("/metrics on --pprof-listen: %d %s, want 404 naming /debug/pprof/ alone", status, body)
				}
			}
		})
	}
}

// In prod mode, output is one stream of JSON: stdout and stderr hold JSON
// lines only, from start-up to shutdown, and the start-up line's listen
// field is where the gateway serves. With text logs (dev mode's default)
// stdout has the plain "listgate serving http://…" line.
func TestProdOutputIsOnlyJSON(t *testing.T) {
	sum := sha256.Sum256([]byte("the-key"))
	key := "ops " + hex.EncodeToString(sum[:]) + " lists:read"
	// GOGC and GOMEMLIMIT set, so that run leaves the test process's alone.
	getenv := func(k string) string { return map[string]string{"GOGC": "100", "GOMEMLIMIT": "max"}[k] }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--mode", "prod", "--api-keys", key, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, getenv, &stdout, &stderr)
	}()
	var listen string
	for deadline := time.Now().Add(time.Minute); listen == ""; time.Sleep(20 * time.Millisecond) {
		for line := range strings.SplitSeq(stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "listgate serving" {
				listen, _ = m["listen"].(string)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before serving: %v; stderr:\n%s", err, stderr.String())
		default:
		}
		if listen == "" && time.Now().After(deadline) {
			t.Fatalf("no start-up line with listen within a minute; stderr:\n%s", stderr.String())
		}
	}
	if status, _ := get(t, "http://"+listen+"/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz on the start-up line's listen: %d", status)
	}
	get(t, "http://"+listen+"/graphql?query=%7B__typename%7D") // an operation's log line
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	for name, b := range map[string]*syncBuffer{"stdout": &stdout, "stderr": &stderr} {
		for line := range strings.SplitSeq(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Errorf("%s: not a JSON line: %q", name, line)
			}
		}
	}
	if !strings.Contains(stderr.String(), `"msg":"graphql request"`) {
		t.Errorf("no operation's line; stderr:\n%s", stderr.String())
	}
}

// errorMessage is the first error's message of an answer in the
// endpoint's shape, or "".
func errorMessage(body string) string {
	var out struct{ Errors []struct{ Message string } }
	if json.Unmarshal([]byte(body), &out) != nil || len(out.Errors) == 0 {
		return ""
	}
	return out.Errors[0].Message
}

// A gateway in prod mode that cannot start says why in a JSON line, and
// main prints nothing more: its output stays one stream of JSON.
func TestProdFailureIsAJSONLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sum := sha256.Sum256([]byte("the-key"))
	getenv := func(k string) string { return map[string]string{"GOGC": "100", "GOMEMLIMIT": "max"}[k] }
	var stdout, stderr syncBuffer
	err = run(context.Background(), []string{"--mode", "prod", "--api-keys", "ops " + hex.EncodeToString(sum[:]) + " lists:read",
		"--data-dir", t.TempDir(), "--listen", busy.Addr().String()}, getenv, &stdout, &stderr)
	if err == nil || !errors.As(err, new(loggedError)) || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("run on a busy port: %v, want an error already logged, naming --listen", err)
	}
	var last map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(stderr.String()), "\n") {
		if json.Unmarshal([]byte(line), &last) != nil {
			t.Fatalf("stderr: not a JSON line: %q", line)
		}
	}
	if last["msg"] != "listgate stopped" || last["level"] != "ERROR" || !strings.Contains(fmt.Sprint(last["err"]), "--listen") {
		t.Fatalf("the last line: %v", last)
	}
}

// A gateway started before its cluster logs why it cannot open its store
// yet on one line: the driver's error ends in line breaks, which a log
// field must not carry. Meanwhile it answers UNAVAILABLE, 503 with
// Retry-After.
func TestStoreErrorsAreLoggedOnOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now
	getenv := func(k string) string { return map[string]string{"GOGC": "100", "GOMEMLIMIT": "max"}[k] }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--log-format", "json", "--cql-hosts", closed, "--cql-timeout", "1s", "--listen", "127.0.0.1:0"}, getenv, &stdout, &stderr)
	}()
	var why, listen string
	waitFor(t, time.Minute, "a line saying the store cannot be opened yet", func() bool {
		for line := range strings.SplitSeq(stderr.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil {
				continue
			}
			switch m["msg"] {
			case "listgate listening, opening the store":
				listen, _ = m["listen"].(string)
			case "the store cannot be opened yet; trying again":
				why, _ = m["err"].(string)
			}
		}
		return why != "" && listen != ""
	})
	if strings.ContainsAny(why, "\r\n") || !strings.Contains(why, closed) {
		t.Errorf("the store's error: %q, want one line naming %s", why, closed)
	}
	resp, err := http.Post("http://"+listen+"/graphql", "application/json", strings.NewReader(`{"query":"{ __typename }"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("while the store opens: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
