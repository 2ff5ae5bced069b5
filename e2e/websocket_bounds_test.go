package e2e

// What one client may make a gateway hold over WebSockets (issue 38): the
// id each message of an operation carries, the subscribe message a
// subscription keeps, and the WebSockets that have not sent their
// connection_init, each bounded on a gateway process.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// rawSocket is a graphql-transport-ws connection whose messages a test
// reads as the gateway wrote them, byte for byte.
type rawSocket struct {
	t    *testing.T
	ctx  context.Context
	conn *websocket.Conn
}

// dialRaw opens a WebSocket to the gateway with the upgrade's headers h
// (nil: none), without sending anything; the answer to a refused upgrade
// is returned with the error.
func dialRaw(t *testing.T, base string, h http.Header) (*rawSocket, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return &rawSocket{t: t, ctx: ctx, conn: conn}, resp, nil
}

func (s *rawSocket) send(m map[string]any) {
	s.t.Helper()
	// As a graphql-ws client writes it: JSON.stringify escapes no '<'.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		s.t.Fatal(err)
	}
	if err := s.conn.Write(s.ctx, websocket.MessageText, b.Bytes()); err != nil {
		s.t.Fatalf("writing a %v message: %v", m["type"], err)
	}
}

// read reads the next message that is not a ping (answered) or a pong, as
// the gateway wrote it and decoded.
func (s *rawSocket) read() ([]byte, map[string]any, error) {
	for {
		_, b, err := s.conn.Read(s.ctx)
		if err != nil {
			return nil, nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			s.t.Fatalf("a message that is not JSON: %.200s: %v", b, err)
		}
		switch m["type"] {
		case "ping":
			s.send(map[string]any{"type": "pong"})
		case "pong":
		default:
			return b, m, nil
		}
	}
}

// init sends connection_init with token (none when "") and waits for its
// connection_ack.
func (s *rawSocket) init(token string) {
	s.t.Helper()
	payload := map[string]any{}
	if token != "" {
		payload["Authorization"] = "Bearer " + token
	}
	s.send(map[string]any{"type": "connection_init", "payload": payload})
	if _, m, err := s.read(); err != nil || m["type"] != "connection_ack" {
		s.t.Fatalf("connection_init: %v %v", m, err)
	}
}

func (s *rawSocket) subscribe(id, query string, vars map[string]any) {
	s.t.Helper()
	s.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
}

// A subscribe message's id is what every message of its operation carries:
// one of 1,000,000 '<' once made each next message of a catch-up of
// 6-byte items 6,000,079 bytes (the id escaped for HTML, 6 bytes a
// character). An id is at most 128 bytes (graphql-ws makes UUIDs of 36),
// a longer one closes the socket with 4400; one within the bound is
// written as it is, not escaped for HTML; and the message, its type and id
// with its payload, is what --max-response-bytes bounds.
func TestWebSocketIDsAreBounded(t *testing.T) {
	const maxResponse = 1 << 20
	g := startGateway(t, fmt.Sprintf("LISTGATE_MAX_RESPONSE_BYTES=%d", maxResponse), "LISTGATE_MAX_BODY_BYTES=2097152")
	g.mustOK(`mutation { createListFeature(input: {entityType: "user", name: "seen", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	g.mustOK(`mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "seen"}, items: [{value: "story1"}, {value: "story2"}, {value: "story3"}]) { added } }`, nil)
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	catchUp := `subscription($since: Time) { listItemsAdded(entityType: "user", entityId: "u1", feature: "seen", since: $since) { value } }`

	s, _, err := dialRaw(t, g.base, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.init("")
	s.subscribe(strings.Repeat("<", 1_000_000), catchUp, map[string]any{"since": since})
	b, m, err := s.read()
	t.Logf("a subscription of an id of 1,000,000 '<': %d bytes of its first message, then %v", len(b), err)
	if err == nil || websocket.CloseStatus(err) != 4400 {
		t.Fatalf("an id of 1,000,000 bytes: a %v message of %d bytes (%v); want the socket closed with 4400", m["type"], len(b), err)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce); !strings.Contains(ce.Reason, "128") {
		t.Errorf("the close's reason %q does not name the bound of 128 bytes", ce.Reason)
	}

	// An id within the bound, written as it is.
	id := strings.Repeat("<", 128)
	s, _, err = dialRaw(t, g.base, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.init("")
	s.subscribe(id, catchUp, map[string]any{"since": since})
	b, m, err = s.read()
	if err != nil || m["type"] != "next" || m["id"] != id {
		t.Fatalf("a subscription of an id of 128 '<': %.300s %v", b, err)
	}
	if !strings.HasPrefix(string(b), `{"type":"next","id":"`+id+`","payload":`) {
		t.Fatalf("a next message does not carry its id as it was sent: %.300s", b)
	}
	s.send(map[string]any{"id": id, "type": "complete"})

	// A query whose data is 64 bytes within --max-response-bytes: over
	// POST it is answered; over a WebSocket its id and type are counted
	// with it, and past the bound it is answered with the error naming it.
	alias := strings.Repeat("a", maxResponse-64-len(`{"":"Query"}`))
	query := `{ ` + alias + `: __typename }`
	if r := g.mustOK(query, nil); len(r.Data) != maxResponse-64 {
		t.Fatalf("the query's data over POST: %d bytes, want %d", len(r.Data), maxResponse-64)
	}
	queryID := strings.Repeat(">", 128)
	s.subscribe(queryID, query, nil)
	for b, m, err = s.read(); err == nil && m["id"] == id; b, m, err = s.read() {
		// what the subscription sent before its complete
	}
	if err != nil || m["type"] != "next" || m["id"] != queryID {
		t.Fatalf("the query over the socket: %.300s %v", b, err)
	}
	t.Logf("the query's next message: %d bytes (bound %d)", len(b), maxResponse)
	if len(b) > maxResponse || !strings.Contains(string(b), "--max-response-bytes") || strings.Contains(string(b), alias) {
		t.Fatalf("the query over the socket: a message of %d bytes (%.200s); want one within %d bytes, the error naming --max-response-bytes", len(b), b, maxResponse)
	}
}

// apiKeyEntry is an --api-keys entry of name for key, with every scope.
func apiKeyEntry(name, key string) string {
	sum := sha256.Sum256([]byte(key))
	return name + " " + hex.EncodeToString(sum[:]) + " lists:read,lists:write,features:admin"
}

// pending opens n WebSockets from a client that proxies report by
// forwarded (an X-Forwarded-For value; none when ""), which send nothing:
// it fails the test unless every one is upgraded.
func pending(t *testing.T, base, forwarded string, n int) []*rawSocket {
	t.Helper()
	var out []*rawSocket
	for i := range n {
		h := http.Header{}
		if forwarded != "" {
			h.Set("X-Forwarded-For", forwarded)
		}
		s, resp, err := dialRaw(t, base, h)
		if err != nil {
			t.Fatalf("pending WebSocket %d of %d from %q: %v %v", i+1, n, forwarded, statusOf(resp), err)
		}
		out = append(out, s)
	}
	return out
}

// upgradeStatus is the status an upgrade from forwarded is answered with
// (101 when it is upgraded), and h's headers besides.
func upgradeStatus(t *testing.T, base, forwarded string, h http.Header) int {
	t.Helper()
	if h == nil {
		h = http.Header{}
	}
	if forwarded != "" {
		h.Set("X-Forwarded-For", forwarded)
	}
	s, resp, err := dialRaw(t, base, h)
	if err != nil {
		if resp == nil {
			t.Fatalf("an upgrade from %q: %v", forwarded, err)
		}
		return resp.StatusCode
	}
	s.conn.CloseNow()
	return http.StatusSwitchingProtocols
}

func statusOf(resp *http.Response) string {
	if resp == nil {
		return "no answer"
	}
	return resp.Status
}

// WebSockets that have not sent their connection_init are shared by
// client, as the proxies in front report it (--trusted-proxies), an IPv6
// address by its /64. Behind a proxy, a client with no credentials that
// kept 20 of them open once made every other client's upgrade through the
// proxy fail with 429 until they timed out.
func TestPendingWebSocketsByClient(t *testing.T) {
	g := startGateway(t, "LISTGATE_TRUSTED_PROXIES=127.0.0.1/32,10.0.0.0/8", "LISTGATE_WEBSOCKET_INIT_TIMEOUT=1m")
	pending(t, g.base, "203.0.113.7", 20)
	for _, c := range []struct {
		forwarded string
		want      int
	}{
		{"203.0.113.7", http.StatusTooManyRequests},                  // its 21st
		{"198.51.100.9, 203.0.113.7", http.StatusTooManyRequests},    // the right-most untrusted is the client
		{"203.0.113.7, 10.1.2.3", http.StatusTooManyRequests},        // through a second trusted proxy
		{"", http.StatusSwitchingProtocols},                          // the proxy's own
		{"198.51.100.9", http.StatusSwitchingProtocols},              // another client
		{"203.0.113.7, 198.51.100.9", http.StatusSwitchingProtocols}, // what the client said of itself counts for nothing
	} {
		if got := upgradeStatus(t, g.base, c.forwarded, nil); got != c.want {
			t.Errorf("an upgrade with X-Forwarded-For %q: %d, want %d", c.forwarded, got, c.want)
		}
	}
	others := 0
	for range 33 {
		if upgradeStatus(t, g.base, "198.51.100.9", nil) == http.StatusSwitchingProtocols {
			others++
		}
	}
	if others != 33 {
		t.Errorf("%d of 33 upgrades of another client through the proxy were upgraded, want 33", others)
	}

	// An IPv6 client is its /64.
	for i := range 20 {
		pending(t, g.base, fmt.Sprintf("2001:db8:1:2::%x", i+1), 1)
	}
	if got := upgradeStatus(t, g.base, "2001:db8:1:2:ffff:ffff:ffff:ffff", nil); got != http.StatusTooManyRequests {
		t.Errorf("a 21st upgrade from 2001:db8:1:2::/64: %d, want 429", got)
	}
	if got := upgradeStatus(t, g.base, "2001:db8:1:3::1", nil); got != http.StatusSwitchingProtocols {
		t.Errorf("an upgrade from 2001:db8:1:3::/64: %d, want 101", got)
	}
}

// Without --trusted-proxies, X-Forwarded-For is the client's own word and
// counts for nothing: the client is the peer.
func TestPendingWebSocketsWithoutTrustedProxies(t *testing.T) {
	g := startGateway(t, "LISTGATE_WEBSOCKET_INIT_TIMEOUT=1m")
	for i := range 20 {
		pending(t, g.base, fmt.Sprintf("203.0.113.%d", i+1), 1)
	}
	if got := upgradeStatus(t, g.base, "198.51.100.9", nil); got != http.StatusTooManyRequests {
		t.Errorf("a 21st upgrade from the peer, saying it is another: %d, want 429", got)
	}
}

// An upgrade that carries a valid Authorization takes no slot of those
// kept for WebSockets before their connection_init: it is counted at once
// as an open WebSocket of its caller, within its caller's share.
func TestAuthenticatedUpgradesAreNotPending(t *testing.T) {
	g := startGateway(t, "LISTGATE_MODE=prod", "LISTGATE_API_KEYS="+apiKeyEntry("app", "app-key"),
		"LISTGATE_MAX_PENDING_WEBSOCKETS_PER_ADDRESS=1", "LISTGATE_MAX_WEBSOCKETS=2", "LISTGATE_WEBSOCKET_INIT_TIMEOUT=1m")
	pending(t, g.base, "", 1)
	if got := upgradeStatus(t, g.base, "", nil); got != http.StatusTooManyRequests {
		t.Fatalf("a second pending WebSocket of the address: %d, want 429", got)
	}
	s, resp, err := dialRaw(t, g.base, http.Header{"Authorization": {"Bearer app-key"}})
	if err != nil {
		t.Fatalf("an upgrade with its Authorization: %s %v", statusOf(resp), err)
	}
	s.init("")
	s.subscribe("1", `{ __typename }`, nil)
	if b, m, err := s.read(); err != nil || m["type"] != "next" {
		t.Fatalf("a query on it: %s %v", b, err)
	}
	// It holds its caller's share of --max-websockets (1 of 2) from its
	// upgrade on: a second upgrade of the caller is refused before it.
	if got := upgradeStatus(t, g.base, "", http.Header{"Authorization": {"Bearer app-key"}}); got != http.StatusTooManyRequests {
		t.Errorf("a second upgrade of the caller, its share held: %d, want 429", got)
	}
}

// When the WebSockets before their connection_init fill
// --max-pending-websockets, the one that has waited longest is closed
// with 4408 (graphql-ws's code for a connection_init that did not come in
// time) and the new one is upgraded, where it was refused with 503.
func TestFullPendingWebSocketsShedTheOldest(t *testing.T) {
	g := startGateway(t, "LISTGATE_TRUSTED_PROXIES=127.0.0.1", "LISTGATE_MAX_PENDING_WEBSOCKETS=5",
		"LISTGATE_MAX_PENDING_WEBSOCKETS_PER_ADDRESS=5", "LISTGATE_WEBSOCKET_INIT_TIMEOUT=1m")
	old := pending(t, g.base, "203.0.113.7", 5)
	var news []*rawSocket
	for i := range 2 {
		forwarded := fmt.Sprint("198.51.100.", i+1)
		s, resp, err := dialRaw(t, g.base, http.Header{"X-Forwarded-For": {forwarded}})
		if err != nil {
			t.Fatalf("an upgrade from %s with the pending WebSockets full: %s %v", forwarded, statusOf(resp), err)
		}
		news = append(news, s)
		if _, _, err := old[i].read(); websocket.CloseStatus(err) != 4408 {
			t.Fatalf("the oldest pending WebSocket: %v, want a close with 4408", err)
		}
	}
	for _, s := range news {
		s.init("")
	}
	if n := metric(t, g.base, "listgate_subscriptions_refused_total", `reason="max_pending_websockets"`); n != 2 {
		t.Errorf("listgate_subscriptions_refused_total{reason=\"max_pending_websockets\"} = %v, want 2", n)
	}
}

// liveHeap is the gateway's heap right after a collection, which its
// profile endpoint (--pprof-listen, at pprof) runs when asked: what it
// keeps, not what it has yet to collect.
func (g *gateway) liveHeap(pprof string) float64 {
	g.t.Helper()
	resp, err := http.Get("http://" + pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		g.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return metric(g.t, g.base, "go_memstats_heap_alloc_bytes")
}

// pprofAddress is the address the gateway serves its profiles on, from
// its start-up line (logged at info).
func (g *gateway) pprofAddress() string {
	g.t.Helper()
	m := regexp.MustCompile(`pprof_listen=(\S+)`).FindStringSubmatch(g.stderr.String())
	if m == nil || m[1] == "off" {
		g.t.Fatalf("no pprof_listen in the gateway's start-up line")
	}
	return m[1]
}

// paddedSubscription is a subscription to user/u1's seen whose text is
// about size bytes: its operation, then comments.
func paddedSubscription(size int) string {
	op := `subscription Watch { listItemsAdded(entityType: "user", entityId: "u1", feature: "seen") { value timestamp cursor } }`
	line := "# " + strings.Repeat("x", 97) + "\n"
	return op + "\n" + strings.Repeat(line, (size-len(op))/len(line))
}

// An open subscription keeps what runs it, not the subscribe message it
// arrived in: 200 idle subscriptions, each of 900 KB of text (its
// comments), hold a small part of that on the gateway's heap. Each once
// kept its text, its comments parsed, and more: 800 of them held 1,008 MB.
func TestIdleSubscriptionsKeepNotTheirText(t *testing.T) {
	g := startGateway(t, "LISTGATE_PPROF_LISTEN=127.0.0.1:0", "LISTGATE_LOG_LEVEL=info")
	pprof := g.pprofAddress()
	g.mustOK(`mutation { createListFeature(input: {entityType: "user", name: "seen", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	const sockets, each, size = 2, 100, 900_000
	text := paddedSubscription(size)
	var conns []*rawSocket
	for range sockets {
		s, _, err := dialRaw(t, g.base, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.init("")
		conns = append(conns, s)
	}
	before := g.liveHeap(pprof)
	for i, s := range conns {
		for j := range each {
			s.subscribe(fmt.Sprint(i, "-", j), text, nil)
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); metric(t, g.base, "listgate_subscriptions_active") < sockets*each; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v subscriptions active after 2 minutes, want %d", metric(t, g.base, "listgate_subscriptions_active"), sockets*each)
		}
	}
	after := g.liveHeap(pprof)
	perSubscription := (after - before) / (sockets * each)
	t.Logf("live heap %.1f MB before, %.1f MB with %d idle subscriptions of %d bytes of text: %.1f KB each",
		before/1e6, after/1e6, sockets*each, len(text), perSubscription/1e3)
	// A generous bound: an eighth of the text.
	if perSubscription > float64(len(text))/8 {
		t.Errorf("an idle subscription holds %.0f KB of heap, more than an eighth of its %d KB of text", perSubscription/1e3, len(text)/1000)
	}
	// They still run.
	g.mustOK(`mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "seen"}, items: [{value: "story1"}]) { added } }`, nil)
	if b, m, err := conns[0].read(); err != nil || m["type"] != "next" || !strings.Contains(string(b), "story1") {
		t.Fatalf("a subscription after an add: %.300s %v", b, err)
	}
}

// What subscriptions keep of their operations is a pool of
// --subscription-operation-bytes, of which one caller keeps at most its
// share: past it, its next subscription is refused THROTTLED, naming the
// flag, while another caller's is served; once one of its own ends, it
// subscribes again.
func TestSubscriptionOperationsWithinCallersShare(t *testing.T) {
	g := startGateway(t, "LISTGATE_SUBSCRIPTION_OPERATION_BYTES=1048576") // a caller's share: 512 KiB
	g.mustOK(`mutation { createListFeature(input: {entityType: "user", name: "seen", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	// About 300 KB kept: three aliases of 100 KB.
	var fields []string
	for _, c := range []string{"a", "b", "c"} {
		fields = append(fields, strings.Repeat(c, 100_000)+": value")
	}
	big := `subscription { listItemsAdded(entityType: "user", entityId: "u1", feature: "seen") { ` + strings.Join(fields, " ") + ` } }`
	active := func(want float64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); metric(t, g.base, "listgate_subscriptions_active") != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("listgate_subscriptions_active is %v, want %v", metric(t, g.base, "listgate_subscriptions_active"), want)
			}
		}
	}
	a, _, err := dialRaw(t, g.base, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.init("")
	a.subscribe("1", big, nil)
	active(1)
	a.subscribe("2", big, nil)
	b, m, err := a.read()
	if err != nil || m["type"] != "error" || m["id"] != "2" || !strings.Contains(string(b), `"THROTTLED"`) || !strings.Contains(string(b), "--caller-subscription-operation-bytes-share") {
		t.Fatalf("a second subscription past the caller's share: %.400s %v", b, err)
	}
	if n := metric(t, g.base, "listgate_subscriptions_refused_total", `reason="caller_subscription_operation_bytes_share"`); n != 1 {
		t.Errorf("listgate_subscriptions_refused_total{reason=\"caller_subscription_operation_bytes_share\"} = %v, want 1", n)
	}

	// Another caller: in development without credentials, another address.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	if err != nil {
		t.Fatalf("a client from 127.0.0.2: %v", err)
	}
	defer conn.CloseNow()
	other := &rawSocket{t: t, ctx: ctx, conn: conn}
	other.init("")
	other.subscribe("1", big, nil)
	active(2)

	a.send(map[string]any{"id": "1", "type": "complete"})
	active(1)
	a.subscribe("3", big, nil)
	active(2)
}
