package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/coder/websocket"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/operation"
)

// connection is one WebSocket speaking graphql-transport-ws. It holds what
// belongs to the connection alone: its principal, its caller, and the ids
// of the operations it runs. Each subscribe message starts an operation of
// its own (package operation), served under every rule a POST is.
type connection struct {
	s         *sockets
	ws        *websocket.Conn
	principal *auth.Principal
	caller    string
	addr      string

	mu      sync.Mutex
	active  map[string]context.CancelFunc // operations started, by id
	running int                           // of them, queries and mutations past their parsing
	subs    int                           // of them, subscriptions past their parsing
	ops     sync.WaitGroup
}

// message is a graphql-transport-ws message.
type message struct {
	Type    string         `json:"type"`
	ID      string         `json:"id,omitempty"`
	Payload jsontext.Value `json:"payload,omitempty"`
}

// lenient reads a message's envelope whatever its payload holds, so that
// a payload that is not strict JSON can be refused with its id.
var lenient = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// serve runs the connection: its connection_init within InitTimeout, then
// messages until either side closes it or the gateway shuts down.
func (c *connection) serve(ctx context.Context, unpend func()) {
	defer c.ws.CloseNow()
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.ops.Wait()
	}()
	init := time.AfterFunc(c.s.cfg.InitTimeout, func() { c.close(closeInitTimeout, "Connection initialisation timeout") })
	m, ok := c.read(ctx)
	init.Stop()
	if !ok {
		unpend()
		return
	}
	switch m.Type {
	case "connection_init":
	case "subscribe":
		unpend()
		c.close(closeUnauthorized, "Unauthorized")
		return
	default:
		unpend()
		c.close(closeInvalidMessage, closeReason(fmt.Sprintf("Invalid message: %q before connection_init", m.Type)))
		return
	}
	err := c.authenticate(m.Payload)
	unpend()
	if err != nil {
		c.close(closeForbidden, closeReason(err.Error()))
		return
	}
	select {
	case c.s.open <- struct{}{}:
		defer func() { <-c.s.open }()
	default:
		c.s.refused.Add(ctx, 1, refusedWebSockets)
		c.close(closeTryAgainLater, closeReason(c.s.full().Error()))
		return
	}
	if exp := c.principal.Expires; !exp.IsZero() {
		// A connection authenticated by a JWT lasts as long as the token.
		t := time.AfterFunc(time.Until(exp), func() { c.close(closeForbidden, "the token expired; connect again with a new one") })
		defer t.Stop()
	}
	stop := context.AfterFunc(c.s.closing, func() { c.close(websocket.StatusGoingAway, "the gateway is shutting down; connect to another replica") })
	defer stop()
	if !c.write(ctx, message{Type: "connection_ack"}) {
		return
	}
	go c.keepAlive(ctx)
	for {
		m, ok := c.read(ctx)
		if !ok {
			return
		}
		switch m.Type {
		case "ping":
			c.write(ctx, message{Type: "pong", Payload: m.Payload})
		case "pong":
		case "subscribe":
			if !c.subscribe(ctx, m) {
				return
			}
		case "complete":
			c.mu.Lock()
			if cancel := c.active[m.ID]; cancel != nil {
				cancel()
			}
			c.mu.Unlock()
		case "connection_init":
			c.close(closeTooManyInits, "Too many initialisation requests")
			return
		default:
			c.close(closeInvalidMessage, closeReason(fmt.Sprintf("Invalid message: unknown type %q", m.Type)))
			return
		}
	}
}

// read reads one message; on a message that is not graphql-transport-ws
// it closes the connection with 4400 and says why.
func (c *connection) read(ctx context.Context) (message, bool) {
	typ, data, err := c.ws.Read(ctx)
	if err != nil {
		return message{}, false
	}
	var m message
	if typ != websocket.MessageText {
		c.close(closeInvalidMessage, "Invalid message: binary messages are not part of graphql-transport-ws")
		return m, false
	}
	if err := jsonv2.Unmarshal(data, &m, lenient); err != nil {
		c.close(closeInvalidMessage, closeReason("Invalid message: "+jsonError(err)))
		return m, false
	}
	if !jsontext.Value(data).IsValid() && (m.Type != "subscribe" || m.ID == "" || jsontext.Value(m.Payload).IsValid()) {
		// Not strict JSON outside a subscribe's payload, which is refused
		// like a POST's body, by id.
		c.close(closeInvalidMessage, "Invalid message: not strict JSON (invalid UTF-8, a lone surrogate, or a name twice)")
		return m, false
	}
	return m, true
}

// authenticate sets the connection's principal from its connection_init's
// Authorization, or else from the upgrade request's.
func (c *connection) authenticate(payload jsontext.Value) error {
	var init map[string]any
	if len(payload) > 0 && string(payload) != "null" {
		if err := decodeJSON(payload, &init); err != nil {
			return fmt.Errorf("connection_init: the payload is not a JSON object: %s", jsonError(err))
		}
	}
	token, _ := init["Authorization"].(string)
	if token == "" {
		token, _ = init["authorization"].(string)
	}
	if token != "" || c.principal == nil {
		p, err := c.s.h.auth.Authenticate(token)
		if err != nil {
			return err
		}
		c.principal = p
	}
	c.caller = c.principal.Caller
	if c.caller == "" {
		c.caller = "addr:" + c.addr
	}
	return nil
}

// subscribe starts the operation of a subscribe message, unless its id is
// running (then the connection closes with 4409, and subscribe reports
// false) or the connection holds as many operations as its queries,
// mutations and subscriptions may be together; which of these it is, and
// its own bound, are known once it is parsed, on its own goroutine: the
// read loop never waits.
func (c *connection) subscribe(ctx context.Context, m message) bool {
	received := time.Now()
	if m.ID == "" {
		c.close(closeInvalidMessage, "Invalid message: subscribe without an id")
		return false
	}
	c.mu.Lock()
	if _, dup := c.active[m.ID]; dup {
		c.mu.Unlock()
		c.close(closeDuplicateID, closeReason("Subscriber for "+m.ID+" already exists"))
		return false
	}
	if len(c.active) >= c.s.cfg.MaxOperations+c.s.cfg.PerConnection {
		c.mu.Unlock()
		c.refuse(ctx, m.ID, received, fmt.Errorf("%w: this connection holds %d operations, its limit of queries and mutations (--max-websocket-operations) and subscriptions (--max-subscriptions-per-connection) together; wait for an answer, or end a subscription", errkind.Refused, c.s.cfg.MaxOperations+c.s.cfg.PerConnection))
		return true
	}
	opCtx, cancel := context.WithCancel(ctx)
	c.active[m.ID] = cancel
	c.mu.Unlock()
	c.ops.Add(1)
	go c.run(opCtx, cancel, m, received)
	return true
}

// refuse answers a subscribe message that starts no operation: it is
// still an operation with its log line and metrics.
func (c *connection) refuse(ctx context.Context, id string, received time.Time, err error) {
	op := c.operation(received)
	ctx = operation.With(ctx, op)
	c.error(ctx, id, c.s.h.exec.DispatchError(ctx, gqlerror.List{gqlerror.WrapPath(nil, err)}).Errors)
	c.s.h.observer.done(ctx, op)
}

func (c *connection) operation(received time.Time) *operation.Operation {
	op := operation.New(operation.WebSocket, received)
	op.Principal, op.Caller = c.principal, c.caller
	return op
}

// run serves one operation under the rules of a POST: a slot of
// --max-in-flight, the deadline, the guards, the response byte budget, its
// log line and metrics. A subscription holds no slot and has no deadline,
// but counts against the subscriptions of the connection and the caller.
func (c *connection) run(ctx context.Context, cancel context.CancelFunc, m message, received time.Time) {
	h := c.s.h
	op := c.operation(received)
	ctx = operation.With(graphql.StartOperationTrace(ctx), op)
	running, freed := false, false
	var unsubscribe func()
	// free gives the operation's id and its place among the connection's
	// operations back, before its last message: once the client reads
	// that, it may use them again.
	free := func() {
		if freed {
			return
		}
		freed = true
		if unsubscribe != nil {
			unsubscribe()
		}
		c.mu.Lock()
		delete(c.active, m.ID)
		if running {
			c.running--
		}
		c.mu.Unlock()
	}
	defer func() {
		if p := recover(); p != nil {
			err := h.exec.PresentRecoveredError(ctx, p).(*gqlerror.Error)
			free()
			c.error(ctx, m.ID, gqlerror.List{err})
		}
		free()
		cancel()
		op.End()
		h.observer.done(ctx, op)
		c.ops.Done()
	}()
	timed, cancelTimed := context.WithDeadline(ctx, received.Add(h.limits.RequestTimeout))
	defer cancelTimed()
	fail := func(ctx context.Context, errs gqlerror.List) {
		errs = h.exec.DispatchError(ctx, errs).Errors
		free()
		c.error(ctx, m.ID, errs)
	}
	if _, err := h.callers.Blocked(timed, op.Caller, op.Principal); err != nil {
		fail(timed, gqlerror.List{gqlerror.WrapPath(nil, err)})
		return
	}
	params := new(graphql.RawParams)
	documentID, err := decodeParams("subscribe payload", m.Payload, params)
	if err != nil {
		fail(timed, gqlerror.List{gqlerror.WrapPath(nil, err)})
		return
	}
	release, err := h.admit(timed, op.Caller)
	if err != nil {
		fail(timed, gqlerror.List{gqlerror.WrapPath(nil, err)})
		return
	}
	defer func() { release() }()
	if err := h.resolveDocument(timed, op, params, documentID); err != nil {
		fail(timed, gqlerror.List{gqlerror.WrapPath(nil, err)})
		return
	}
	params.ReadTime = graphql.TraceTiming{Start: received, End: graphql.Now()}
	rc, errs := h.exec.CreateOperationContext(timed, params)
	if errs != nil {
		fail(graphql.WithOperationContext(timed, rc), errs)
		return
	}
	if rc.Operation.Operation != ast.Subscription {
		c.mu.Lock()
		running = c.running < c.s.cfg.MaxOperations
		if running {
			c.running++
		}
		c.mu.Unlock()
		if !running {
			fail(timed, gqlerror.List{gqlerror.WrapPath(nil, fmt.Errorf("%w: this connection runs its limit of %d queries and mutations at once (--max-websocket-operations); wait for an answer", errkind.Refused, c.s.cfg.MaxOperations))})
			return
		}
		responses, timed := h.exec.DispatchOperation(timed, rc)
		resp := responses(timed)
		switch {
		case ctx.Err() != nil:
			// The client completed it, or went away: nothing more is sent.
			op.Canceled()
			return
		case resp == nil && errors.Is(timed.Err(), context.DeadlineExceeded):
			resp = h.exec.DispatchError(timed, gqlerror.List{gqlerror.WrapPath(nil, errkind.DeadlinePassed)})
		case resp == nil:
			return
		}
		if c.next(timed, m.ID, resp) {
			free()
			c.write(timed, message{Type: "complete", ID: m.ID})
		}
		return
	}
	// A subscription: it gives back its slot, and counts as one.
	release()
	release = func() {}
	if unsubscribe, err = c.s.acquireSubscription(ctx, c); err != nil {
		fail(ctx, gqlerror.List{gqlerror.WrapPath(nil, err)})
		return
	}
	if !c.s.begin(&c.s.streams) {
		fail(ctx, gqlerror.List{gqlerror.WrapPath(nil, fmt.Errorf("%w: the gateway is shutting down; connect to another replica", errkind.Refused))})
		return
	}
	defer c.s.streams.Done()
	responses, sctx := h.exec.DispatchOperation(ctx, rc)
	for {
		resp := responses(sctx)
		if resp == nil {
			break
		}
		if !c.next(sctx, m.ID, resp) {
			return
		}
	}
	switch err := op.StreamErr(); {
	case ctx.Err() != nil && c.s.closing.Err() == nil:
		op.Canceled() // completed by the client, or the connection closed
	case err != nil:
		fail(ctx, gqlerror.List{gqlerror.WrapPath(nil, err)})
	default:
		free()
		c.write(ctx, message{Type: "complete", ID: m.ID})
	}
}

// next sends one result of an operation.
func (c *connection) next(ctx context.Context, id string, resp *graphql.Response) bool {
	var b strings.Builder
	b.WriteString(`{"type":"next","id":`)
	writeJSONString(&b, id)
	b.WriteString(`,"payload":`)
	writeResponse(&b, resp)
	b.WriteByte('}')
	return c.send(ctx, []byte(b.String()))
}

// error ends an operation with errors, before or instead of its results.
func (c *connection) error(ctx context.Context, id string, errs gqlerror.List) {
	payload, _ := json.Marshal(errs)
	c.write(ctx, message{Type: "error", ID: id, Payload: payload})
}

func (c *connection) write(ctx context.Context, m message) bool {
	b, err := jsonv2.Marshal(m)
	if err != nil {
		c.close(websocket.StatusInternalError, "internal error")
		return false
	}
	return c.send(ctx, b)
}

// send writes one message, waiting at most --request-timeout for a client
// that reads slowly; one that reads slower than that is disconnected.
func (c *connection) send(ctx context.Context, b []byte) bool {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.s.h.limits.RequestTimeout)
	defer cancel()
	if err := c.ws.Write(wctx, websocket.MessageText, b); err != nil {
		c.ws.CloseNow()
		return false
	}
	return true
}

// close closes the connection with a code and a reason; the closing
// handshake waits a few seconds at most for the client's close.
func (c *connection) close(code websocket.StatusCode, reason string) {
	c.ws.Close(code, reason)
}

// keepAlive pings the client every pingInterval, and closes the
// connection when a pong does not come back within it.
func (c *connection) keepAlive(ctx context.Context) {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, pingInterval)
			err := c.ws.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				c.ws.CloseNow()
				return
			}
		}
	}
}

// writeJSONString writes s as a JSON string.
func writeJSONString(b *strings.Builder, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}
