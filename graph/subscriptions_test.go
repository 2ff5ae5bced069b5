package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/store"
)

// wsClient speaks graphql-transport-ws, as the graphql-ws library does.
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
	ctx  context.Context
}

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dial opens a WebSocket to the gateway, from origin (none when "").
func dial(t *testing.T, base, origin string) (*wsClient, *http.Response, error) {
	return dialBuffered(t, base, origin, 0)
}

// dialBuffered is dial with the socket's receive buffer rcvbuf bytes (0:
// the system's, which grows to megabytes on the loopback): a client
// that stops reading then holds little of what the gateway sends.
func dialBuffered(t *testing.T, base, origin string, rcvbuf int) (*wsClient, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	opts := &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: h}
	if rcvbuf > 0 {
		d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var err error
			if cerr := c.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			}); cerr != nil {
				return cerr
			}
			return err
		}}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", opts)
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn, ctx: ctx}, resp, nil
}

func (c *wsClient) send(m wsMessage) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	if err := c.conn.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("writing %s: %v", b, err)
	}
}

// next reads the next message that is not a ping (answered) or pong.
func (c *wsClient) next() (wsMessage, error) {
	for {
		_, b, err := c.conn.Read(c.ctx)
		if err != nil {
			return wsMessage{}, err
		}
		var m wsMessage
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("message %s: %v", b, err)
		}
		switch m.Type {
		case "ping":
			c.send(wsMessage{Type: "pong"})
		case "pong":
		default:
			return m, nil
		}
	}
}

func (c *wsClient) init(token string) (wsMessage, error) {
	c.t.Helper()
	payload := "{}"
	if token != "" {
		payload = fmt.Sprintf(`{"Authorization": "Bearer %s"}`, token)
	}
	c.send(wsMessage{Type: "connection_init", Payload: json.RawMessage(payload)})
	return c.next()
}

func (c *wsClient) subscribe(id, query string) {
	c.t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query})
	c.send(wsMessage{ID: id, Type: "subscribe", Payload: b})
}

// item reads the next item of subscription id.
func (c *wsClient) item() (id, value, timestamp string) {
	c.t.Helper()
	m, err := c.next()
	if err != nil {
		c.t.Fatalf("reading: %v", err)
	}
	var p struct {
		Data struct {
			ListItemsAdded struct {
				Value     any
				Timestamp string
			}
		}
	}
	if m.Type != "next" || json.Unmarshal(m.Payload, &p) != nil {
		c.t.Fatalf("want an item, got %s %s", m.Type, m.Payload)
	}
	return m.ID, fmt.Sprint(p.Data.ListItemsAdded.Value), p.Data.ListItemsAdded.Timestamp
}

// failure reads how subscription id failed: an error message, or a next
// with errors (then its complete); "" when it did not fail.
func (c *wsClient) failure(id string) string {
	c.t.Helper()
	m, err := c.next()
	if err != nil {
		c.t.Fatalf("reading: %v", err)
	}
	if m.ID != id {
		c.t.Fatalf("a message of %s, want one of %s: %+v", m.ID, id, m)
	}
	switch {
	case m.Type == "error":
		return string(m.Payload)
	case m.Type == "next" && strings.Contains(string(m.Payload), `"errors"`):
		if done, err := c.next(); err != nil || done.Type != "complete" || done.ID != id {
			c.t.Fatalf("after the errors of %s: %+v %v", id, done, err)
		}
		return string(m.Payload)
	}
	return ""
}

func subscriptionGateway(t *testing.T, s store.Store, cfgs ...func(*endpoint.Config)) (*gateway, *httptest.Server) {
	t.Helper()
	var handler *endpoint.Handler
	g := newGateway(t, s, append([]func(*endpoint.Config){func(c *endpoint.Config) {
		c.Subscriptions = endpoint.DefaultSubscriptions
	}}, cfgs...)...)
	handler = g.h.(*endpoint.Handler)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return g, srv
}

// Items added through the API reach a subscription over a WebSocket,
// oldest first, each once.
func TestSubscriptionDeliversItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		m, metered := withMeters(t)
		g, srv := subscriptionGateway(t, s, metered)
		g.createFeature("history", "STRING", 3600)
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
			t.Fatalf("init: %+v %v", m, err)
		}
		c.subscribe("1", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "history") { value timestamp } }`, g.entityType))
		m.await(1, "listgate.subscriptions.active")
		now := time.Now()
		g.add("u1", "history", item{"b", ts(now.Add(time.Millisecond))}, item{"a", ts(now)})
		g.add("u1", "history", item{"c", ts(now.Add(2 * time.Millisecond))})
		for _, want := range []string{"a", "b", "c"} {
			if id, v, _ := c.item(); id != "1" || v != want {
				t.Fatalf("got item %s of %s, want %s", v, id, want)
			}
		}
		// The client ends it (what the server sent before it read the
		// complete may still come).
		c.send(wsMessage{ID: "1", Type: "complete"})
		// After c, whatever the clock: a default timestamp could be
		// before c's, on a machine that got here within 2 ms.
		g.add("u1", "history", item{"d", ts(now.Add(3 * time.Millisecond))})
		c.subscribe("2", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "history", since: %q) { value } }`, g.entityType, ts(now.Add(2*time.Millisecond))))
		for _, want := range []string{"c", "d"} {
			id, v, _ := c.item()
			for id == "1" {
				id, v, _ = c.item()
			}
			if id != "2" || v != want {
				t.Fatalf("after since: got %s of %s, want %s", v, id, want)
			}
		}
	})
}

// A connection is authenticated by connection_init, as HTTP requests are
// by their header; a subscription needs lists:read; a WebSocket from an
// origin that is neither the gateway's nor listed is refused at the
// upgrade; subscriptions over HTTP are refused; the bounds hold.
func TestSubscriptionAuthOriginAndBounds(t *testing.T) {
	authn, err := auth.New(auth.Config{APIKeys: []string{keyLine("reader", "r", "lists:read"), keyLine("writer", "w", "lists:write"), keyLine("admin", "a", "features:admin")}})
	if err != nil {
		t.Fatal(err)
	}
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, embeddedStore(t), metered, func(c *endpoint.Config) {
		c.Auth = authn
		c.Subscriptions.Origins = []string{"https://app.example.com"}
		c.Subscriptions.PerConnection = 2
		c.Subscriptions.MaxLists = 1
	})
	subscribeTo := func(feature string) string {
		return fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: %q) { value } }`, g.entityType, feature)
	}

	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init(""); websocket.CloseStatus(err) != 4403 {
		t.Fatalf("a connection without a token: %+v, %v; want a close with 4403", m, err)
	}

	c, _, _ = dial(t, srv.URL, "")
	if m, _ := c.init("w"); m.Type != "connection_ack" {
		t.Fatalf("init with the writer's key: %+v", m)
	}
	c.subscribe("1", subscribeTo("f"))
	if f := c.failure("1"); !strings.Contains(f, "FORBIDDEN") {
		t.Fatalf("a subscription without lists:read: %s", f)
	}

	for _, origin := range []string{"https://evil.example.net", "http://app.example.com", "null"} {
		if _, resp, err := dial(t, srv.URL, origin); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("origin %s: %v %v", origin, resp, err)
		}
	}
	c, _, err = dial(t, srv.URL, "https://app.example.com")
	if err != nil {
		t.Fatalf("a listed origin: %v", err)
	}
	if m, _ := c.init("r"); m.Type != "connection_ack" {
		t.Fatalf("init from a listed origin: %+v", m)
	}
	c.subscribe("1", subscribeTo("absent"))
	if f := c.failure("1"); !strings.Contains(f, "NOT_FOUND") {
		t.Fatalf("a subscription to an unknown feature: %s", f)
	}

	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	g.token = "r"
	c.subscribe("2", subscribeTo("f"))
	c.subscribe("3", subscribeTo("f"))
	m.await(2, "listgate.subscriptions.active")
	c.subscribe("4", subscribeTo("f"))
	if f := c.failure("4"); !strings.Contains(f, "--max-subscriptions-per-connection") || !strings.Contains(f, "BAD_USER_INPUT") {
		t.Fatalf("a third subscription on a connection allowing 2: %s", f)
	}
	// A bound of the gateway's own is UNAVAILABLE, and says which.
	c2, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	c2.init("r")
	c2.subscribe("1", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u2", feature: "f") { value } }`, g.entityType))
	if f := c2.failure("1"); !strings.Contains(f, "UNAVAILABLE") || !strings.Contains(f, "this gateway watches its limit of 1 lists (--max-watched-lists)") {
		t.Fatalf("a second list on a gateway watching at most 1: %s", f)
	}

	// Over HTTP a subscription is refused, saying where to send it.
	_, errs := g.do(subscribeTo("f"), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "WebSockets") {
		t.Fatalf("a subscription over HTTP: %+v", errs)
	}
}

// On shutdown every subscription gets its complete message, then its
// WebSocket closes with 1001 (going away), which clients retry.
func TestSubscriptionsEndOnShutdown(t *testing.T) {
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, embeddedStore(t), metered)
	g.createFeature("f", "STRING", 3600)
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	c.init("")
	c.subscribe("1", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "f") { value } }`, g.entityType))
	m.await(1, "listgate.subscriptions.active")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { g.h.(*endpoint.Handler).Shutdown(ctx); close(done) }()
	if m, err := c.next(); err != nil || m.Type != "complete" || m.ID != "1" {
		t.Fatalf("at shutdown: %+v %v; want complete of 1", m, err)
	}
	if _, err := c.next(); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("then %v; want a close with 1001, going away", err)
	}
	<-done
}

// A subscription whose client stops reading ends with TOO_SLOW, naming the
// position to resume from, after which the rest comes once; one whose feature is deleted and created
// again ends with NOT_FOUND, and a subscription to the new feature gets its
// items.
func TestSubscriptionEndsWithItsCode(t *testing.T) {
	const adds = 8 // of 50 items of 10 KiB
	eachBackend(t, func(t *testing.T, s store.Store) {
		m, metered := withMeters(t)
		g, srv := subscriptionGateway(t, s, metered, func(c *endpoint.Config) {
			c.Subscriptions.BufferBytes = 1 << 10
			c.Subscriptions.SlowTimeout = 100 * time.Millisecond
			// The slow client reads nothing while the adds run; a write
			// blocked past --request-timeout would close its socket
			// before the TOO_SLOW it is waiting for (40 adds took over
			// 10 s under the race detector on 2 loaded cores).
			c.Limits.RequestTimeout = 2 * time.Minute
		})
		g.createFeature("f", "STRING", 3600)
		subscribeTo := func(c *wsClient, id, entityID string) {
			c.subscribe(id, fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: %q, feature: "f") { value timestamp } }`, g.entityType, entityID))
		}
		connect := func() *wsClient {
			c, _, err := dial(t, srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
				t.Fatalf("init: %+v %v", m, err)
			}
			return c
		}

		c := connect()
		subscribeTo(c, "gone", "u1")
		m.await(1, "listgate.subscriptions.active")
		g.ok(`mutation { deleteListFeature(entityType: "$type", name: "f") }`, nil, nil)
		g.createFeature("f", "STRING", 3600)
		if f := c.failure("gone"); !strings.Contains(f, "NOT_FOUND") || !strings.Contains(f, "subscribe again") {
			t.Fatalf("a subscription to a feature deleted and created again: %s", f)
		}
		m.await(0, "listgate.subscriptions.active")
		subscribeTo(c, "new", "u1")
		m.await(1, "listgate.subscriptions.active")
		g.add("u1", "f", item{"of the new feature", ""})
		if id, v, _ := c.item(); id != "new" || v != "of the new feature" {
			t.Fatalf("got %s of %s", v, id)
		}

		// The slow client's socket takes 32 KiB: 4 MB of adds, which the
		// gateway's own socket buffers do not take either, outrun it. (With
		// the system's buffers it took 20 MB, and 40 adds ran past the
		// gateway's 15 s keep-alive ping, which a client that reads
		// nothing never answers: the gateway closed the socket first.)
		slow, _, err := dialBuffered(t, srv.URL, "", 32<<10)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := slow.init(""); err != nil || m.Type != "connection_ack" {
			t.Fatalf("init: %+v %v", m, err)
		}
		subscribeTo(slow, "slow", "u2")
		m.await(2, "listgate.subscriptions.active")
		big := strings.Repeat("x", 10<<10)
		for i := range adds {
			items := make([]item, 50)
			for k := range items {
				items[k] = item{fmt.Sprint(i, "-", k, big), ""}
			}
			g.add("u2", "f", items...)
		}
		m.await(1, "listgate.subscriptions.ended", "reason=too_slow")
		// Resumed after the position TOO_SLOW names, as often as it takes
		// (this client is slow too, under the race detector), it gets
		// every item, once.
		seen := map[string]bool{}
		resume := readUntilEnded(t, slow, "slow", seen)
		for i := 0; len(seen) < adds*50; i++ {
			if resume == "" || i == 20 {
				t.Fatalf("%d of %d items, then the subscription ended for good", len(seen), adds*50)
			}
			c := connect()
			c.subscribe("again", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u2", feature: "f", after: %q) { value } }`, g.entityType, resume))
			resume = readUntilEnded(t, c, "again", seen, adds*50)
		}
	})
}

// readUntilEnded reads the items of subscription id into seen, failing on
// one seen already, until it ends TOO_SLOW (returning the position it
// names) or seen holds enough ("").
func readUntilEnded(t *testing.T, c *wsClient, id string, seen map[string]bool, enough ...int) string {
	t.Helper()
	for len(enough) == 0 || len(seen) < enough[0] {
		msg, err := c.next()
		if err != nil {
			t.Fatalf("after %d items: %v", len(seen), err)
		}
		var p struct {
			Data   struct{ ListItemsAdded struct{ Value string } }
			Errors []struct {
				Extensions struct{ Code, Position string }
			}
		}
		payload := msg.Payload
		if msg.Type == "error" { // its payload is the errors alone
			payload = json.RawMessage(`{"errors":` + string(payload) + `}`)
		}
		if err := json.Unmarshal(payload, &p); err != nil || msg.ID != id {
			t.Fatalf("%s of %s: %v", msg.Payload, msg.ID, err)
		}
		switch v := p.Data.ListItemsAdded.Value; {
		case msg.Type == "next" && len(p.Errors) == 0:
			if seen[v] {
				t.Fatalf("after %d items, %s… a second time", len(seen), v[:min(len(v), 8)])
			}
			seen[v] = true
		case len(p.Errors) == 1 && p.Errors[0].Extensions.Code == "TOO_SLOW" && p.Errors[0].Extensions.Position != "" &&
			strings.Contains(string(msg.Payload), "after:"):
			return p.Errors[0].Extensions.Position
		default:
			t.Fatalf("subscription %s ended with %s %s", id, msg.Type, msg.Payload)
		}
	}
	return ""
}

// An idle subscription holds one goroutine of the gateway's, the one that
// will write its items; completed, it holds none.
func TestIdleSubscriptionHoldsOneGoroutine(t *testing.T) {
	const n = 50
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, embeddedStore(t), metered)
	g.createFeature("f", "STRING", 3600)
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	before := runtime.NumGoroutine()
	for i := range n {
		c.subscribe(fmt.Sprint(i), fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u%d", feature: "f") { value } }`, g.entityType, i))
	}
	m.await(n, "listgate.subscriptions.active")
	// Within a few goroutines of the test's own (the hub's reader of the
	// feed, metrics): two a subscription would be far past.
	awaitGoroutines(t, before+n+n/4)
	g.add("u7", "f", item{"a", ""})
	if id, v, _ := c.item(); id != "7" || v != "a" {
		t.Fatalf("got item %s of %s, want a of 7", v, id)
	}
	for i := range n {
		c.send(wsMessage{ID: fmt.Sprint(i), Type: "complete"})
	}
	m.await(0, "listgate.subscriptions.active")
	awaitGoroutines(t, before+n/4)
}

// awaitGoroutines waits until the process runs at most want goroutines,
// failing after 10 s.
func awaitGoroutines(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after 10 s, want at most %d", runtime.NumGoroutine(), want)
		}
	}
}

// A feature is created not live unless asked, and shows it; a version is
// live as the one it is made from. A subscription to a feature that is not
// live is refused, BAD_USER_INPUT, naming it and how to make it live; one
// to a feature made live less than --feature-staleness and the clock skew
// allowance ago is refused, CONFLICT, with the seconds to wait; one to a
// feature created live starts at once, and ends, BAD_USER_INPUT, once the
// feature is made not live. setListFeatureLive refuses a feature that
// does not exist.
func TestSubscriptionsNeedALiveFeature(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		m, metered := withMeters(t)
		g, srv := subscriptionGateway(t, s, metered)
		g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "quiet", valueType: STRING, ttlSeconds: 3600}) { live } }`, nil, nil)
		var created struct{ CreateListFeature, CreateListFeatureVersion struct{ Live bool } }
		g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "born", valueType: STRING, ttlSeconds: 3600, live: true}) { live }
			createListFeatureVersion(entityType: "$type", name: "born", version: "v2") { live } }`, nil, &created)
		if !created.CreateListFeature.Live || !created.CreateListFeatureVersion.Live {
			t.Fatalf("created live, and a version of it: %+v", created)
		}
		var listed struct{ ListFeature struct{ Live bool } }
		g.ok(`{ listFeature(entityType: "$type", name: "quiet") { live } }`, nil, &listed)
		if listed.ListFeature.Live {
			t.Fatal("a feature created without live is live")
		}
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		c.init("")
		subscribe := func(id, feature string) {
			c.subscribe(id, fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: %q) { value } }`, g.entityType, feature))
		}
		subscribe("quiet", "quiet")
		if f := c.failure("quiet"); !strings.Contains(f, "BAD_USER_INPUT") || !strings.Contains(f, g.entityType+"#quiet|") || !strings.Contains(f, "setListFeatureLive") {
			t.Fatalf("a subscription to a feature that is not live: %s", f)
		}
		g.fails(`mutation { setListFeatureLive(entityType: "$type", name: "missing", live: true) { live } }`, nil, "NOT_FOUND", "missing")
		var set struct{ SetListFeatureLive struct{ Live bool } }
		g.ok(`mutation { setListFeatureLive(entityType: "$type", name: "quiet", live: true) { live } }`, nil, &set)
		if !set.SetListFeatureLive.Live {
			t.Fatal("setListFeatureLive(live: true) answered not live")
		}
		subscribe("soon", "quiet")
		if s.LiveWait(time.Minute) == 0 {
			// One gateway serves the embedded store: no snapshot of
			// another's can lag, so it is subscribed to at once.
			m.await(1, "listgate.subscriptions.active")
			g.add("u1", "quiet", item{"q", ""})
			if id, v, _ := c.item(); id != "soon" || v != "q" {
				t.Fatalf("got %s of %s, want q of soon", v, id)
			}
			c.send(wsMessage{ID: "soon", Type: "complete"})
			m.await(0, "listgate.subscriptions.active")
		} else if f := c.failure("soon"); !strings.Contains(f, "CONFLICT") || !strings.Contains(f, "subscribe in 6") || !strings.Contains(f, "--feature-staleness") {
			t.Fatalf("a subscription to a feature made live just now: %s", f)
		}

		subscribe("born", "born")
		m.await(1, "listgate.subscriptions.active")
		g.add("u1", "born", item{"a", ""})
		if id, v, _ := c.item(); id != "born" || v != "a" {
			t.Fatalf("got %s of %s, want a of born", v, id)
		}
		g.ok(`mutation { setListFeatureLive(entityType: "$type", name: "born", live: false) { live } }`, nil, nil)
		if f := c.failure("born"); !strings.Contains(f, "BAD_USER_INPUT") || !strings.Contains(f, "made not live") {
			t.Fatalf("a subscription to a feature made not live: %s", f)
		}
		m.await(0, "listgate.subscriptions.active")
	})
}

// A feature made not live and live again before the gateway's next check
// (a second here; across gateways, the catalog's refresh) loses the adds
// made in between, which were not recorded: its subscriptions end with
// POSITION_EXPIRED, saying so, rather than go on past the gap. The add
// made while it was not live is never delivered.
func TestLiveAgainEndsSubscriptions(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		m, metered := withMeters(t)
		g, srv := subscriptionGateway(t, s, metered)
		g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "toggled", valueType: STRING, ttlSeconds: 3600, live: true}) { live } }`, nil, nil)
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		c.init("")
		c.subscribe("t", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "toggled") { value } }`, g.entityType))
		m.await(1, "listgate.subscriptions.active")
		g.add("u1", "toggled", item{"before", ""})
		if id, v, _ := c.item(); id != "t" || v != "before" {
			t.Fatalf("got %s of %s, want before of t", v, id)
		}
		g.ok(`mutation { setListFeatureLive(entityType: "$type", name: "toggled", live: false) { live } }`, nil, nil)
		g.add("u1", "toggled", item{"unrecorded", ""})
		g.ok(`mutation { setListFeatureLive(entityType: "$type", name: "toggled", live: true) { live } }`, nil, nil)
		if f := c.failure("t"); !strings.Contains(f, "POSITION_EXPIRED") || !strings.Contains(f, "not live and live again") {
			t.Fatalf("a subscription to a feature made not live and live again: %s", f)
		}
		m.await(0, "listgate.subscriptions.active")
	})
}

// A malformed position is the client's mistake, BAD_USER_INPUT, on either
// store, even one that decodes as base64; one of another kind of store,
// well formed, is one the feed does not hold: POSITION_EXPIRED.
func TestSubscriptionAfterAMalformedPosition(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g, srv := subscriptionGateway(t, s)
		g.createFeature("f", "STRING", 3600)
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		c.init("")
		head, err := store.AwaitHead(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		other := store.Position{Record: "e" + strings.Repeat("\x01", store.EmbeddedRecordLen-1), Item: 0}
		if head.Record[0] == store.EmbeddedPositionKind {
			other = store.Position{Record: "c" + strings.Repeat("\x01", store.CQLRecordLen-1), Item: 0}
		}
		for id, tc := range map[string]struct{ after, code string }{
			"decodes":      {"not-a-position", "BAD_USER_INPUT"},
			"not base64":   {"not a position", "BAD_USER_INPUT"},
			"short":        {"AAAAAAAA", "BAD_USER_INPUT"},
			"another kind": {other.String(), "POSITION_EXPIRED"},
		} {
			c.subscribe(id, fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "f", after: %q) { value } }`, g.entityType, tc.after))
			if f := c.failure(id); !strings.Contains(f, tc.code) {
				t.Errorf("after %q: %s, want %s", tc.after, f, tc.code)
			}
		}
	})
}
