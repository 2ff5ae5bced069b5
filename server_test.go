package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/telemetry"
)

// start calls run as main would and waits until /healthz answers.
func start(t *testing.T, args ...string) string {
	t.Helper()
	return startWith(t, telemetry.Options{}, args...)
}

// startWith is start with telemetry options (a span recorder, say).
func startWith(t *testing.T, opts telemetry.Options, args ...string) string {
	t.Helper()
	return startLogging(t, opts, telemetry.NewLogger(gatewaytest.Log{T: t}, "text", slog.LevelWarn), args...)
}

// startLogging is startWith logging to log.
func startLogging(t *testing.T, opts telemetry.Options, log *slog.Logger, args ...string) string {
	t.Helper()
	g := launch(t, opts, log, openStore, args...)
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Errorf("run returned %v after shutdown", err)
		}
	})
	return g.base
}

// launched is a gateway served in the test's process, as main serves it.
type launched struct {
	base   string
	cancel context.CancelFunc // what SIGTERM does
	done   chan error         // serve's answer, once it returned
}

// stop does what SIGTERM does and returns what serve returned.
func (g *launched) stop() error {
	g.cancel()
	return <-g.done
}

// launch serves a gateway on the store open opens, with the flags args,
// and waits until /healthz answers. The caller stops it.
func launch(t *testing.T, opts telemetry.Options, log *slog.Logger, open storeOpener, args ...string) *launched {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // should the test end before the caller stops it
	out := gatewaytest.NewAddrWriter()
	g := &launched{cancel: cancel, done: make(chan error, 1)}
	go func() {
		getenv := func(string) string { return "" }
		// Text logs, whatever the mode: the gateway prints the line out
		// reads only then, and log, the test's, logs the rest.
		cfg, err := parseConfig(append([]string{"--listen", "127.0.0.1:0", "--log-format", "text"}, args...), getenv, io.Discard)
		if err != nil {
			g.done <- err
			return
		}
		tel, err := telemetry.Setup(ctx, getenv, opts)
		if err != nil {
			g.done <- err
			return
		}
		g.done <- serveOn(ctx, cfg, tel, log, out, open)
	}()
	select {
	case g.base = <-out.Addr():
	case err := <-g.done:
		g.done <- nil // for the caller's stop
		t.Fatalf("run ended before serving: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("run did not start serving within a minute")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(g.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/healthz did not answer")
		}
	}
}

// The walkthrough of the README, over HTTP, against a server started by run.
func walkthrough(t *testing.T, base, entityType string) {
	answer, out := gatewaytest.Post(t, base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "reading_history", valueType: STRING, ttlSeconds: 2592000, live: true}) { key } }`, entityType))
	if answer.Status != http.StatusOK || out["errors"] != nil {
		t.Fatalf("create: %d %v", answer.Status, out)
	}
	// Timestamps from the clock: fixed dates expire under a 30-day TTL.
	hour := time.Now().UTC().Truncate(time.Hour)
	older, newer := hour.Add(-2*time.Hour).Format(time.RFC3339), hour.Add(-time.Hour).Format(time.RFC3339)
	_, out = gatewaytest.Post(t, base, "", fmt.Sprintf(`mutation { addListItems(list: {entityType: %q, entityId: "u1", feature: "reading_history"},
		items: [{value: "story1", timestamp: %q}, {value: "story2", timestamp: %q}]) { added } }`, entityType, older, newer))
	if fmt.Sprint(out["data"]) != "map[addListItems:map[added:2]]" {
		t.Fatalf("add: %v", out)
	}
	query := fmt.Sprintf(`{ entity(type: %q, entityId: "u1") { id list(feature: "reading_history", limit: 1) { items { value timestamp } hasMore } } }`, entityType)
	want := fmt.Sprintf("map[entity:map[id:%s:u1 list:map[hasMore:true items:[map[timestamp:%s value:story2]]]]]", entityType, newer)

	answer, out = gatewaytest.Post(t, base, "application/graphql-response+json", query)
	if got := answer.Header.Get("Content-Type"); got != "application/graphql-response+json" {
		t.Fatalf("Content-Type %q for Accept: application/graphql-response+json", got)
	}
	if fmt.Sprint(out["data"]) != want {
		t.Fatalf("read: %v", out)
	}
	resp, err := http.Get(base + "/graphql?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || fmt.Sprint(out["data"]) != want {
		t.Fatalf("GET: %v %v", out, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET without Accept: Content-Type %q", ct)
	}
}

func TestRunEmbedded(t *testing.T) {
	base := start(t, "--data-dir", t.TempDir())
	walkthrough(t, base, "user")

	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "graphiql") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("playground: %d %.200s", resp.StatusCode, page)
	}
	resp, err = http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestRunCassandraWithMigrate(t *testing.T) {
	keyspace := fmt.Sprintf("listgate_run_%d", os.Getpid())
	base := start(t, "--cql-hosts", strings.Join(cqltest.Hosts(t), ","), "--cql-keyspace", keyspace, "--migrate", "--cql-timeout", "10s")
	walkthrough(t, base, "user")
}

func TestConfigFromFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{"LISTGATE_CQL_HOSTS": "10.0.0.1, 10.0.0.2:9043", "LISTGATE_LOADER_WAIT": "2ms", "LISTGATE_LISTEN": "0.0.0.0:1"}
	c, err := parseConfig([]string{"--listen", "127.0.0.1:9999"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.CQLHosts) != "[10.0.0.1 10.0.0.2:9043]" || c.Loader.Wait != 2*time.Millisecond || c.Listen != "127.0.0.1:9999" {
		t.Fatalf("config %+v", c)
	}
	for _, bad := range [][]string{
		{"--cql-read-consistency", "MOST"},
		{"--max-count", "0"},
		{"--feature-refresh", "10m"},
		{"--max-list-limit", "0"},
		{"stray"},
	} {
		if _, err := parseConfig(bad, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted", bad)
		}
	}
	if _, err := parseConfig(nil, func(k string) string { return map[string]string{"LISTGATE_CQL_TIMEOUT": "soon"}[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "LISTGATE_CQL_TIMEOUT") {
		t.Errorf("a bad environment variable: err = %v", err)
	}
}

// An API key's own budget must cover --max-complexity, as
// --caller-cost-burst must: one under it is refused at start-up, before
// anything is written, naming the key (never its secret), its burst and
// --max-complexity; one at it is accepted.
func TestAPIKeyBurstCoversMaxComplexity(t *testing.T) {
	sum := sha256.Sum256([]byte("the-secret"))
	key := func(cost string) string { return "tenant-a " + hex.EncodeToString(sum[:]) + " lists:read " + cost }
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(key("cost=200/400")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, keys := range [][]string{{"--api-keys", key("cost=200/400")}, {"--api-keys-file", keysFile}} {
		_, err := parseConfig(append([]string{"--max-complexity", "1000"}, keys...), noEnv, io.Discard)
		if err == nil {
			t.Fatalf("%s: a key's burst of 400 under --max-complexity 1000 was accepted", keys[0])
		}
		for _, want := range []string{"tenant-a", "burst 400", "--max-complexity (1000)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", keys[0], err, want)
			}
		}
		if strings.Contains(err.Error(), "the-secret") {
			t.Errorf("%s: the error quotes the key's secret: %q", keys[0], err)
		}
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	if _, err := runArgs(t, noEnv, "--max-complexity", "1000", "--api-keys", key("cost=200/400"), "--data-dir", dataDir); err == nil {
		t.Fatal("run accepted the key")
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused configuration made its data folder: %v", err)
	}
	for _, cost := range []string{"cost=200/1000", "cost=200/4000"} {
		if _, err := parseConfig([]string{"--max-complexity", "1000", "--api-keys", key(cost)}, noEnv, io.Discard); err != nil {
			t.Errorf("%s with --max-complexity 1000: %v", cost, err)
		}
	}
}

// The README's walkthrough works as written: every GraphQL block of it, in
// order, against a fresh server, without an error, and the cursor it pastes
// is the one the page before returned.
func TestReadmeWalkthrough(t *testing.T) {
	blocks := walkthroughBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("found %d GraphQL blocks in the walkthrough", len(blocks))
	}
	runGraphQLBlocks(t, start(t, "--data-dir", t.TempDir()), blocks)
}

// walkthroughBlocks returns the GraphQL blocks of the README's section
// "## Walkthrough", in order.
func walkthroughBlocks(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	section = section[strings.Index(section, "## Walkthrough"):]
	section = section[:strings.Index(section[3:], "\n## ")+3]
	return graphQLBlocks(section)
}

// graphQLBlocks returns the text of every ```graphql block of a Markdown text.
func graphQLBlocks(markdown string) []string {
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```graphql\n(.*?)```").FindAllStringSubmatch(markdown, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// runGraphQLBlocks runs the blocks in order against the gateway at base: each
// must answer without an error, a cursor a block pastes must be the one the
// page before returned, and a subscription block must get the item the
// block after it adds.
func runGraphQLBlocks(t *testing.T, base string, blocks []string) {
	t.Helper()
	var endCursor string
	var subscription *websocket.Conn // a subscription block's, waiting for the next block's item
	for i, query := range blocks {
		if m := regexp.MustCompile(`after: "([^"]+)"`).FindStringSubmatch(query); m != nil && m[1] != endCursor {
			t.Fatalf("block %d pastes cursor %s; the page before returned %s", i+1, m[1], endCursor)
		}
		if strings.HasPrefix(query, "subscription") {
			subscription = subscribe(t, base, query)
			continue
		}
		_, out := gatewaytest.Post(t, base, "", query)
		if out["errors"] != nil || out["data"] == nil {
			t.Fatalf("block %d:\n%s\nanswered %v", i+1, query, out)
		}
		if m := regexp.MustCompile(`endCursor:(\S+?)[\] ]`).FindStringSubmatch(fmt.Sprint(out["data"])); m != nil {
			endCursor = m[1]
		}
		if subscription != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var m struct{ Type, Payload json.RawMessage }
			err := wsjson.Read(ctx, subscription, &m)
			cancel()
			if err != nil || string(m.Type) != `"next"` || !strings.Contains(string(m.Payload), `"listItemsAdded"`) {
				t.Fatalf("after block %d the subscription before it got %s %s, %v", i+1, m.Type, m.Payload, err)
			}
			subscription.CloseNow()
			subscription = nil
		}
	}
}

// subscribe starts a subscription over a WebSocket, as graphql-ws does.
func subscribe(t *testing.T, base, query string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	var ack struct{ Type string }
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	if err := wsjson.Read(ctx, c, &ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_init: %+v %v", ack, err)
	}
	if err := wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the subscription's poller is reading the list
	return c
}

// Production mode refuses to start without authentication, and shows no
// playground or introspection unless asked.
func TestProductionMode(t *testing.T) {
	getenv := func(string) string { return "" }
	if _, err := parseConfig([]string{"--mode", "prod"}, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "needs authentication") {
		t.Fatalf("prod without auth: %v", err)
	}
	sum := sha256.Sum256([]byte("the-key"))
	key := "ops " + hex.EncodeToString(sum[:]) + " lists:read"
	c, err := parseConfig([]string{"--mode", "prod", "--api-keys", key}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Playground || c.Introspection || c.LogFormat != "json" {
		t.Fatalf("prod defaults: playground %v introspection %v log %s", c.Playground, c.Introspection, c.LogFormat)
	}
	c, err = parseConfig([]string{"--mode", "prod", "--api-keys", key, "--playground", "--introspection"}, getenv, io.Discard)
	if err != nil || !c.Playground || !c.Introspection {
		t.Fatalf("explicitly enabled: %+v %v", c, err)
	}

	base := start(t, "--mode", "prod", "--api-keys", key, "--data-dir", t.TempDir())
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("playground in prod: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query":"{ __schema { queryType { name } } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer the-key")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "introspection is off") || !strings.Contains(string(body), "FORBIDDEN") {
		t.Fatalf("introspection in prod: %s", body)
	}
	_, out := gatewaytest.Post(t, base, "", `{ listFeatures { key } }`)
	if !strings.Contains(fmt.Sprint(out["errors"]), "UNAUTHENTICATED") {
		t.Fatalf("no token in prod: %v", out)
	}
}

// Every answer of the gateway's listener that is not a success, whatever
// the path, method or transport, is a JSON body with an error's code.
func TestEveryErrorAnswerIsJSONWithACode(t *testing.T) {
	sum := sha256.Sum256([]byte("the-key"))
	key := "ops " + hex.EncodeToString(sum[:]) + " lists:read"
	prod := start(t, "--mode", "prod", "--api-keys", key, "--data-dir", t.TempDir(),
		"--max-complexity", "5000", "--caller-cost-burst", "5000", "--caller-cost-rate", "1", "--max-body-bytes", "4096")
	dev := start(t, "--data-dir", t.TempDir())
	big := `{"query":"{ __typename }","variables":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	// Two lists of 1,000 items: about 4,000 points, twice past a budget
	// of 5,000.
	heavy := `{ entities(type:"user", entityIds:["1","2"]) { list(feature:"f", limit:1000) { items { value } } } }`
	heavyBody, _ := json.Marshal(map[string]string{"query": heavy})
	req, _ := http.NewRequest("POST", prod+"/graphql", strings.NewReader(string(heavyBody)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer the-key")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the first heavy read: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, c := range []struct {
		name, base, method, path, contentType, token, origin, body string
		status                                                     int
	}{
		{"POST /", dev, "POST", "/", "", "", "", "", http.StatusMethodNotAllowed},
		{"an unknown path", dev, "GET", "/nope", "", "", "", "", http.StatusNotFound},
		{"an unknown asset", dev, "GET", "/playground/nope.js", "", "", "", "", http.StatusNotFound},
		{"the assets' folder", dev, "GET", "/playground/assets/", "", "", "", "", http.StatusNotFound},
		{"DELETE /healthz", dev, "DELETE", "/healthz", "", "", "", "", http.StatusMethodNotAllowed},
		{"POST /metrics", dev, "POST", "/metrics", "", "", "", "", http.StatusMethodNotAllowed},
		{"the playground in prod", prod, "GET", "/", "", "", "", "", http.StatusNotFound},
		{"PUT /graphql", dev, "PUT", "/graphql", "", "", "", "", http.StatusMethodNotAllowed},
		{"bad JSON", dev, "POST", "/graphql", "application/json", "", "", `{"query":`, http.StatusBadRequest},
		{"no content type", dev, "POST", "/graphql", "", "", "", `{"query":"{ __typename }"}`, http.StatusUnsupportedMediaType},
		{"a GET without a query", dev, "GET", "/graphql", "", "", "", "", http.StatusUnprocessableEntity},
		{"a wrong Host", dev, "GET", "/graphql?query=%7B__typename%7D", "", "", "", "", http.StatusForbidden},
		{"a mutation by GET", dev, "GET", "/graphql?query=" + url.QueryEscape(`mutation { deleteListFeature(entityType: "user", name: "x") }`), "", "", "", "", http.StatusMethodNotAllowed},
		{"a query that does not parse", dev, "POST", "/graphql", "application/json", "", "", `{"query":"{"}`, http.StatusUnprocessableEntity},
		{"a preflight from another origin", dev, "OPTIONS", "/graphql", "", "", "https://elsewhere.example", "", http.StatusForbidden},
		{"a WebSocket from another origin", dev, "GET", "/graphql", "", "", "https://elsewhere.example", "", http.StatusForbidden},
		{"no token", prod, "POST", "/graphql", "application/json", "", "", `{"query":"{ __typename }"}`, http.StatusUnauthorized},
		{"a wrong token", prod, "POST", "/graphql", "application/json", "nope", "", `{"query":"{ __typename }"}`, http.StatusUnauthorized},
		{"a body past --max-body-bytes", prod, "POST", "/graphql", "application/json", "the-key", "", big, http.StatusRequestEntityTooLarge},
		{"past the caller's budget", prod, "POST", "/graphql", "application/json", "the-key", "", string(heavyBody), http.StatusTooManyRequests},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, c.base+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
				req.Header.Set("Access-Control-Request-Method", "POST")
			}
			if c.name == "a wrong Host" {
				req.Host = "elsewhere.example"
			}
			if strings.HasPrefix(c.name, "a WebSocket") {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
				req.Header.Set("Sec-WebSocket-Protocol", "graphql-transport-ws")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/") || !strings.Contains(ct, "json") {
				t.Fatalf("Content-Type %q: %s", ct, body)
			}
			var out struct {
				Errors []struct {
					Message    string
					Extensions struct{ Code string }
				}
			}
			if err := json.Unmarshal(body, &out); err != nil || len(out.Errors) == 0 || out.Errors[0].Message == "" || out.Errors[0].Extensions.Code == "" {
				t.Fatalf("not a JSON error with a code (%v): %s", err, body)
			}
		})
	}
}

// With --cors-origins, a page's code may read what an answer says of its
// caller's budget: Access-Control-Expose-Headers names RateLimit,
// RateLimit-Policy, Retry-After and X-Request-Id, on a 200 and on a 429.
func TestCORSExposesTheBudget(t *testing.T) {
	const origin = "https://app.example.com"
	base := start(t, "--data-dir", t.TempDir(), "--cors-origins", origin,
		"--max-complexity", "5000", "--caller-cost-burst", "5000", "--caller-cost-rate", "1")
	// About 4,000 points: the second does not fit.
	heavy, _ := json.Marshal(map[string]string{"query": `{ entities(type:"user", entityIds:["1","2"]) { list(feature:"f", limit:1000) { items { value } } } }`})
	for _, want := range []struct {
		status int
		header string
	}{{http.StatusOK, "RateLimit"}, {http.StatusTooManyRequests, "Retry-After"}} {
		req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(string(heavy)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		exposed := map[string]bool{}
		for name := range strings.SplitSeq(resp.Header.Get("Access-Control-Expose-Headers"), ",") {
			exposed[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
		for _, name := range []string{"Ratelimit", "Ratelimit-Policy", "Retry-After", "X-Request-Id"} {
			if !exposed[name] {
				t.Errorf("%d: Access-Control-Expose-Headers %q does not name %s", resp.StatusCode, resp.Header.Get("Access-Control-Expose-Headers"), name)
			}
		}
		if resp.StatusCode != want.status || resp.Header.Get(want.header) == "" || resp.Header.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("%d, %s %q, Access-Control-Allow-Origin %q; want %d with %s", resp.StatusCode, want.header, resp.Header.Get(want.header),
				resp.Header.Get("Access-Control-Allow-Origin"), want.status, want.header)
		}
	}
}

// A port in use stops the gateway with an error that says which flag
// picks another.
func TestBusyPortNamesListen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = runArgs(t, noEnv, "--listen", busy.Addr().String(), "--data-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--listen "+busy.Addr().String()) || !strings.Contains(err.Error(), "address already in use") ||
		!strings.Contains(err.Error(), "LISTGATE_LISTEN") {
		t.Fatalf("serving on a port in use: err = %v", err)
	}
}

// A document of several operations sent without operationName is refused
// saying what to do, over POST, GET and a WebSocket alike.
func TestSeveralOperationsWithoutOperationName(t *testing.T) {
	base := start(t, "--data-dir", t.TempDir())
	const doc = `query A { __typename } query B { __typename }`
	const want = `the document has several operations: name the one to run with "operationName"`
	type answer struct {
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	check := func(transport string, a answer) {
		if len(a.Errors) != 1 || a.Errors[0].Message != want || a.Errors[0].Extensions.Code != "BAD_USER_INPUT" {
			t.Errorf("%s: %+v, want one BAD_USER_INPUT error: %s", transport, a, want)
		}
	}

	body, _ := json.Marshal(map[string]string{"query": doc})
	resp, err := http.Post(base+"/graphql", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	var post answer
	json.NewDecoder(resp.Body).Decode(&post)
	resp.Body.Close()
	check("POST", post)

	resp, err = http.Get(base + "/graphql?query=" + url.QueryEscape(doc))
	if err != nil {
		t.Fatal(err)
	}
	var get answer
	json.NewDecoder(resp.Body).Decode(&get)
	resp.Body.Close()
	check("GET", get)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	var ack struct{ Type string }
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init"}); err != nil {
		t.Fatal(err)
	}
	if err := wsjson.Read(ctx, c, &ack); err != nil || ack.Type != "connection_ack" {
		t.Fatalf("connection_init: %+v %v", ack, err)
	}
	if err := wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": doc}}); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Type    string
		Payload json.RawMessage
	}
	if err := wsjson.Read(ctx, c, &m); err != nil {
		t.Fatal(err)
	}
	var ws answer
	switch m.Type {
	case "error": // graphql-transport-ws: the payload is the errors
		json.Unmarshal(m.Payload, &ws.Errors)
	case "next":
		json.Unmarshal(m.Payload, &ws)
	}
	check("WebSocket ("+m.Type+")", ws)
}
