package e2e

// What one client may make a gateway hold over WebSockets (issue 38): the
// id each message of an operation carries, the subscribe message a
// subscription keeps, and the WebSockets that have not sent their
// connection_init, each bounded on a gateway process.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
