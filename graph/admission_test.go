package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/endpoint"
)

// stormCallers are the API keys of the callers of the storm tests; "a" may
// create features and add items too.
func stormCallers(t *testing.T) *auth.Authenticator {
	t.Helper()
	authn, err := auth.New(auth.Config{APIKeys: []string{
		keyLine("a", "a", "lists:read,lists:write,features:admin"), keyLine("b", "b", "lists:read"), keyLine("c", "c", "lists:read"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return authn
}

// subscribeAll sends each of ids' subscribe messages for query on c at
// once, from a goroutine of its own; the error is the first write that
// failed.
func subscribeAll(c *wsClient, ids []string, query string) <-chan error {
	done := make(chan error, 1)
	payload, _ := json.Marshal(map[string]any{"query": query})
	go func() {
		for _, id := range ids {
			b, _ := json.Marshal(wsMessage{ID: id, Type: "subscribe", Payload: payload})
			if err := c.conn.Write(c.ctx, websocket.MessageText, b); err != nil {
				done <- fmt.Errorf("subscribe %s: %w", id, err)
				return
			}
		}
		done <- nil
	}()
	return done
}

// A reconnect storm is absorbed: hundreds of subscribe messages sent at
// once over a few WebSockets by a few callers, on a gateway of 4 slots of
// --max-in-flight (2 per caller), wait for a slot instead of being refused:
// every subscription starts, and gets the item added afterwards.
func TestSubscribeStormIsAbsorbed(t *testing.T) {
	const callers, socketsPerCaller, perSocket = 3, 2, 60
	const total = callers * socketsPerCaller * perSocket
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, embeddedStore(t), metered, func(c *endpoint.Config) {
		c.Auth = stormCallers(t)
		c.Limits.MaxInFlight = 4
		c.Limits.CallerInFlightShare = 0.5
	})
	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	query := fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "f") { value } }`, g.entityType)

	var sockets []*wsClient
	for _, token := range []string{"a", "b", "c"}[:callers] {
		for range socketsPerCaller {
			c, _, err := dial(t, srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			if ack, err := c.init(token); err != nil || ack.Type != "connection_ack" {
				t.Fatalf("init as %s: %+v %v", token, ack, err)
			}
			sockets = append(sockets, c)
		}
	}
	var sent []<-chan error
	for i, c := range sockets {
		ids := make([]string, perSocket)
		for k := range ids {
			ids[k] = fmt.Sprintf("%d-%d", i, k)
		}
		sent = append(sent, subscribeAll(c, ids, query))
	}
	for _, done := range sent {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	refusals := func() string {
		return fmt.Sprintf("%d refused for --max-in-flight, %d THROTTLED for the caller's share, %d subscriptions refused",
			m.value("listgate.graphql.refused"), m.value("listgate.caller.throttled"), m.value("listgate.subscriptions.refused"))
	}
	for deadline := time.Now().Add(60 * time.Second); m.value("listgate.subscriptions.active") != total; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) || m.value("listgate.graphql.refused")+m.value("listgate.caller.throttled") > 0 {
			t.Fatalf("%d of %d subscriptions active; %s", m.value("listgate.subscriptions.active"), total, refusals())
		}
	}
	g.add("u1", "f", item{"after the storm", ""})
	for i, c := range sockets {
		got := map[string]bool{}
		for range perSocket {
			msg, err := c.next()
			if err != nil {
				t.Fatalf("socket %d after %d items: %v", i, len(got), err)
			}
			if msg.Type != "next" || !strings.Contains(string(msg.Payload), "after the storm") || got[msg.ID] {
				t.Fatalf("socket %d after %d items: %s %s %s; %s", i, len(got), msg.Type, msg.ID, msg.Payload, refusals())
			}
			got[msg.ID] = true
		}
	}
	if r := refusals(); m.value("listgate.graphql.refused")+m.value("listgate.caller.throttled")+m.value("listgate.subscriptions.refused") != 0 {
		t.Fatal(r)
	}
}

// A subscribe message waits for a slot of --max-in-flight, and for its
// caller's share of them, until its deadline: one waiting for its caller's
// share holds no slot meanwhile, so another caller's operations run; one
// that waits past its deadline is refused then, and counted; one that gets
// a slot once they are given back runs.
func TestWebSocketWaitsForASlot(t *testing.T) {
	s := blockingStore{Store: embeddedStore(t), started: make(chan struct{}, 8), release: make(chan struct{})}
	m, metered := withMeters(t)
	g, srv := subscriptionGateway(t, s, metered, func(c *endpoint.Config) {
		c.Auth = stormCallers(t)
		c.Limits.MaxInFlight = 4
		c.Limits.CallerInFlightShare = 0.5
		c.Limits.RequestTimeout = 2 * time.Second
	})
	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	read := map[string]any{"query": fmt.Sprintf(`{ listItems(entityType: %q, entityId: "u1", feature: "f") { hasMore } }`, g.entityType)}
	var held sync.WaitGroup
	hold := func(token string) {
		t.Helper()
		held.Go(func() { g.post(token, read) })
		select {
		case <-s.started:
		case <-time.After(30 * time.Second):
			t.Fatalf("a read of %s did not start", token)
		}
	}
	defer held.Wait()
	released := false
	releaseReads := func() {
		if !released {
			released = true
			close(s.release)
		}
	}
	defer releaseReads()
	connect := func(token string) *wsClient {
		t.Helper()
		c, _, err := dial(t, srv.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		if ack, err := c.init(token); err != nil || ack.Type != "connection_ack" {
			t.Fatalf("init as %s: %+v %v", token, ack, err)
		}
		return c
	}
	a, b, c := connect("a"), connect("b"), connect("c")

	// a holds its share, 2 of the 4 slots: its subscribe message waits.
	hold("a")
	hold("a")
	a.subscribe("1", `{ __typename }`)
	m.await(1, "listgate.inflight.waiting")
	// b holds a third slot; its query over the socket takes the fourth,
	// which a's waiting message does not hold.
	hold("b")
	if next, errs := b.query("1", `{ __typename }`); errs != "" || !strings.Contains(string(next), "Query") {
		t.Fatalf("b's query while a waits for its share: %s %s", next, errs)
	}
	// Past its deadline, a's message is refused for its share, and counted.
	if f := a.failure("1"); !strings.Contains(f, "THROTTLED") || !strings.Contains(f, "--caller-max-in-flight-share") || !strings.Contains(f, "--request-timeout") {
		t.Fatalf("a's message past its deadline: %s", f)
	}
	if n := m.value("listgate.caller.throttled", "reason=share"); n != 1 {
		t.Fatalf("listgate_caller_throttled_total{reason=share} = %d, want 1", n)
	}
	// Every slot held: c waits for one, and past its deadline is refused
	// UNAVAILABLE, and counted.
	hold("b")
	c.subscribe("1", `{ __typename }`)
	if f := c.failure("1"); !strings.Contains(f, "UNAVAILABLE") || !strings.Contains(f, "--max-in-flight") || !strings.Contains(f, "--request-timeout") {
		t.Fatalf("c's message past its deadline with every slot held: %s", f)
	}
	if n := m.value("listgate.graphql.refused"); n != 1 {
		t.Fatalf("listgate_graphql_refused_total = %d, want 1", n)
	}
	// A subscription waiting when the slots are given back starts.
	c.subscribe("2", fmt.Sprintf(`subscription { listItemsAdded(entityType: %q, entityId: "u1", feature: "f") { value } }`, g.entityType))
	m.await(1, "listgate.inflight.waiting")
	releaseReads()
	held.Wait()
	m.await(1, "listgate.subscriptions.active")
	m.await(0, "listgate.inflight.waiting")
	g.add("u1", "f", item{"once the slots are back", ""})
	if id, v, _ := c.item(); id != "2" || v != "once the slots are back" {
		t.Fatalf("got %s of %s", v, id)
	}
}
