package endpoint

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
	"github.com/listgate/listgate/pool"
)

// connection is one WebSocket speaking graphql-transport-ws. It holds what
// belongs to the connection alone: its principal, its caller, and the ids
// of the operations it runs. Each subscribe message starts an operation of
// its own (package operation), served under every rule a POST is.
type connection struct {
	s  *sockets
	ws *websocket.Conn
	// Set by the read loop up to connection_init, before any operation
	// starts; read-only after.
	principal *auth.Principal
	caller    string
	addr      string

	// Guarded by mu: the read loop adds an operation, and the operation's
	// goroutine gives it back (started.release).
	mu      sync.Mutex
	active  map[string]context.CancelFunc // operations started, by id
	running int                           // of them, queries and mutations past their parsing
	subs    int                           // of them, subscriptions past their parsing

	ops sync.WaitGroup // operations' goroutines, which serve waits for
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
func (c *connection) serve(ctx context.Context, a admission) {
	defer c.ws.CloseNow()
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.ops.Wait()
	}()
	open, ok := c.initialise(ctx, a)
	if !ok {
		return
	}
	defer open.Release()
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

// initialise reads the connection_init and authenticates it, giving back
// what the WebSocket held before; it returns the connection's slot of
// --max-websockets, its caller's, or false once the connection is closed.
func (c *connection) initialise(ctx context.Context, a admission) (*pool.Hold, bool) {
	m, ok := c.awaitInit(ctx, a.pending)
	c.s.leavePending(a.pending)
	open := a.open
	fail := func(code websocket.StatusCode, reason string) (*pool.Hold, bool) {
		if open != nil {
			open.Release()
		}
		if code != 0 {
			c.close(code, closeReason(reason))
		}
		return nil, false
	}
	switch {
	case !ok:
		return fail(0, "")
	case m.Type == "subscribe":
		return fail(closeUnauthorized, "Unauthorized")
	case m.Type != "connection_init":
		return fail(closeInvalidMessage, fmt.Sprintf("Invalid message: %q before connection_init", m.Type))
	}
	if err := c.authenticate(m.Payload); err != nil {
		return fail(closeForbidden, err.Error())
	}
	if open != nil && c.caller == a.caller {
		return open, true
	}
	// The upgrade named no caller, or connection_init named another: the
	// slot is the caller's.
	if open != nil {
		open.Release()
		open = nil
	}
	slot, _, why, err := c.s.takeOpen(ctx, c.caller)
	if err != nil {
		// 1013: graphql-ws clients retry, later.
		c.s.refused.Add(ctx, 1, why)
		return fail(closeTryAgainLater, err.Error())
	}
	return slot, true
}

// awaitInit reads the connection's first message, which must come within
// --websocket-init-timeout, and before the connection is shed for a newer
// one while it waits (pending.go): else it is closed with 4408, the code
// graphql-ws gives a connection_init that did not come in time.
func (c *connection) awaitInit(ctx context.Context, pending *pendingSocket) (message, bool) {
	wait := context.Background()
	if pending != nil {
		wait = pending.ctx
	}
	wait, cancel := context.WithTimeout(wait, c.s.cfg.InitTimeout)
	defer cancel()
	stop := context.AfterFunc(wait, func() {
		reason := "Connection initialisation timeout"
		if errors.Is(context.Cause(wait), errShed) {
			reason += ": it waited longest, and --max-pending-websockets are open"
		}
		c.close(closeInitTimeout, reason)
	})
	m, ok := c.read(ctx)
	if !stop() {
		return m, false // it is being closed
	}
	return m, ok
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
	if len(m.ID) > maxIDBytes {
		c.close(closeInvalidMessage, fmt.Sprintf("Invalid message: an id longer than %d bytes", maxIDBytes))
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
		c.refuse(ctx, newEnvelope(m.ID), received, fmt.Errorf("%w: this connection holds %d operations, its limit of queries and mutations (--max-websocket-operations) and subscriptions (--max-subscriptions-per-connection) together; wait for an answer, or end a subscription", errkind.Refused, c.s.cfg.MaxOperations+c.s.cfg.PerConnection))
		return true
	}
	opCtx, cancel := context.WithCancel(ctx)
	c.active[m.ID] = cancel
	c.mu.Unlock()
	c.ops.Add(1)
	go c.run(opCtx, &started{c: c, envelope: newEnvelope(m.ID), cancel: cancel, place: func() {}}, m, received)
	return true
}

// refuse answers a subscribe message that starts no operation: it is
// still an operation with its log line and metrics.
func (c *connection) refuse(ctx context.Context, e envelope, received time.Time, err error) {
	op := c.operation(received)
	ctx = operation.With(ctx, op)
	c.error(ctx, e, c.s.h.exec.DispatchError(ctx, errorList(err)).Errors)
	c.s.h.observer.done(ctx, op)
}

func (c *connection) operation(received time.Time) *operation.Operation {
	op := operation.New(operation.WebSocket, received)
	op.Principal, op.Caller = c.principal, c.caller
	return op
}

// started is an operation a subscribe message started. Its id, and its
// place among the connection's operations, are the connection's until
// release gives them back: once, on each path, just before the
// operation's last message (or in its stead), so that a client that reads
// that message may use them again at once. Each path ends with one of
// fail, answer, complete and drop. A started belongs to its operation's
// goroutine.
type started struct {
	c *connection
	envelope
	cancel context.CancelFunc // ends the operation: the client's complete, or the connection's end
	// place gives back the operation's place among the connection's
	// queries and mutations running or its subscriptions, once it has
	// taken one (a no-op until then).
	place func()
}

// release gives back the operation's place and its id.
func (s *started) release() {
	s.place()
	s.c.mu.Lock()
	delete(s.c.active, s.id)
	s.c.mu.Unlock()
}

// fail ends the operation with an error message of errs, presented as
// gqlgen presents an operation's errors.
func (s *started) fail(ctx context.Context, errs gqlerror.List) {
	s.failPresented(ctx, s.c.s.h.exec.DispatchError(ctx, errs).Errors)
}

// failPresented ends the operation with an error message of errs as they
// are. An error message carries errors alone: extensions.cost, when the
// request asked for it, goes in each error's extensions.
func (s *started) failPresented(ctx context.Context, errs gqlerror.List) {
	if cost := costOf(operation.From(ctx), s.c.s.h.callers); cost != nil {
		for _, e := range errs {
			if e.Extensions == nil {
				e.Extensions = map[string]any{}
			}
			e.Extensions["cost"] = cost
		}
	}
	s.release()
	s.c.error(ctx, s.envelope, errs)
}

// answer ends a query or mutation with its result: a next, then a
// complete.
func (s *started) answer(ctx context.Context, resp *graphql.Response) {
	if !s.c.next(ctx, s.envelope, resp) {
		s.drop()
		return
	}
	s.complete(ctx)
}

// complete ends the operation with a complete message.
func (s *started) complete(ctx context.Context) {
	s.release()
	s.c.complete(ctx, s.envelope)
}

// drop ends the operation with no message: the client completed it or
// went away, or its connection cannot be written to.
func (s *started) drop() {
	s.release()
}

// run serves one operation under the rules of a POST: a slot of
// --max-in-flight, the deadline, the guards, the response byte budget, its
// log line and metrics. A subscription holds its slot only while it is
// parsed, and has no deadline; it counts against the subscriptions of the
// connection and the caller. Once set up it is streamed by a goroutine of
// its own, which ends it: a subscription waits for as long as it lives,
// and does so on a stack of the size waiting needs rather than on this
// one, which parsing it and subscribing grew.
func (c *connection) run(ctx context.Context, s *started, m message, received time.Time) {
	op := c.operation(received)
	op.Envelope = s.size()
	ctx = operation.With(graphql.StartOperationTrace(ctx), op)
	c.s.h.lists.ChargeEnvelope(ctx, op.Envelope)
	streaming := false // the stream's goroutine ends the operation
	defer func() {
		c.recovered(ctx, s, recover())
		if !streaming {
			c.end(ctx, s, op)
		}
	}()
	timed, cancelTimed := context.WithDeadline(ctx, received.Add(c.s.h.limits.RequestTimeout))
	defer cancelTimed()
	req, ok := c.admit(timed, s, op, m)
	if !ok {
		return
	}
	rc := c.inSlot(ctx, timed, s, op, req)
	if rc == nil {
		return
	}
	if responses, sctx := c.subscription(ctx, s, rc); responses != nil {
		streaming = true
		go c.stream(ctx, s, op, responses, sctx)
	}
}

// recovered ends the operation with the error of a panic p, if any. What
// panics is a path's work before its end (every end is this file's own
// writing), so the operation has not ended.
func (c *connection) recovered(ctx context.Context, s *started, p any) {
	if p != nil {
		s.failPresented(ctx, gqlerror.List{c.s.h.exec.PresentRecoveredError(ctx, p).(*gqlerror.Error)})
	}
}

// end ends the operation, once its last message is written or none will
// be: what it holds is given back, and it is logged and counted.
func (c *connection) end(ctx context.Context, s *started, op *operation.Operation) {
	s.cancel()
	op.End()
	lists.Answered(ctx)
	c.s.h.observer.done(ctx, op)
	c.ops.Done()
}

// admit decides whether the operation may wait for a slot: its payload is
// a request, and its caller is not blocked. A refusal ends it.
func (c *connection) admit(timed context.Context, s *started, op *operation.Operation, m message) (*request, bool) {
	req := &request{params: new(graphql.RawParams)}
	if err := c.s.h.decodeRequest("subscribe payload", m.Payload, req); err != nil {
		s.fail(timed, errorList(err))
		return nil, false
	}
	op.AskedCost = req.params.Extensions["cost"] == true
	if q, err := c.s.h.callers.Blocked(timed, op.Caller, op.Principal); err != nil {
		op.Quota = q
		s.fail(timed, errorList(err))
		return nil, false
	}
	return req, true
}

// inSlot holds a slot of --max-in-flight, waited for until the deadline,
// while the operation's document is resolved and the operation parsed and
// validated; a query or mutation then runs in it, and a subscription is
// returned, to stream once the slot is given back. It returns nil when
// the operation has ended.
func (c *connection) inSlot(ctx, timed context.Context, s *started, op *operation.Operation, req *request) *graphql.OperationContext {
	slot, err := c.s.h.admitWaiting(timed, op.Caller)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// The client completed it while it waited, or went away.
		op.Canceled()
		s.drop()
		return nil
	default:
		s.fail(timed, errorList(err))
		return nil
	}
	defer slot.Release()
	dispatch, rc, ok := c.parse(timed, s, op, req)
	switch {
	case !ok:
		return nil
	case rc.Operation.Operation == ast.Subscription:
		return rc
	}
	c.query(ctx, dispatch, s, op, rc, slot)
	return nil
}

// parse resolves the operation's trusted document, and makes the
// operation through the guards (its plan, or gqlgen's parsing and
// validation); it returns the context to run a query or mutation in. A
// refusal ends it.
func (c *connection) parse(timed context.Context, s *started, op *operation.Operation, req *request) (context.Context, *graphql.OperationContext, bool) {
	h := c.s.h
	if err := h.resolveDocument(timed, op, req.params, req.documentID); err != nil {
		s.fail(timed, errorList(err))
		return nil, nil, false
	}
	req.params.ReadTime = graphql.TraceTiming{Start: op.Start, End: graphql.Now()}
	dispatch, rc, errs := h.operationContext(timed, op, req)
	if errs != nil {
		s.fail(graphql.WithOperationContext(timed, rc), errs)
		return nil, nil, false
	}
	return dispatch, rc, true
}

// query runs a query or mutation, if the connection runs fewer than
// --max-websocket-operations, and answers it: its result by its deadline,
// or TIMEOUT; nothing once the client has completed it. Its slot and its
// complexity are given back once its answer is made, before it is written.
func (c *connection) query(ctx, timed context.Context, s *started, op *operation.Operation, rc *graphql.OperationContext, slot *pool.Hold) {
	h := c.s.h
	leave, err := c.takeRunning()
	if err != nil {
		s.fail(timed, errorList(err))
		return
	}
	s.place = leave
	responses, timed := h.exec.DispatchOperation(timed, rc)
	resp := responses(timed)
	slot.Release()
	op.End()
	switch {
	case ctx.Err() != nil:
		// The client completed it, or went away: nothing more is sent.
		op.Canceled()
		s.drop()
	case resp == nil && errors.Is(timed.Err(), context.DeadlineExceeded):
		s.answer(timed, withCost(h.exec.DispatchError(timed, errorList(errkind.DeadlinePassed)), op, h.callers))
	case resp == nil:
		s.drop()
	default:
		s.answer(timed, resp)
	}
}

// takeRunning takes a place among the queries and mutations the
// connection runs at once, or says that they are at their bound.
func (c *connection) takeRunning() (leave func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running >= c.s.cfg.MaxOperations {
		return nil, fmt.Errorf("%w: this connection runs its limit of %d queries and mutations at once (--max-websocket-operations); wait for an answer", errkind.Refused, c.s.cfg.MaxOperations)
	}
	c.running++
	return func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}, nil
}

// subscription sets a subscription up, unless the connection or its
// caller holds its bound of subscriptions or its share of what they keep
// of their operations, or the gateway is shutting down: it returns its
// results, for stream to write, or nil once it has ended. It keeps what
// runs its operation, not its text (kept.go). Shutdown waits for its last
// message.
func (c *connection) subscription(ctx context.Context, s *started, rc *graphql.OperationContext) (responses graphql.ResponseHandler, sctx context.Context) {
	leave, err := c.s.acquireSubscription(ctx, c)
	if err != nil {
		s.fail(ctx, errorList(err))
		return nil, nil
	}
	s.place = leave
	rc, size := c.s.copies.kept(rc)
	held, err := c.s.keep(ctx, c.caller, size)
	if err != nil {
		s.fail(ctx, errorList(err))
		return nil, nil
	}
	s.place = func() {
		held.Release()
		leave()
	}
	if !c.s.begin(&c.s.streams) {
		s.fail(ctx, errorList(fmt.Errorf("%w: the gateway is shutting down; connect to another replica", errkind.Refused)))
		return nil, nil
	}
	defer func() {
		if responses == nil {
			c.s.streams.Done() // DispatchOperation panicked: there is no stream to wait for
		}
	}()
	return c.s.h.exec.DispatchOperation(ctx, rc)
}

// stream writes each result of a subscription, then ends it: with its
// error (TOO_SLOW, NOT_FOUND, …), with a complete once its stream ends
// (at shutdown too), or with nothing once the client has completed it.
// It runs on a goroutine of its own, and ends the operation.
func (c *connection) stream(ctx context.Context, s *started, op *operation.Operation, responses graphql.ResponseHandler, sctx context.Context) {
	defer func() {
		c.recovered(ctx, s, recover())
		c.s.streams.Done()
		c.end(ctx, s, op)
	}()
	for {
		op.Produce() // the next result is made here, not on a goroutine of its own
		resp := responses(sctx)
		if resp == nil {
			break
		}
		if !c.next(sctx, s.envelope, resp) {
			s.drop()
			return
		}
	}
	switch err := op.StreamErr(); {
	case ctx.Err() != nil && c.s.closing.Err() == nil:
		op.Canceled() // completed by the client, or the connection closed
		s.drop()
	case err != nil:
		s.fail(ctx, errorList(err))
	default:
		s.complete(ctx)
	}
}

// errorList is err as the errors of a response, at no path.
func errorList(err error) gqlerror.List {
	return gqlerror.List{gqlerror.WrapPath(nil, err)}
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
