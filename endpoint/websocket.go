package endpoint

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/watch"
)

// Subscriptions bound the WebSocket side of the endpoint.
type Subscriptions struct {
	MaxLists      int // lists one gateway watches at once
	PerConnection int // subscriptions open on one connection
	PerCaller     int // subscriptions open for one caller
	MaxSockets    int // WebSockets open at once past their connection_init
	// SocketsShare is the share of MaxSockets one caller's WebSockets may
	// hold, and CatchUpShare the share of CatchUpBytes its subscriptions'
	// catch-up pages may (above 0, at most 1).
	SocketsShare, CatchUpShare float64
	// MaxPending bounds the WebSockets that have not yet sent their
	// connection_init, their upgrade carrying no Authorization, in all and
	// from one client (pending.go): they take no slot of MaxSockets until
	// then, so connections that never authenticate cannot keep real
	// subscribers out.
	MaxPending, MaxPendingPerAddress int
	InitTimeout                      time.Duration // how long a new WebSocket has to send its connection_init
	MaxOperations                    int           // queries and mutations running at once on one WebSocket
	// BufferBytes is how far behind, in bytes of items, a subscription
	// may fall: past it for SlowTimeout, it is ended.
	BufferBytes int64
	SlowTimeout time.Duration
	// ListBytes, TotalBytes and CatchUpBytes bound the items kept for one
	// list's subscriptions, for every list's, and the catch-up pages held.
	ListBytes, TotalBytes, CatchUpBytes int64
	// OperationBytes bounds what open subscriptions keep of their
	// operations (kept.go), together; OperationShare is the share of it one
	// caller's may keep (above 0, at most 1).
	OperationBytes int64
	OperationShare float64
	// Origins may open WebSockets from a browser besides the gateway's
	// own: the CORS origins (https://app.example.com), or "*" for any.
	Origins []string
}

// DefaultSubscriptions are safe defaults.
var DefaultSubscriptions = Subscriptions{MaxLists: 10_000, PerConnection: 100, PerCaller: 1000,
	MaxSockets: 10_000, SocketsShare: 0.5, MaxPending: 1000, MaxPendingPerAddress: 20, InitTimeout: 3 * time.Second, MaxOperations: 16,
	BufferBytes: watch.Defaults.SubscriptionBytes, SlowTimeout: watch.Defaults.SlowAfter,
	ListBytes: watch.Defaults.ListBytes, TotalBytes: watch.Defaults.TotalBytes, CatchUpBytes: watch.Defaults.CatchUpBytes, CatchUpShare: 0.5,
	OperationBytes: 64 << 20, OperationShare: 0.5}

// withDefaults fills in the bounds left at zero.
func (s Subscriptions) withDefaults() Subscriptions {
	d := DefaultSubscriptions
	for _, f := range []struct{ v, d *int }{{&s.MaxLists, &d.MaxLists}, {&s.PerConnection, &d.PerConnection}, {&s.PerCaller, &d.PerCaller},
		{&s.MaxSockets, &d.MaxSockets}, {&s.MaxPending, &d.MaxPending}, {&s.MaxPendingPerAddress, &d.MaxPendingPerAddress}, {&s.MaxOperations, &d.MaxOperations}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if s.InitTimeout <= 0 {
		s.InitTimeout = d.InitTimeout
	}
	if s.OperationBytes <= 0 {
		s.OperationBytes = d.OperationBytes
	}
	for _, f := range []struct{ v, d *float64 }{{&s.SocketsShare, &d.SocketsShare}, {&s.CatchUpShare, &d.CatchUpShare}, {&s.OperationShare, &d.OperationShare}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
		*f.v = min(*f.v, 1)
	}
	return s
}

// protocol is the one WebSocket subprotocol served: graphql-transport-ws,
// of the graphql-ws library (GraphiQL, Apollo Client, urql).
const protocol = "graphql-transport-ws"

// Close codes of graphql-transport-ws, and the one for a full gateway.
const (
	closeInvalidMessage websocket.StatusCode = 4400
	closeUnauthorized   websocket.StatusCode = 4401
	closeForbidden      websocket.StatusCode = 4403
	closeInitTimeout    websocket.StatusCode = 4408
	closeDuplicateID    websocket.StatusCode = 4409
	closeTooManyInits   websocket.StatusCode = 4429
	closeTryAgainLater  websocket.StatusCode = 1013
	pingInterval                             = 15 * time.Second
	closeReasonMax                           = 123
)

// sockets serves graphql-transport-ws on the endpoint and holds what the
// WebSockets share: their slots, and the subscriptions open by caller.
type sockets struct {
	h       *Handler
	cfg     Subscriptions
	open    *pool.Pool     // a slot per WebSocket past its connection_init, each caller's share of them
	pending *pool.Pool     // a slot per WebSocket before it (pending.go), each client's share of them
	kept    *pool.Pool     // the bytes subscriptions keep of their operations (kept.go), each caller's share of them
	copies  *keptDocuments // the operations subscriptions run, copied without their text
	closing context.Context
	close   context.CancelFunc
	conns   sync.WaitGroup // WebSockets being served; added to by begin
	streams sync.WaitGroup // subscriptions whose last message is not written; added to by begin

	refused metric.Int64Counter // WebSockets and subscriptions refused, by reason

	mu       sync.Mutex
	byCaller map[string]int // open subscriptions by caller
	stopping bool           // shutdown has begun: conns and streams take no more
	waiting  *list.List     // of *pendingSocket, the oldest first (pending.go)
}

// begin counts one more WebSocket or subscription on wg, unless shutdown
// has begun: once shutdown waits on wg nothing may add to it (a WaitGroup
// whose Wait is returning must not be added to).
func (s *sockets) begin(wg *sync.WaitGroup) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	wg.Add(1)
	return true
}

func newSockets(cfg Subscriptions, meter metric.Meter) (*sockets, error) {
	refused, err := meter.Int64Counter("listgate.subscriptions.refused",
		metric.WithDescription("WebSockets and subscriptions refused at a bound of the gateway's, or while it shuts down, by reason."))
	if err != nil {
		return nil, err
	}
	for _, r := range []metric.AddOption{refusedWebSockets, refusedSocketsShare, refusedPending, refusedPendingAddr, refusedPerConnection,
		refusedPerCaller, refusedOperationBytes, refusedOperationShare, refusedWatchedLists, refusedShuttingDown, refusedClockSkew} {
		refused.Add(context.Background(), 0, r) // at zero from the start, each reason
	}
	closing, close := context.WithCancel(context.Background())
	return &sockets{cfg: cfg, open: pool.New(int64(cfg.MaxSockets), int64(cfg.SocketsShare*float64(cfg.MaxSockets))),
		pending: pool.New(int64(cfg.MaxPending), int64(cfg.MaxPendingPerAddress)),
		kept:    pool.New(cfg.OperationBytes, int64(cfg.OperationShare*float64(cfg.OperationBytes))), copies: newKeptDocuments(4096),
		closing: closing, close: close, refused: refused, byCaller: map[string]int{}, waiting: list.New()}, nil
}

// Why a WebSocket or a subscription is refused, as listgate_subscriptions_refused_total's reason.
var (
	refusedWebSockets     = reason("max_websockets")
	refusedSocketsShare   = reason("caller_max_websockets_share")
	refusedPending        = reason("max_pending_websockets")
	refusedPendingAddr    = reason("max_pending_websockets_per_address")
	refusedPerConnection  = reason("per_connection")
	refusedPerCaller      = reason("per_caller")
	refusedOperationBytes = reason("subscription_operation_bytes")
	refusedOperationShare = reason("caller_subscription_operation_bytes_share")
	refusedWatchedLists   = reason("max_watched_lists")
	refusedShuttingDown   = reason("shutting_down")
	refusedClockSkew      = reason("clock_skew")
)

func reason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}

// countRefusal counts a subscription the watch hub refused.
func (s *sockets) countRefusal(ctx context.Context, err error) {
	switch {
	case errors.Is(err, watch.ErrAtLimit):
		s.refused.Add(ctx, 1, refusedWatchedLists)
	case errors.Is(err, watch.ErrClosed):
		s.refused.Add(ctx, 1, refusedShuttingDown)
	case errors.Is(err, errkind.ClockSkew):
		s.refused.Add(ctx, 1, refusedClockSkew)
	}
}

// serve serves one WebSocket upgrade request, refusing it with an HTTP
// error while that can still be said: a Host or Origin not allowed, a
// shutting-down gateway, bad credentials, no graphql-transport-ws, or no
// slot for one more WebSocket.
func (s *sockets) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	refuse := func(status int, why metric.AddOption, err error) {
		if why != nil {
			s.refused.Add(ctx, 1, why)
		}
		w.Header()["Content-Type"] = contentTypes["application/json"]
		w.WriteHeader(status)
		writeResponse(w, s.h.exec.DispatchError(ctx, gqlerror.List{gqlerror.WrapPath(nil, err)}))
	}
	if err := s.h.hosts.check(r.Host); err != nil {
		refuse(http.StatusForbidden, nil, err)
		return
	}
	if origin := r.Header.Get("Origin"); !s.allowed(origin, r.Host) {
		refuse(http.StatusForbidden, nil, fmt.Errorf("%w: a page of origin %s may not open a WebSocket to this gateway: add it to --cors-origins", errkind.Forbidden, errkind.Quote(origin)))
		return
	}
	if s.closing.Err() != nil {
		refuse(http.StatusServiceUnavailable, refusedShuttingDown, fmt.Errorf("%w: the gateway is shutting down; connect to another replica", errkind.Refused))
		return
	}
	if !slices.Contains(offeredProtocols(r), protocol) {
		refuse(http.StatusBadRequest, nil, fmt.Errorf("%w: offer the %s subprotocol (Sec-WebSocket-Protocol: %s), as the graphql-ws library does", errkind.Malformed, protocol, protocol))
		return
	}
	a, status, why, err := s.admit(ctx, r)
	if err != nil {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="listgate"`)
		} else {
			w.Header().Set("Retry-After", "1")
		}
		refuse(status, why, err)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       []string{protocol},
		InsecureSkipVerify: true, // allowed checked the Origin, saying why
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		s.release(a) // Accept answered the request
		return
	}
	ws.SetReadLimit(s.h.limits.MaxBodyBytes + 4096) // a subscribe message's envelope around its payload
	if !s.begin(&s.conns) {
		s.release(a)
		s.refused.Add(ctx, 1, refusedShuttingDown)
		ws.Close(websocket.StatusGoingAway, "the gateway is shutting down; connect to another replica")
		return
	}
	defer s.conns.Done()
	c := &connection{s: s, ws: ws, principal: a.principal, addr: a.client, active: map[string]context.CancelFunc{}}
	c.serve(ctx, a)
}

// admission is what a WebSocket holds from its upgrade until its
// connection_init: a slot among those before it (pending), or, when the
// upgrade carried a valid Authorization, its principal, and its caller's
// slot of --max-websockets (open).
type admission struct {
	client    string // its address (clients.go)
	pending   *pendingSocket
	principal *auth.Principal
	caller    string
	open      *pool.Hold
}

// admit gives a WebSocket upgrade what it holds until its connection_init,
// or says why it gets nothing: the status, the reason and the error to
// refuse it with.
func (s *sockets) admit(ctx context.Context, r *http.Request) (admission, int, metric.AddOption, error) {
	a := admission{client: s.h.clients.of(r)}
	token := r.Header.Get("Authorization")
	if token == "" {
		// Said early, while HTTP can say it; connection_init takes the slot.
		if status, why, err := s.room(ctx, ""); err != nil {
			return a, status, why, err
		}
		p, status, why, err := s.takePending(ctx, a.client)
		a.pending = p
		return a, status, why, err
	}
	p, err := s.h.auth.Authenticate(token)
	if err != nil {
		return a, http.StatusUnauthorized, nil, err
	}
	// Authenticated already: it holds its caller's slot of --max-websockets
	// at once, and none of those kept for WebSockets before their
	// connection_init.
	a.principal, a.caller = p, callerName(p, a.client)
	slot, status, why, err := s.takeOpen(ctx, a.caller)
	a.open = slot
	return a, status, why, err
}

// release gives back what a WebSocket that will not be served holds.
func (s *sockets) release(a admission) {
	s.leavePending(a.pending)
	if a.open != nil {
		a.open.Release()
	}
}

// room says whether caller may open one more WebSocket (any caller, when
// caller is ""), or the status, the reason and the error to refuse it with:
// every slot of --max-websockets is held, or the caller holds its share.
func (s *sockets) room(ctx context.Context, caller string) (status int, why metric.AddOption, err error) {
	return s.refusal(ctx, caller, s.open.Available(caller, 1))
}

// takeOpen takes a slot of --max-websockets for an authenticated
// WebSocket, or says why it cannot, as room does.
func (s *sockets) takeOpen(ctx context.Context, caller string) (*pool.Hold, int, metric.AddOption, error) {
	slot, err := s.open.Take(caller, 1)
	status, why, err := s.refusal(ctx, caller, err)
	return slot, status, why, err
}

// refusal is the refusal of a WebSocket that found no room in the slots
// of --max-websockets (pool.ErrFull) or in its caller's share of them
// (pool.ErrShare), counted: a caller past its share is throttled, and
// another caller still finds room.
func (s *sockets) refusal(ctx context.Context, caller string, err error) (status int, why metric.AddOption, _ error) {
	switch {
	case errors.Is(err, pool.ErrFull):
		return http.StatusServiceUnavailable, refusedWebSockets,
			fmt.Errorf("%w: the gateway holds its limit of %d WebSockets (--max-websockets); retry", errkind.Refused, s.open.Size())
	case errors.Is(err, pool.ErrShare):
		s.h.callers.Shared(ctx, caller)
		return http.StatusTooManyRequests, refusedSocketsShare,
			fmt.Errorf("%w: this caller holds its share of WebSockets (--caller-max-websockets-share of --max-websockets, less while others hold the rest); retry", errkind.Throttled)
	}
	return 0, nil, nil
}

// offeredProtocols are the subprotocols a WebSocket upgrade offers.
func offeredProtocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			out = append(out, strings.TrimSpace(p))
		}
	}
	return out
}

// allowed reports whether a browser page of origin may open a WebSocket:
// one of the gateway's own origin (its Host passed the hosts check), or of
// --cors-origins. A request without an Origin comes from no browser page,
// which could carry a user's cookies to it; it is allowed.
func (s *sockets) allowed(origin, host string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	for _, o := range s.cfg.Origins {
		if o == "*" || strings.EqualFold(o, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

// acquireSubscription counts one more subscription of the connection and
// of its caller, or says which bound it passes.
func (s *sockets) acquireSubscription(ctx context.Context, c *connection) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case c.subs >= s.cfg.PerConnection:
		s.refused.Add(ctx, 1, refusedPerConnection)
		return nil, fmt.Errorf("%w: this connection has its limit of %d subscriptions open (--max-subscriptions-per-connection); end one, or open another connection", errkind.Invalid, s.cfg.PerConnection)
	case s.byCaller[c.caller] >= s.cfg.PerCaller:
		s.refused.Add(ctx, 1, refusedPerCaller)
		return nil, fmt.Errorf("%w: the caller has its limit of %d subscriptions open on this gateway (--max-subscriptions-per-caller); end one first", errkind.Invalid, s.cfg.PerCaller)
	}
	c.subs++
	s.byCaller[c.caller]++
	return func() {
		c.mu.Lock()
		c.subs--
		c.mu.Unlock()
		s.mu.Lock()
		if s.byCaller[c.caller]--; s.byCaller[c.caller] == 0 {
			delete(s.byCaller, c.caller)
		}
		s.mu.Unlock()
	}, nil
}

// shutdown ends every subscription (each gets its complete message), then
// closes the WebSockets, waiting for them until ctx ends.
func (s *sockets) shutdown(ctx context.Context, endWatches func()) {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	endWatches()
	wait(ctx, &s.streams)
	s.close()
	wait(ctx, &s.conns)
}

// wait waits for wg until ctx ends.
func wait(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// closeReason fits a close frame's reason in its 123 bytes.
func closeReason(reason string) string {
	if len(reason) > closeReasonMax {
		reason = strings.ToValidUTF8(reason[:closeReasonMax-3], "") + "…"
	}
	return reason
}
