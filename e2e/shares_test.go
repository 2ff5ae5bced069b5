package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/internal/wsclient"
)

// dialUnread opens a WebSocket with a receive buffer of 4 KiB as token,
// past its connection_ack, whose client reads nothing more. It closes when
// the test ends.
func dialUnread(t *testing.T, ctx context.Context, base, token string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
		HTTPClient:   &http.Client{Transport: &http.Transport{DialContext: smallDialer.DialContext}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	b, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}})
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	if _, ack, err := ws.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
		t.Fatalf("%s's connection_init: %s %v", token, ack, err)
	}
	return ws
}

// Issue 38: a share of half a pool stopped one caller, not two or three.
// Three keys take all they may of a pool; a fourth key still finds room,
// at once.
func TestThreeCallersLeaveAFourthRoom(t *testing.T) {
	keys := []string{"key-a", "key-b", "key-c", "key-d"}
	scopes := "lists:read,lists:write,features:admin"

	// Two keys holding half of --max-websockets each held them all:
	// another key's upgrade was refused 503.
	t.Run("websockets", func(t *testing.T) {
		const sockets = 40
		g := startGateway(t, fmt.Sprint("LISTGATE_MAX_WEBSOCKETS=", sockets), keysEnv(scopes, keys...))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, key := range keys[:3] {
			opened := 0
			for ; opened <= sockets; opened++ {
				c, err := wsclient.Dial(ctx, g.base, key)
				if err != nil {
					break
				}
				t.Cleanup(c.Close)
			}
			t.Logf("%s opened %d WebSockets of %d", key, opened, sockets)
		}
		c, err := wsclient.Dial(ctx, g.base, "key-d")
		if err != nil {
			t.Fatalf("key-d's WebSocket, while three keys hold all they may: %v", err)
		}
		defer c.Close()
		if err := c.Subscribe(ctx, "1", `{ __typename }`, nil); err != nil {
			t.Fatal(err)
		}
		if m, err := c.Read(ctx); err != nil || m.Type != "next" {
			t.Fatalf("key-d's query: %+v %v", m, err)
		}
	})

	// Three keys delayed a fourth's one-item catch-up from 0.002 s to 8.5
	// s: their subscriptions' catch-up pages, which their clients do not
	// read, held --catch-up-bytes (64 MiB: a page reserves 8.45 MB as it
	// is read, and keeps the 3.3 MB it holds) until their sockets closed
	// (a write waits --request-timeout) or they ended TOO_SLOW. Here both
	// take a minute: the fourth key's item must come within a bound a
	// loaded machine cannot miss, a quarter of that (alone, it takes a
	// millisecond or two).
	t.Run("catch-up", func(t *testing.T) {
		const (
			perKey = 12 // subscriptions of each of the three keys
			within = 15 * time.Second
		)
		g := startGateway(t, "LISTGATE_SUBSCRIPTION_SLOW_TIMEOUT=1m", "LISTGATE_REQUEST_TIMEOUT=1m", keysEnv(scopes, keys...))
		for _, f := range []string{"big", "small"} {
			requestAs(t, g.base, "key-a", fmt.Sprintf(`mutation { createListFeature(input: {entityType: "user", name: %q, valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, f), nil)
		}
		past := time.Now().Add(-time.Minute)
		for i := 0; i < 200; i += 25 { // two pages of 100 items of 32 KB
			var batch [][2]string
			for k := i; k < i+25; k++ {
				batch = append(batch, [2]string{fmt.Sprintf("%05d%s", k, strings.Repeat("x", 32<<10-5)), past.Add(time.Duration(k) * time.Millisecond).Format(time.RFC3339Nano)})
			}
			addItems(t, g.base, "key-a", "user", "u1", "big", batch...)
		}
		addItems(t, g.base, "key-a", "user", "n1", "small", [2]string{"hello", past.Format(time.RFC3339Nano)})
		since := past.Add(-time.Minute).Format(time.RFC3339Nano)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, key := range keys[:3] {
			ws := dialUnread(t, ctx, g.base, key)
			for i := range perKey {
				b, _ := json.Marshal(map[string]any{"type": "subscribe", "id": fmt.Sprint(i), "payload": map[string]any{
					"query": listItemsAdded, "variables": map[string]any{"t": "user", "id": "u1", "f": "big", "since": since}}})
				if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Each key's subscriptions hold what its share, or the pool, lets
		// them; the rest wait for room, as at least a third of them do once
		// the pool holds all it may.
		for deadline := time.Now().Add(time.Minute); metric(t, g.base, "listgate_subscription_catch_up_waiting") < perKey; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v catch-ups wait after a minute, want %d", metric(t, g.base, "listgate_subscription_catch_up_waiting"), perKey)
			}
		}
		waiting := metric(t, g.base, "listgate_subscription_catch_up_waiting")
		d, err := wsclient.Dial(ctx, g.base, "key-d")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		began := time.Now()
		if err := d.Subscribe(ctx, "1", listItemsAdded, map[string]any{"t": "user", "id": "n1", "f": "small", "since": since}); err != nil {
			t.Fatal(err)
		}
		mctx, mcancel := context.WithTimeout(ctx, within)
		defer mcancel()
		m, err := d.Read(mctx)
		took := time.Since(began)
		if err != nil || m.Type != "next" || !strings.Contains(string(m.Payload), "hello") {
			t.Fatalf("key-d's one-item catch-up, while %v of the three keys' %d wait: %+v %v after %v; want its item within %v", waiting, 3*perKey, m, err, took.Round(time.Millisecond), within)
		}
		t.Logf("key-d's one-item catch-up came in %v, while %v of the three keys' %d catch-ups waited for room", took.Round(time.Microsecond), waiting, 3*perKey)
	})
}
