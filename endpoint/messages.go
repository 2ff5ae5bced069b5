package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/99designs/gqlgen/graphql"
	"github.com/coder/websocket"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// What a WebSocket writes: each operation's messages (next, error,
// complete), which carry its id, and the connection's own (connection_ack,
// pong).

// maxIDBytes bounds the id of a subscribe message: every message of its
// operation carries it, and graphql-ws makes UUIDs (36 bytes). A longer
// one is refused as a message not of the protocol (4400).
const maxIDBytes = 128

// envelope is what every message of one operation carries besides its
// payload: its id, written as JSON once, when the operation starts, and
// not escaped for HTML (only the payload's data is, as over HTTP).
type envelope struct {
	id   string
	next []byte // a next message up to its payload: {"type":"next","id":…,"payload":
}

const nextStart, nextEnd = `{"type":"next","id":`, `,"payload":`

func newEnvelope(id string) envelope {
	// Invalid UTF-8 becomes U+FFFD, as encoding/json would write it.
	next, _ := jsontext.AppendQuote(append(make([]byte, 0, len(nextStart)+len(id)+2+len(nextEnd)), nextStart...), id)
	return envelope{id: id, next: append(next, nextEnd...)}
}

// quoted is the id as a JSON string.
func (e envelope) quoted() []byte { return e.next[len(nextStart) : len(e.next)-len(nextEnd)] }

// size is what a next message adds to its payload: --max-response-bytes
// bounds the two together.
func (e envelope) size() int { return len(e.next) + len("}") }

// next sends one result of an operation: the envelope, then the payload,
// written as it is made rather than copied into one message first.
func (c *connection) next(ctx context.Context, e envelope, resp *graphql.Response) bool {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	w, err := c.ws.Writer(wctx, websocket.MessageText)
	if err == nil {
		m := &messageWriter{w: w}
		m.Write(e.next)
		writeResponse(m, resp)
		m.Write([]byte{'}'})
		err = errors.Join(m.err, w.Close())
	}
	return c.sent(err)
}

// messageWriter keeps the first error of the writes of one message, where
// writeResponse drops them.
type messageWriter struct {
	w   io.Writer
	err error
}

func (m *messageWriter) Write(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	n, err := m.w.Write(p)
	m.err = err
	return n, err
}

// error ends an operation with errors, before or instead of its results.
func (c *connection) error(ctx context.Context, e envelope, errs gqlerror.List) {
	payload, _ := json.Marshal(errs)
	b := append(append([]byte(`{"type":"error","id":`), e.quoted()...), `,"payload":`...)
	c.send(ctx, append(append(b, payload...), '}'))
}

// complete ends an operation with a complete message.
func (c *connection) complete(ctx context.Context, e envelope) {
	b := append(append([]byte(`{"type":"complete","id":`), e.quoted()...), '}')
	c.send(ctx, b)
}

// write writes one of the connection's own messages, which carry no id.
func (c *connection) write(ctx context.Context, m message) bool {
	b, err := jsonv2.Marshal(m)
	if err != nil {
		c.close(websocket.StatusInternalError, "internal error")
		return false
	}
	return c.send(ctx, b)
}

// send writes one message.
func (c *connection) send(ctx context.Context, b []byte) bool {
	wctx, cancel := c.writeContext(ctx)
	defer cancel()
	return c.sent(c.ws.Write(wctx, websocket.MessageText, b))
}

// writeContext bounds the writing of one message by --request-timeout,
// whatever ends ctx meanwhile: a client that reads slower than that is
// disconnected.
func (c *connection) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.s.h.limits.RequestTimeout)
}

// sent reports whether a message was written; a connection that could not
// be written to is closed.
func (c *connection) sent(err error) bool {
	if err != nil {
		c.ws.CloseNow()
		return false
	}
	return true
}
