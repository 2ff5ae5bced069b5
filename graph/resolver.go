// Package graph is the GraphQL edge of the gateway: the HTTP endpoint and
// its transports, authorization and the limits on what a request may ask,
// resolvers that hand each field to the lists service in one call, request
// telemetry, and the error presenter. The executable schema is generated
// into graph/exec.
package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph/exec"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// Limits bound what one request may ask for. Each has a safe default and
// a flag; going past one is a clear BAD_USER_INPUT error, and nothing runs.
type Limits struct {
	MaxListLimit     int   // largest `limit` of one list
	MaxEntities      int   // most entity ids in one `entities`
	MaxCount         int   // rows one listCount or listContains may look at
	MaxScanFactor    int   // rows a distinct page may look at, per item of its limit
	MaxValues        int   // values of one listContains or removeListItemsWithValues
	MaxBatchLists    int   // lists of one addListItemsBatch
	MaxDepth         int   // deepest nesting of fields
	MaxComplexity    int   // a list costs its fields times its limit; introspection its real lists
	MaxTokens        int   // tokens of one document
	MaxFields        int   // fields of one operation, fragments expanded
	MaxBodyBytes     int64 // largest request body
	MaxResponseBytes int   // list items one response may carry, in bytes
	MaxInFlight      int   // requests served at once; more are refused
	// MaxInFlightComplexity bounds the complexity of the operations running
	// at once; one that does not fit waits for room until its deadline.
	MaxInFlightComplexity int
	RequestTimeout        time.Duration // a request's deadline, passed down to every CQL statement
	QueryCacheBytes       int           // parsed documents kept, in estimated bytes
	APQCacheBytes         int           // automatic persisted queries kept, in bytes
}

// DefaultLimits are safe defaults that agree with each other: the most
// entities, each with a list of the default limit and every field, fit the
// complexity limit (TestDefaultLimitsAgree), and so does GraphiQL's
// introspection query.
var DefaultLimits = Limits{
	MaxListLimit: 1000, MaxEntities: 100, MaxCount: 100_000, MaxScanFactor: 10, MaxValues: 1000, MaxBatchLists: 1000,
	MaxDepth: 10, MaxComplexity: 100_000,
	MaxTokens: 20_000, MaxFields: 1000, MaxBodyBytes: 1 << 20, MaxResponseBytes: 32 << 20,
	MaxInFlight: 256, MaxInFlightComplexity: 300_000, RequestTimeout: 10 * time.Second, QueryCacheBytes: 64 << 20, APQCacheBytes: 16 << 20,
}

// Config is what the gateway is built from.
type Config struct {
	Store         store.Store
	Catalog       *features.Catalog
	Auth          *auth.Authenticator
	Loader        lists.LoaderConfig
	Limits        Limits
	Subscriptions Subscriptions
	Introspection bool
	Log           *slog.Logger
	// Telemetry; no-op providers when nil.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Now is the clock for default item timestamps; time.Now when nil.
	Now func() time.Time
}

// Resolver is the root resolver.
type Resolver struct {
	lists   *lists.Service
	present graphql.ErrorPresenterFunc
	ws      *websockets
}

// Handler is the GraphQL endpoint.
type Handler struct {
	*endpoint
	lists *lists.Service
}

// Shutdown ends every subscription (each gets its complete message) and
// closes the WebSockets, waiting for them until ctx ends. Requests over
// HTTP are the http.Server's to drain.
func (h *Handler) Shutdown(ctx context.Context) {
	h.ws.shutdown(ctx, h.lists.Close)
}

// NewHandler returns the GraphQL endpoint: POST and GET, subscriptions over
// WebSockets, with a parsed-query cache, automatic persisted queries,
// per-request loaders (package lists), and a span, metrics and a log line
// for every request.
func NewHandler(cfg Config) (*Handler, error) {
	return newHandler(cfg, post{})
}

// newHandler is NewHandler with a given POST transport (tests compare ours
// with gqlgen's).
func newHandler(cfg Config, postTransport graphql.Transport) (*Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = tracenoop.NewTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = metricnoop.NewMeterProvider()
	}
	tracer := cfg.TracerProvider.Tracer("github.com/listgate/listgate/graph")
	meter := cfg.MeterProvider.Meter("github.com/listgate/listgate/graph")
	requests, err := newRequestObserver(meter, cfg.Log)
	if err != nil {
		return nil, err
	}
	onPanic := recoverPanic(cfg.Log, requests.panics)
	var loaderTracer trace.Tracer
	_, tracingOff := cfg.TracerProvider.(tracenoop.TracerProvider)
	if !tracingOff {
		loaderTracer = tracer // a span per batch: its keys are formatted only then
	}
	svc, err := lists.New(lists.Config{
		Tracer: loaderTracer,
		Store:  cfg.Store, Catalog: cfg.Catalog, Loader: cfg.Loader, Now: cfg.Now, Meter: meter, OnPanic: onPanic,
		Watch: watch.Config{Interval: cfg.Subscriptions.Poll, Lateness: cfg.Subscriptions.Lateness, MaxLists: cfg.Subscriptions.MaxLists,
			MaxCatchUp: cfg.Limits.MaxCount, Log: cfg.Log},
		Limits: lists.Limits{
			MaxListLimit: cfg.Limits.MaxListLimit, MaxEntities: cfg.Limits.MaxEntities, MaxResponseBytes: cfg.Limits.MaxResponseBytes,
			MaxCount: cfg.Limits.MaxCount, MaxScanFactor: cfg.Limits.MaxScanFactor, MaxValues: cfg.Limits.MaxValues, MaxBatchLists: cfg.Limits.MaxBatchLists,
		},
	})
	if err != nil {
		return nil, err
	}
	sub := &cfg.Subscriptions
	for _, f := range []struct{ v, d *int }{{&sub.MaxLists, &DefaultSubscriptions.MaxLists}, {&sub.PerConnection, &DefaultSubscriptions.PerConnection},
		{&sub.PerCaller, &DefaultSubscriptions.PerCaller}, {&sub.MaxSockets, &DefaultSubscriptions.MaxSockets}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if sub.Poll <= 0 {
		sub.Poll = DefaultSubscriptions.Poll
	}
	present := errorPresenter(cfg.Log)
	ws, err := newWebsockets(cfg.Subscriptions, present, meter)
	if err != nil {
		return nil, err
	}
	r := &Resolver{lists: svc, present: present, ws: ws}
	srv := handler.New(exec.NewExecutableSchema(exec.Config{Resolvers: r}))
	srv.AddTransport(ws.transport())
	srv.AddTransport(get{})
	srv.AddTransport(postTransport)
	srv.AddTransport(unsupported{})
	srv.SetValidationRulesFn(validationRules)
	srv.SetParserTokenLimit(cfg.Limits.MaxTokens)
	documents := newDocumentCache(cfg.Limits.QueryCacheBytes)
	srv.SetQueryCache(documents)
	if cfg.Introspection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(extension.AutomaticPersistedQuery{Cache: newAPQCache(cfg.Limits.APQCacheBytes)})
	// Before a new document is parsed and validated: how big.
	srv.Use(documentLimits{maxTokens: cfg.Limits.MaxTokens, maxFields: cfg.Limits.MaxFields, cache: documents})
	// Before anything runs: who may, how deep, how much.
	srv.Use(&authorization{introspection: cfg.Introspection})
	srv.Use(depthLimit{cfg.Limits.MaxDepth})
	srv.Use(&complexityLimit{max: cfg.Limits.MaxComplexity, inFlight: newCostBudget(int64(max(cfg.Limits.MaxInFlightComplexity, cfg.Limits.MaxComplexity))), lists: svc, measured: newMeasuredOps(4096)})
	srv.Use(checkMutationsFirst{})
	srv.Use(subscriptionLimits{ws})
	srv.Use(operationTracing{tracer})
	if !tracingOff {
		// Every field of every item passes this interceptor; add it only
		// when spans are recorded.
		srv.Use(resolverTracing{tracer})
	}
	srv.SetErrorPresenter(present)
	srv.SetRecoverFunc(onPanic)
	if cfg.Auth == nil {
		if cfg.Auth, err = auth.New(auth.Config{}); err != nil {
			return nil, err
		}
	}
	e := &endpoint{gql: srv, requests: requests, auth: cfg.Auth, limits: cfg.Limits, ws: ws,
		inFlight: make(chan struct{}, cfg.Limits.MaxInFlight)}
	ws.e = e
	return &Handler{endpoint: e, lists: svc}, nil
}

// endpoint authenticates every request and gives it its state and its
// deadline, then counts, times and logs it.
type endpoint struct {
	gql      http.Handler
	requests *requestObserver
	auth     *auth.Authenticator
	limits   Limits
	inFlight chan struct{} // a slot per request being served
	ws       *websockets
}

// request is what one GraphQL request carries in its context: its caller,
// and what it learns about itself (for its log line and metrics). The
// lists service keeps its own per-request state (loader, byte budget).
type request struct {
	principal *auth.Principal
	info      requestInfo
	// release returns the operation's share of the complexity budget.
	release func()
}

func principalFrom(ctx context.Context) *auth.Principal {
	if r := requestFrom(ctx); r != nil {
		return r.principal
	}
	return nil
}

type requestKey struct{}

func requestFrom(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// unauthenticated answers a request whose credentials were refused.
func unauthenticated(w http.ResponseWriter, req *request, err error) {
	req.info.addCode(CodeUnauthenticated)
	w.Header().Set("WWW-Authenticate", `Bearer realm="listgate"`)
	writeRequestError(w, http.StatusUnauthorized, CodeUnauthenticated, err.Error())
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := &request{}
	ctx := lists.WithRequest(context.WithValue(r.Context(), requestKey{}, req))
	defer func() {
		if req.release != nil {
			req.release()
		}
		req.info.canceled = errors.Is(r.Context().Err(), context.Canceled)
		e.requests.done(ctx, &req.info, time.Since(start))
	}()
	if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" {
		// A CORS preflight that --cors-origins did not answer.
		req.info.addCode(CodeForbidden)
		writeRequestError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf(
			"a browser page of origin %s may not call this gateway: add the origin to --cors-origins", strconv.Quote(r.Header.Get("Origin"))))
		return
	}
	if isWebSocket(r) {
		// Authenticated by its connection_init, unless its request carries
		// a token; served for as long as it stays open.
		if h := r.Header.Get("Authorization"); h != "" {
			p, err := e.auth.Authenticate(h)
			if err != nil {
				unauthenticated(w, req, err)
				return
			}
			req.principal = p
		}
		e.ws.serve(w, r, req, ctx)
		return
	}
	select {
	case e.inFlight <- struct{}{}:
		defer func() { <-e.inFlight }()
	default:
		// Full: refuse at once rather than queue, so that memory and
		// latency stay bounded; the client retries, on another replica
		// behind a load balancer.
		e.requests.refused.Add(ctx, 1)
		req.info.addCode(CodeUnavailable)
		w.Header().Set("Retry-After", "1")
		writeRequestError(w, http.StatusServiceUnavailable, CodeUnavailable,
			fmt.Sprintf("the gateway is serving its limit of %d requests (--max-in-flight); retry", cap(e.inFlight)))
		return
	}
	p, err := e.auth.Authenticate(r.Header.Get("Authorization"))
	if err != nil {
		unauthenticated(w, req, err)
		return
	}
	req.principal = p
	if r.ContentLength > e.limits.MaxBodyBytes {
		req.info.addCode(CodeBadUserInput)
		writeRequestError(w, http.StatusRequestEntityTooLarge, CodeBadUserInput, bodyTooLarge(e.limits.MaxBodyBytes))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, e.limits.MaxBodyBytes)
	ctx, cancel := context.WithTimeout(ctx, e.limits.RequestTimeout)
	defer cancel()
	e.gql.ServeHTTP(w, r.WithContext(ctx))
}

func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("request body larger than %d bytes (--max-body-bytes)", limit)
}

// writeRequestError answers a request refused before GraphQL saw it.
func writeRequestError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"errors": []map[string]any{{"message": message, "extensions": map[string]string{"code": code}}}})
	w.Write(b)
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
