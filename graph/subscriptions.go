package graph

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/watch"
)

// Subscriptions bound the WebSocket side of the gateway.
type Subscriptions struct {
	Poll          time.Duration // between two polls of a watched list
	Lateness      time.Duration // the lateness window of the delivery rule
	MaxLists      int           // lists one gateway watches at once
	PerConnection int           // subscriptions open on one connection
	PerCaller     int           // subscriptions open for one caller (API key or JWT subject)
	MaxSockets    int           // WebSocket connections open at once
	// Origins may open WebSockets from a browser besides the gateway's
	// own: the CORS origins (https://app.example.com), or "*" for any.
	Origins []string
}

// DefaultSubscriptions are safe defaults.
var DefaultSubscriptions = Subscriptions{Poll: time.Second, Lateness: 5 * time.Second, MaxLists: 10_000, PerConnection: 100, PerCaller: 1000, MaxSockets: 10_000}

// websockets serves subscriptions over WebSockets on the endpoint:
// gqlgen's transport, with authentication from connection_init, the
// Origin checked at the upgrade, pings, and bounds.
type websockets struct {
	e       *endpoint
	cfg     Subscriptions
	present graphql.ErrorPresenterFunc
	sockets chan struct{}   // a slot per open WebSocket
	closing context.Context // ends when the gateway shuts down
	close   context.CancelFunc
	open    sync.WaitGroup

	refused metric.Int64Counter // WebSockets and subscriptions refused, by reason

	mu       sync.Mutex
	byCaller map[string]int // open subscriptions by caller
	streams  sync.WaitGroup // subscriptions whose stream has not ended
}

func newWebsockets(cfg Subscriptions, present graphql.ErrorPresenterFunc, meter metric.Meter) (*websockets, error) {
	refused, err := meter.Int64Counter("listgate.subscriptions.refused",
		metric.WithDescription("WebSockets and subscriptions refused at a bound of the gateway's, or while it shuts down, by reason."))
	if err != nil {
		return nil, err
	}
	closing, close := context.WithCancel(context.Background())
	return &websockets{cfg: cfg, present: present, sockets: make(chan struct{}, max(cfg.MaxSockets, 1)),
		closing: closing, close: close, refused: refused, byCaller: map[string]int{}}, nil
}

// Why a WebSocket or a subscription is refused, as listgate_subscriptions_refused_total's reason.
var (
	refusedWebSockets    = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "max_websockets")))
	refusedPerConnection = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "per_connection")))
	refusedPerCaller     = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "per_caller")))
	refusedWatchedLists  = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "max_watched_lists")))
	refusedShuttingDown  = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "shutting_down")))
)

// countRefusal counts a subscription the watch hub refused.
func (ws *websockets) countRefusal(ctx context.Context, err error) {
	switch {
	case errors.Is(err, watch.ErrAtLimit):
		ws.refused.Add(ctx, 1, refusedWatchedLists)
	case errors.Is(err, watch.ErrClosed):
		ws.refused.Add(ctx, 1, refusedShuttingDown)
	}
}

// transport is gqlgen's WebSocket transport as the gateway runs it.
func (ws *websockets) transport() graphql.Transport {
	return wsTransport{ws.websocket(), ws.present}
}

// wsTransport is gqlgen's WebSocket transport with the errors of an
// operation that cannot start (scopes, limits) shown as every error is:
// gqlgen's transport sends those as they are, without their code.
type wsTransport struct {
	transport.Websocket
	present graphql.ErrorPresenterFunc
}

func (t wsTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	t.Websocket.Do(w, r, presenting{exec, t.present})
}

type presenting struct {
	graphql.GraphExecutor
	present graphql.ErrorPresenterFunc
}

func (e presenting) CreateOperationContext(ctx context.Context, params *graphql.RawParams) (*graphql.OperationContext, gqlerror.List) {
	oc, errs := e.GraphExecutor.CreateOperationContext(ctx, params)
	for i, err := range errs {
		errs[i] = e.present(ctx, err)
	}
	return oc, errs
}

func (ws *websockets) websocket() transport.Websocket {
	return transport.Websocket{
		// serve checks the Origin, with a clear error.
		Implementation:   transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{InsecureSkipVerify: true}},
		InitFunc:         ws.init,
		InitTimeout:      10 * time.Second,
		PingPongInterval: 15 * time.Second,
		// graphql-ws (the legacy protocol) has no pings of its own.
		KeepAlivePingInterval: 15 * time.Second,
	}
}

// serve serves one WebSocket upgrade request: no body limit, no deadline
// and no --max-in-flight slot, but a --max-websockets one, and the
// connection closes when the gateway shuts down.
func (ws *websockets) serve(w http.ResponseWriter, r *http.Request, req *request, ctx context.Context) {
	select {
	case ws.sockets <- struct{}{}:
		defer func() { <-ws.sockets }()
	default:
		ws.refused.Add(ctx, 1, refusedWebSockets)
		req.info.addCode(CodeUnavailable)
		w.Header().Set("Retry-After", "1")
		writeRequestError(w, http.StatusServiceUnavailable, CodeUnavailable,
			fmt.Sprintf("the gateway holds its limit of %d WebSockets (--max-websockets); retry", cap(ws.sockets)))
		return
	}
	if origin := r.Header.Get("Origin"); !ws.allowed(origin, r.Host) {
		req.info.addCode(CodeForbidden)
		writeRequestError(w, http.StatusForbidden, CodeForbidden,
			fmt.Sprintf("a page of origin %s may not open a WebSocket to this gateway: add it to --cors-origins", origin))
		return
	}
	if ws.closing.Err() != nil {
		ws.refused.Add(ctx, 1, refusedShuttingDown)
		req.info.addCode(CodeUnavailable)
		writeRequestError(w, http.StatusServiceUnavailable, CodeUnavailable, "the gateway is shutting down; connect to another replica")
		return
	}
	ws.open.Add(1)
	defer ws.open.Done()
	ctx, cancel := context.WithCancel(context.WithValue(ctx, connectionKey{}, &connection{}))
	defer cancel()
	stop := context.AfterFunc(ws.closing, cancel)
	defer stop()
	// The server's read and write timeouts, set on the connection for the
	// upgrade request, would cut the WebSocket; its pings watch it instead.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ws.e.gql.ServeHTTP(w, r.WithContext(ctx))
}

// allowed reports whether a browser page of origin may open a WebSocket:
// one of the gateway's own origin, or of --cors-origins. A request without
// an Origin comes from no browser page, which could carry a user's
// cookies to it; it is allowed.
func (ws *websockets) allowed(origin, host string) bool {
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
	for _, o := range ws.cfg.Origins {
		if o == "*" || strings.EqualFold(o, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	return false
}

// init authenticates a connection by the Authorization its
// connection_init payload carries (or, without one, by the upgrade
// request's header), as requests over HTTP are, and closes it with 4403
// when that fails. A connection authenticated by a JWT closes when the
// token expires.
func (ws *websockets) init(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	req := requestFrom(ctx)
	if token := payload.Authorization(); token != "" || req.principal == nil {
		p, err := ws.e.auth.Authenticate(token)
		if err != nil {
			req.info.addCode(CodeUnauthenticated)
			// The close frame's reason, at most 123 bytes, says why.
			reason := err.Error()
			if len(reason) > 123 {
				reason = strings.ToValidUTF8(reason[:120], "") + "…"
			}
			return transport.AppendCloseReason(transport.WithWebsocketCloseCode(ctx, 4403), reason), nil, err
		}
		req.principal = p
	}
	if exp := req.principal.Expires; !exp.IsZero() {
		ctx, cancel := context.WithDeadline(ctx, exp)
		context.AfterFunc(ctx, cancel)
		return ctx, nil, nil
	}
	return ctx, nil, nil
}

// connection is what one WebSocket connection counts.
type connection struct {
	mu   sync.Mutex
	subs int
}

type connectionKey struct{}

// subscriptionLimits bounds the subscriptions of one connection and of one
// caller, from the start of a subscription operation to the end of its
// stream.
type subscriptionLimits struct{ ws *websockets }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
} = subscriptionLimits{}

func (subscriptionLimits) ExtensionName() string                   { return "SubscriptionLimits" }
func (subscriptionLimits) Validate(graphql.ExecutableSchema) error { return nil }

func (l subscriptionLimits) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	release, err := l.ws.acquire(ctx)
	if err != nil {
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{l.ws.present(ctx, err)}})
	}
	respond := next(ctx)
	done := false
	return func(ctx context.Context) *graphql.Response {
		r := respond(ctx)
		if r == nil && !done {
			done = true
			release()
		}
		return r
	}
}

// acquire counts one more subscription of the connection and the caller,
// or says which bound it passes.
func (ws *websockets) acquire(ctx context.Context) (release func(), err error) {
	req := requestFrom(ctx)
	conn, _ := ctx.Value(connectionKey{}).(*connection)
	if req == nil || req.principal == nil || conn == nil {
		return nil, fmt.Errorf("%w: subscriptions are served over WebSockets (graphql-transport-ws) on this endpoint, not over HTTP", errkind.Malformed)
	}
	caller := req.principal.Name
	conn.mu.Lock()
	defer conn.mu.Unlock()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case conn.subs >= ws.cfg.PerConnection:
		ws.refused.Add(ctx, 1, refusedPerConnection)
		return nil, fmt.Errorf("%w: this connection has its limit of %d subscriptions open (--max-subscriptions-per-connection); end one, or open another connection", errkind.Invalid, ws.cfg.PerConnection)
	case ws.byCaller[caller] >= ws.cfg.PerCaller:
		ws.refused.Add(ctx, 1, refusedPerCaller)
		return nil, fmt.Errorf("%w: %s has its limit of %d subscriptions open on this gateway (--max-subscriptions-per-caller); end one first", errkind.Invalid, caller, ws.cfg.PerCaller)
	}
	conn.subs++
	ws.byCaller[caller]++
	ws.streams.Add(1)
	return func() {
		conn.mu.Lock()
		conn.subs--
		conn.mu.Unlock()
		ws.mu.Lock()
		if ws.byCaller[caller]--; ws.byCaller[caller] == 0 {
			delete(ws.byCaller, caller)
		}
		ws.mu.Unlock()
		ws.streams.Done()
	}, nil
}

// stream turns a watch into the items a subscription sends; an error that
// ends the watch ends the subscription with it, shown as every error is.
func (r *Resolver) stream(ctx context.Context, w *lists.Watch) <-chan model.ListItem {
	out := make(chan model.ListItem)
	go func() {
		defer close(out)
		for it := range w.Items {
			select {
			case out <- model.ItemOf(w.Feature, &it):
			case <-ctx.Done():
				return
			}
		}
		if err := w.Err(); err != nil {
			transport.AddSubscriptionError(ctx, r.present(ctx, err))
		}
	}()
	return out
}

// shutdown ends every subscription (each gets its complete message), then
// closes the WebSockets, waiting for them until ctx ends.
func (ws *websockets) shutdown(ctx context.Context, endWatches func()) {
	endWatches()
	ended := make(chan struct{})
	go func() { ws.streams.Wait(); close(ended) }()
	select {
	case <-ended:
		// The transport writes a stream's complete message once the stream
		// ends; give it the moment it takes.
		time.Sleep(50 * time.Millisecond)
	case <-ctx.Done():
	}
	ws.close()
	closed := make(chan struct{})
	go func() { ws.open.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
