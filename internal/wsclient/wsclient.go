// Package wsclient is a plain graphql-transport-ws client for tests and
// the benchmark: one connection carrying many subscriptions, whose
// messages the caller reads one at a time (pings are answered here). It
// decides nothing about what the gateway should send.
package wsclient

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// Conn is one WebSocket to a gateway's /graphql, past connection_ack.
type Conn struct {
	ws *websocket.Conn
	mu sync.Mutex // writes
}

// Message is one message the gateway sent.
type Message struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Item is the payload of a subscription's next message: one listItemsAdded.
type Item struct {
	Data struct {
		ListItemsAdded struct {
			Value     string `json:"value"`
			Timestamp string `json:"timestamp"`
		} `json:"listItemsAdded"`
	} `json:"data"`
	Errors []struct {
		Message    string `json:"message"`
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	} `json:"errors"`
}

// Dial opens a WebSocket to base (http://host:port) and sends
// connection_init with token, if any, as its Authorization; it returns
// once the gateway acknowledged it.
func Dial(ctx context.Context, base, token string) (*Conn, error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(1 << 20)
	c := &Conn{ws: ws}
	payload := map[string]any{}
	if token != "" {
		payload["Authorization"] = "Bearer " + token
	}
	if err := c.send(ctx, map[string]any{"type": "connection_init", "payload": payload}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	m, err := c.Read(ctx)
	if err != nil || m.Type != "connection_ack" {
		ws.CloseNow()
		return nil, fmt.Errorf("connection_init: %+v %v", m, err)
	}
	return c, nil
}

// Subscribe sends a subscribe message.
func (c *Conn) Subscribe(ctx context.Context, id, query string, vars map[string]any) error {
	return c.send(ctx, map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
}

// SubscribeRequest sends a subscribe message of any payload: a
// documentId, say, or extensions.
func (c *Conn) SubscribeRequest(ctx context.Context, id string, payload map[string]any) error {
	return c.send(ctx, map[string]any{"id": id, "type": "subscribe", "payload": payload})
}

// Complete ends a subscription.
func (c *Conn) Complete(ctx context.Context, id string) error {
	return c.send(ctx, map[string]any{"id": id, "type": "complete"})
}

// Read returns the next message other than a ping or pong; a ping is
// answered.
func (c *Conn) Read(ctx context.Context) (Message, error) {
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			return Message{}, err
		}
		var m Message
		if err := json.Unmarshal(b, &m); err != nil {
			return Message{}, fmt.Errorf("%s: %w", b, err)
		}
		switch m.Type {
		case "ping":
			if err := c.send(ctx, map[string]any{"type": "pong"}); err != nil {
				return Message{}, err
			}
		case "pong":
		default:
			return m, nil
		}
	}
}

// Close closes the connection at once.
func (c *Conn) Close() { c.ws.CloseNow() }

// CloseStatus is the WebSocket close code of an error Read returned, or -1.
func CloseStatus(err error) int { return int(websocket.CloseStatus(err)) }

func (c *Conn) send(ctx context.Context, m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, b)
}
