package graph_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// twoKeys authenticates the API keys a (every scope) and b (reads).
func twoKeys(t *testing.T) *auth.Authenticator {
	t.Helper()
	authn, err := auth.New(auth.Config{APIKeys: []string{keyLine("a", "a", "lists:read,lists:write,features:admin"), keyLine("b", "b", "lists:read")}})
	if err != nil {
		t.Fatal(err)
	}
	return authn
}

// dialAs opens a WebSocket authenticated at its upgrade by token.
func dialAs(t *testing.T, base, token string) (*wsClient, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn, ctx: ctx}, resp, nil
}

// A caller holding its share of --max-websockets (half of them, by
// default) is refused THROTTLED and counted: at its connection_init with
// 1013, which graphql-ws clients retry later, or at the upgrade with 429
// when it authenticates there. Another caller's WebSocket is served.
func TestCallerShareOfWebSockets(t *testing.T) {
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, embeddedStore(t), metered, func(c *endpoint.Config) {
		c.Auth = twoKeys(t)
		c.Subscriptions.MaxSockets = 4
	})
	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	for i := range 2 { // a's share: half of 4
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		if m, err := c.init("a"); err != nil || m.Type != "connection_ack" {
			t.Fatalf("a's WebSocket %d: %+v %v", i, m, err)
		}
	}
	// A third, authenticated at its connection_init.
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.init("a")
	var closed websocket.CloseError
	if !errors.As(err, &closed) || closed.Code != websocket.StatusTryAgainLater || !strings.Contains(closed.Reason, "--caller-max-websockets-share") {
		t.Fatalf("a third WebSocket of a's: %v; want a close with 1013 naming --caller-max-websockets-share", err)
	}
	// A fourth, authenticated at its upgrade.
	_, resp, err := dialAs(t, srv.URL, "a")
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth WebSocket of a's: %v %+v; want 429 with Retry-After", err, resp)
	}
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), `"THROTTLED"`) || !strings.Contains(string(body), "--caller-max-websockets-share") {
		t.Fatalf("a fourth WebSocket of a's: %s", body)
	}
	for _, open := range []func() (*wsClient, *http.Response, error){
		func() (*wsClient, *http.Response, error) { return dial(t, srv.URL, "") },
		func() (*wsClient, *http.Response, error) { return dialAs(t, srv.URL, "b") },
	} {
		b, _, err := open()
		if err != nil {
			t.Fatalf("b's WebSocket: %v", err)
		}
		if m, err := b.init("b"); err != nil || m.Type != "connection_ack" {
			t.Fatalf("b's WebSocket: %+v %v", m, err)
		}
		if next, errs := b.query("1", `{ __typename }`); errs != "" || !strings.Contains(string(next), "Query") {
			t.Fatalf("b's query: %s %s", next, errs)
		}
	}
	if n := m.value("listgate.caller.throttled", "caller=a", "reason=share"); n != 2 {
		t.Fatalf("listgate_caller_throttled_total{caller=a,reason=share} = %d, want 2", n)
	}
	if n := m.value("listgate.subscriptions.refused", "reason=caller_max_websockets_share"); n != 2 {
		t.Fatalf("listgate_subscriptions_refused_total{reason=caller_max_websockets_share} = %d, want 2", n)
	}
}

// heldSince holds the catch-up reads of the list "held" until release is
// closed, saying when each starts: each holds its page of --catch-up-bytes
// meanwhile, as one whose client does not read does.
type heldSince struct {
	store.Store
	started chan struct{}
	release chan struct{}
}

func (s heldSince) Since(ctx context.Context, l store.List, from string, limit int) (store.SincePage, error) {
	if l.EntityID == "held" {
		s.started <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return store.SincePage{}, ctx.Err()
		}
	}
	return s.Store.Since(ctx, l, from, limit)
}

// A caller's catch-ups hold at most its share of --catch-up-bytes: while
// key a's catch-ups hold their pages, more of a's wait, and key b's
// catch-up comes whole at once.
func TestCallerShareOfCatchUp(t *testing.T) {
	m, metered := withMeters(t)
	s := heldSince{Store: embeddedStore(t), started: make(chan struct{}, 10), release: make(chan struct{})}
	g, srv := subscriptionGateway(t, s, metered, func(c *endpoint.Config) {
		c.Auth = twoKeys(t)
		// Two pages: a's share is one.
		c.Subscriptions.CatchUpBytes = 2 * watch.PageNeed(watch.Defaults.CatchUpPage, s.Limits())
		c.Subscriptions.SlowTimeout = time.Hour // nothing ends a's for holding a page unread
	})
	t.Cleanup(func() { close(s.release) }) // before the gateway shuts down
	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	past := time.Now().Add(-time.Minute)
	g.add("free", "f", item{Value: "x", Timestamp: ts(past)}, item{Value: "y", Timestamp: ts(past)}, item{Value: "z", Timestamp: ts(past)})
	since := func(entityID string) string {
		return fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: %q, feature: "f", since: %q) { value } }`, g.entityType, entityID, ts(past.Add(-time.Hour)))
	}
	a, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := a.init("a"); err != nil || m.Type != "connection_ack" {
		t.Fatalf("a: %+v %v", m, err)
	}
	a.subscribe("1", since("held"))
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatal("a's first catch-up did not start")
	}
	// a's second waits for room in its share (or, were there no shares,
	// takes the rest of the pool).
	a.subscribe("2", since("held"))
	for deadline := time.Now().Add(10 * time.Second); m.value("listgate.subscription.catch_up.waiting") != 1 && len(s.started) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a's second catch-up neither waits nor reads")
		}
	}
	b, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := b.init("b"); err != nil || m.Type != "connection_ack" {
		t.Fatalf("b: %+v %v", m, err)
	}
	b.subscribe("1", since("free"))
	got := map[string]bool{}
	for range 3 {
		_, v, _ := b.item()
		got[v] = true
	}
	if !got["x"] || !got["y"] || !got["z"] {
		t.Fatalf("b's catch-up: %v", got)
	}
	if n := m.value("listgate.subscriptions.active"); n != 3 {
		t.Fatalf("%d subscriptions open when b's catch-up came, want a's two and b's: it came once a's let go of their pages", n)
	}
	if n := len(s.started); n != 0 {
		t.Fatalf("%d more of a's catch-ups read while a held its share", n)
	}
}
