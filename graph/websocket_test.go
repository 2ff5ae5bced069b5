package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/store"
)

// meters records a gateway's metrics for a test to read.
type meters struct {
	t      *testing.T
	reader *sdkmetric.ManualReader
}

func withMeters(t *testing.T) (*meters, func(*endpoint.Config)) {
	m := &meters{t: t, reader: sdkmetric.NewManualReader()}
	return m, func(c *endpoint.Config) { c.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(m.reader)) }
}

// await waits until value(name, attrs...) is want, failing after 10 s.
func (m *meters) await(want int64, name string, attrs ...string) {
	m.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); m.value(name, attrs...) != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			m.t.Fatalf("%s%v = %d after 10 s, want %d", name, attrs, m.value(name, attrs...), want)
		}
	}
}

// value sums the points of an int64 counter or gauge whose attributes
// include every one of attrs ("name=value").
func (m *meters) value(name string, attrs ...string) int64 {
	m.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		m.t.Fatal(err)
	}
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != name {
				continue
			}
			var points []metricdata.DataPoint[int64]
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				points = d.DataPoints
			case metricdata.Gauge[int64]:
				points = d.DataPoints
			}
		points:
			for _, p := range points {
				for _, a := range attrs {
					k, v, _ := strings.Cut(a, "=")
					if got, ok := p.Attributes.Value(attribute.Key(k)); !ok || got.Emit() != v {
						continue points
					}
				}
				sum += p.Value
			}
		}
	}
	return sum
}

// lines is a log that keeps its records, for a test to count.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count counts the records with every one of attrs ("key=value").
func (l *lines) count(msg string, attrs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
lines:
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		for _, a := range attrs {
			k, v, _ := strings.Cut(a, "=")
			if fmt.Sprint(rec[k]) != v {
				continue lines
			}
		}
		n++
	}
	return n
}

// query runs a query or mutation over the socket and returns its one
// result's payload, or the errors of an error message.
func (c *wsClient) query(id, query string) (next json.RawMessage, errs string) {
	c.t.Helper()
	c.subscribe(id, query)
	m, err := c.next()
	if err != nil || m.ID != id {
		c.t.Fatalf("answer of %s: %+v %v", id, m, err)
	}
	if m.Type == "error" {
		return nil, string(m.Payload)
	}
	if m.Type != "next" {
		c.t.Fatalf("answer of %s: %+v", id, m)
	}
	if done, err := c.next(); err != nil || done.Type != "complete" || done.ID != id {
		c.t.Fatalf("after the answer of %s: %+v %v", id, done, err)
	}
	return m.Payload, ""
}

// Queries and mutations over a WebSocket are operations as POSTs are:
// each with its own loader (a read after a write sees it), its own log
// line and metric sample.
func TestWebSocketOperationsAreOperations(t *testing.T) {
	m, metered := withMeters(t)
	var logs lines
	g, srv := subscriptionGateway(t, embeddedStore(t), metered, func(c *endpoint.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	g.createFeature("f", "STRING", 3600)
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	add := func(id, value string) {
		t.Helper()
		q := fmt.Sprintf(`mutation { addListItems(list: {entityType: %q, entityId: "u1", feature: "f"}, items: [{value: %q}]) { added } }`, g.entityType, value)
		if next, errs := c.query(id, q); errs != "" || !strings.Contains(string(next), `"added":1`) {
			t.Fatalf("add %s: %s %s", value, next, errs)
		}
	}
	read := fmt.Sprintf(`query Read { listItems(entityType: %q, entityId: "u1", feature: "f") { items { value } } }`, g.entityType)
	add("1", "a")
	if next, _ := c.query("2", read); !strings.Contains(string(next), `[{"value":"a"}]`) {
		t.Fatalf("after adding a: %s", next)
	}
	add("3", "b")
	if next, _ := c.query("4", read); !strings.Contains(string(next), `[{"value":"b"},{"value":"a"}]`) {
		t.Fatalf("the same read after adding b: %s", next)
	}
	// An operation's log line is written once its complete message is.
	for deadline := time.Now().Add(10 * time.Second); logs.count("graphql request", "transport=websocket") != 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d log lines of operations over the WebSocket, want 4", logs.count("graphql request", "transport=websocket"))
		}
	}
	if n := logs.count("graphql request", "transport=websocket", "operation=Read", "outcome=ok"); n != 2 {
		t.Fatalf("%d log lines of Read, want 2", n)
	}
	if n := m.value("listgate.graphql.requests", "transport=websocket"); n != 4 {
		t.Fatalf("listgate_graphql_requests_total{transport=websocket} = %d, want 4", n)
	}
}

// A subscribe message is read as strictly as a POST's body, and the
// protocol holds as graphql-transport-ws writes it: its close codes, and
// a validation error for a subscription of two streams.
func TestWebSocketIsStrict(t *testing.T) {
	g, srv := subscriptionGateway(t, embeddedStore(t))
	g.createFeature("f", "STRING", 3600)
	open := func() *wsClient {
		t.Helper()
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	raw := func(c *wsClient, b string) {
		t.Helper()
		if err := c.conn.Write(c.ctx, websocket.MessageText, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	closed := func(c *wsClient, code websocket.StatusCode, what string) {
		t.Helper()
		for {
			m, err := c.next()
			if err != nil {
				if websocket.CloseStatus(err) != code {
					t.Fatalf("%s: %v; want a close with %d", what, err, code)
				}
				return
			}
			if m.Type != "next" && m.Type != "complete" {
				t.Fatalf("%s: %+v; want a close with %d", what, m, code)
			}
		}
	}
	c := open()
	c.init("")
	for _, tc := range []struct{ name, payload, post string }{
		{"a name twice", `{"query": "{ __typename }", "query": "{ __typename }"}`, ""},
		{"invalid UTF-8", "{\"query\": \"{ listFeatures(entityType: \\\"\xff\\\") { key } }\"}", ""},
		{"a lone surrogate", `{"query": "{ listFeatures(entityType: \"\ud800\") { key } }"}`, ""},
	} {
		raw(c, `{"type":"subscribe","id":"x","payload":`+tc.payload+`}`)
		f := c.failure("x")
		status, errs := g.raw(tc.payload)
		if !strings.Contains(f, "BAD_USER_INPUT") || !strings.Contains(f, "subscribe payload: not strict JSON") ||
			status != http.StatusBadRequest || len(errs) != 1 || errs[0].Extensions.Code != "BAD_USER_INPUT" {
			t.Errorf("%s: over the socket %s; over POST %d %+v", tc.name, f, status, errs)
		}
	}
	subscription := fmt.Sprintf(`listItemsAdded(entityType: %q, entityId: "u1", feature: "f") { value }`, g.entityType)
	c.subscribe("two", "subscription { a: "+subscription+" b: "+subscription+" }")
	if f := c.failure("two"); !strings.Contains(f, "BAD_USER_INPUT") || !strings.Contains(f, "exactly one") {
		t.Fatalf("a subscription of two root fields: %s", f)
	}
	c.subscribe("s", "subscription { "+subscription+" }")
	c.subscribe("s", "subscription { "+subscription+" }")
	closed(c, 4409, "a second subscribe with a running id")

	c = open()
	c.subscribe("1", "{ __typename }")
	closed(c, 4401, "a subscribe before connection_init")
	c = open()
	c.init("")
	c.send(wsMessage{Type: "connection_init"})
	closed(c, 4429, "a second connection_init")
	c = open()
	c.init("")
	raw(c, `{"type":"ping","type":"pong"}`)
	closed(c, 4400, "a message with a name twice")
	c = open()
	c.init("")
	raw(c, `{"type":"subscribe","id":"1","payload":{"query":"{ __typename }"}`)
	closed(c, 4400, "a message that is not JSON")
}

// contextStore holds list reads until their context ends, and says when
// one starts.
type contextStore struct {
	store.Store
	started chan struct{}
}

func (s contextStore) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	return store.Page{}, ctx.Err()
}

// A WebSocket runs at most --max-websocket-operations queries and
// mutations at once, and each under the POST's bounds: a slot of
// --max-in-flight (waited for), the deadline, the in-flight complexity
// budget.
func TestWebSocketOperationsAreBounded(t *testing.T) {
	m, metered := withMeters(t)
	s := contextStore{Store: embeddedStore(t), started: make(chan struct{}, 10)}
	g, srv := subscriptionGateway(t, s, metered, func(c *endpoint.Config) {
		c.Subscriptions.MaxOperations = 1
		c.Limits.MaxInFlight = 2
		c.Limits.RequestTimeout = 2 * time.Second
		c.Limits.CallerInFlightShare = 1 // the socket's bound, not the caller's
	})
	g.createFeature("f", "STRING", 3600)
	read := fmt.Sprintf(`{ listItems(entityType: %q, entityId: "u1", feature: "f", limit: 10) { items { value } } }`, g.entityType)
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	c.init("")
	began := time.Now()
	c.subscribe("slow", read)
	<-s.started
	if _, errs := c.query("more", read); !strings.Contains(errs, "UNAVAILABLE") || !strings.Contains(errs, "--max-websocket-operations") {
		t.Fatalf("a second query on a socket running its limit of 1: %s", errs)
	}
	// The complexity of the running one is held, and given back once it
	// has answered TIMEOUT at its deadline.
	// (The refused one's is given back once its error is sent.)
	m.await(1+10*2, "listgate.inflight.complexity")
	mm, err := c.next()
	if err != nil || mm.ID != "slow" || mm.Type != "next" || !strings.Contains(string(mm.Payload), "TIMEOUT") || !strings.Contains(string(mm.Payload), "--request-timeout") {
		t.Fatalf("the query past its deadline: %+v %v", mm, err)
	}
	if took := time.Since(began); took < 2*time.Second {
		t.Fatalf("answered TIMEOUT after %v, before its deadline", took)
	}
	if done, err := c.next(); err != nil || done.Type != "complete" {
		t.Fatalf("after the TIMEOUT: %+v %v", done, err)
	}
	for deadline := time.Now().Add(10 * time.Second); m.value("listgate.inflight.complexity") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the budget is not whole again")
		}
	}
	// Two HTTP reads hold both slots of --max-in-flight: the socket's
	// query waits for one (where a POST is refused), until the client
	// completes it; then nothing is sent for it, and nothing is refused.
	var wg sync.WaitGroup
	for range 2 {
		other := *g
		wg.Go(func() { other.do(read, nil) })
		<-s.started
	}
	c.subscribe("full", read)
	m.await(1, "listgate.inflight.waiting")
	c.send(wsMessage{ID: "full", Type: "complete"})
	m.await(0, "listgate.inflight.waiting")
	wg.Wait()
	if next, errs := c.query("after", `{ __typename }`); errs != "" || !strings.Contains(string(next), "Query") {
		t.Fatalf("a query after one completed while it waited: %s %s", next, errs)
	}
	if n := m.value("listgate.graphql.refused"); n != 0 {
		t.Fatalf("listgate_graphql_refused_total = %d, want 0", n)
	}
}

// WebSockets that never send their connection_init take slots of a pool
// of their own, bounded per address (past it, the address is throttled:
// 429), and are closed with 4408 after --websocket-init-timeout: a client
// from another address is served while they wait, although they are more
// than --max-websockets.
func TestPendingWebSocketsKeepNoSubscriberOut(t *testing.T) {
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, embeddedStore(t), metered, func(c *endpoint.Config) {
		c.Subscriptions.MaxSockets = 4
		c.Subscriptions.MaxPending = 100
		c.Subscriptions.MaxPendingPerAddress = 10
		c.Subscriptions.InitTimeout = time.Second
	})
	g.createFeature("f", "STRING", 3600)
	var idle []*wsClient
	refused := 0
	for range 30 {
		c, resp, err := dial(t, srv.URL, "")
		switch {
		case err == nil:
			idle = append(idle, c)
		case resp != nil && resp.StatusCode == http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("an idle WebSocket: %v", err)
		}
	}
	if len(idle) != 10 || refused != 20 || m.value("listgate.subscriptions.refused", "reason=max_pending_websockets_per_address") != 20 ||
		m.value("listgate.caller.throttled", "caller=address", "reason=share") != 20 {
		t.Fatalf("%d idle WebSockets open, %d refused; want 10 and 20, counted", len(idle), refused)
	}
	// From another loopback address.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}})
	if err != nil {
		t.Fatalf("a client from 127.0.0.2: %v", err)
	}
	defer conn.CloseNow()
	c := &wsClient{t: t, conn: conn, ctx: ctx}
	if m, err := c.init(""); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	if next, errs := c.query("1", `{ __typename }`); errs != "" || !strings.Contains(string(next), "Query") {
		t.Fatalf("a query: %s %s", next, errs)
	}
	for _, c := range idle {
		if _, err := c.next(); websocket.CloseStatus(err) != 4408 {
			t.Fatalf("an idle WebSocket after the init timeout: %v; want a close with 4408", err)
		}
	}
}
