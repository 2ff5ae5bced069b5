// Package endpoint is the GraphQL endpoint of the gateway, /graphql: it
// admits each operation, whatever carries it (a POST, a GET, or a message
// on a WebSocket), gives it its own state (package operation), its
// deadline and its slot of --max-in-flight, runs it through the guards and
// the resolvers, answers it, and logs and counts it. It also decides what
// a client sees of an error (errors.go). It never reads or writes a list
// itself.
package endpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph"
	"github.com/listgate/listgate/guards"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// Limits bound what one operation may ask for. Each has a safe default and
// a flag; going past one is a clear error, and nothing runs.
type Limits struct {
	MaxListLimit     int   // largest `limit` of one list
	MaxEntities      int   // most entity ids in one `entities`
	MaxCount         int   // rows one listCount or listContains may look at
	MaxScanFactor    int   // rows a distinct page may look at, per item of its limit
	MaxValues        int   // values of one listContains or removeListItemsWithValues
	MaxBuckets       int   // buckets of one listHistogram; 0: the default
	MaxBatchLists    int   // lists of one addListItemsBatch
	MaxDepth         int   // deepest nesting of fields
	MaxComplexity    int   // a list costs its fields times its limit (listFeatures times the features it may return); introspection its real lists
	MaxTokens        int   // tokens of one document
	MaxFields        int   // fields of one operation, fragments expanded
	MaxBodyBytes     int64 // largest request body, or subscribe message
	MaxResponseBytes int   // list items, features and errors one response may carry, in bytes
	MaxInFlight      int   // queries and mutations served at once; more over HTTP are refused, a subscribe message waits
	// MaxInFlightComplexity bounds the complexity of the operations running
	// at once; one that does not fit waits for room until its deadline.
	MaxInFlightComplexity int
	// MaxInFlightResponseBytes bounds the bytes of the answers being built
	// and written at once (at least MaxResponseBytes): a page waits for
	// room until its deadline, an answer past its reads is refused.
	MaxInFlightResponseBytes int64
	RequestTimeout           time.Duration // a query's or mutation's deadline, passed down to every CQL statement
	// CallerCostRate and CallerCostBurst are each caller's budget of
	// complexity points on this gateway, a second and at once (rate 0: no
	// budget); a caller's API key or JWT may name its own.
	CallerCostRate, CallerCostBurst float64
	// CallerInFlightShare is the share of MaxInFlight, of
	// MaxInFlightComplexity and of MaxInFlightResponseBytes one caller's
	// operations may hold (0 or 1: all).
	CallerInFlightShare float64
	QueryCacheBytes     int // parsed documents kept, in estimated bytes
	APQCacheBytes       int // automatic persisted queries kept, in bytes
}

// DefaultLimits are safe defaults that agree with each other: the most
// entities, each with a list of the default limit and every field, fit the
// complexity limit (TestDefaultLimitsAgree), and so does GraphiQL's
// introspection query.
var DefaultLimits = Limits{
	MaxListLimit: 1000, MaxEntities: 100, MaxCount: 100_000, MaxScanFactor: 10, MaxValues: 1000, MaxBuckets: 1440, MaxBatchLists: 1000,
	MaxDepth: 10, MaxComplexity: 100_000,
	MaxTokens: 20_000, MaxFields: 1000, MaxBodyBytes: 1 << 20, MaxResponseBytes: 32 << 20,
	MaxInFlight: 256, MaxInFlightComplexity: 300_000, MaxInFlightResponseBytes: 256 << 20, RequestTimeout: 10 * time.Second, QueryCacheBytes: 64 << 20, APQCacheBytes: 16 << 20,
	CallerCostRate: 500_000, CallerCostBurst: 1_000_000, CallerInFlightShare: 0.5,
}

// Config is what the endpoint is built from.
type Config struct {
	Store         store.Store
	Catalog       *features.Catalog
	Auth          *auth.Authenticator // nil: nobody authenticates, every caller has every scope
	Loader        lists.LoaderConfig
	Limits        Limits
	Subscriptions Subscriptions
	Introspection bool
	// GQLGenOnly has gqlgen make every operation (--compiled-documents=
	// false); else the requests of documents seen before are made by
	// their plans (compiled.go).
	GQLGenOnly bool
	// Documents are the trusted documents (nil: none; documentId is
	// refused).
	Documents *documents.Trusted
	// Hosts are the names the endpoint answers for besides loopback ones
	// (Host headers; "*": any). Without authentication, a request for
	// another host is refused, so that a web page cannot reach a gateway
	// on a developer's machine through DNS rebinding.
	Hosts []string
	// TrustedProxies are the proxies and load balancers in front of the
	// endpoint, whose X-Forwarded-For names a client that has not
	// authenticated (clients.go); none: a request's peer is its client.
	TrustedProxies []netip.Prefix
	Log            *slog.Logger
	// Telemetry; no-op providers when nil.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Now is the clock for default item timestamps; time.Now when nil.
	Now func() time.Time
}

// Handler is the GraphQL endpoint.
type Handler struct {
	exec     *executor.Executor
	lists    *lists.Service
	auth     *auth.Authenticator
	limits   Limits
	hosts    hosts
	clients  clientAddresses
	inFlight *pool.Pool // the slots of --max-in-flight, each caller's share of them
	callers  *guards.Callers
	docs     *documents.Trusted
	observer *observer
	sockets  *sockets
	plans    *plans // nil: --compiled-documents=false
	// mutators are the extensions that meet an operation's context, in
	// the executor's order: what a compiled operation meets.
	mutators []graphql.OperationContextMutator
}

// New returns the endpoint: POST and GET, and graphql-transport-ws on
// WebSockets, with a parsed-query cache, automatic persisted queries, the
// guards, per-operation loaders (package lists), and a span, metrics and a
// log line for every operation.
func New(cfg Config) (*Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = tracenoop.NewTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = metricnoop.NewMeterProvider()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var err error
	if cfg.Auth == nil {
		if cfg.Auth, err = auth.New(auth.Config{}); err != nil {
			return nil, err
		}
	}
	tracer := cfg.TracerProvider.Tracer("github.com/listgate/listgate/endpoint")
	meter := cfg.MeterProvider.Meter("github.com/listgate/listgate/endpoint")
	obs, err := newObserver(meter, cfg.Log)
	if err != nil {
		return nil, err
	}
	onPanic := recoverPanic(cfg.Log, obs.panics)
	var loaderTracer trace.Tracer
	_, tracingOff := cfg.TracerProvider.(tracenoop.TracerProvider)
	if !tracingOff {
		loaderTracer = tracer // a span per batch: its keys are formatted only then
	}
	subs := cfg.Subscriptions.withDefaults()
	share := cfg.Limits.CallerInFlightShare
	if share <= 0 || share > 1 {
		share = 1
	}
	answers, err := newAnswers(cfg.Limits, share, meter)
	if err != nil {
		return nil, err
	}
	svc, err := lists.New(lists.Config{Answers: answers,
		Tracer: loaderTracer,
		Store:  cfg.Store, Catalog: cfg.Catalog, Loader: cfg.Loader, Now: cfg.Now, Meter: meter, OnPanic: onPanic, Log: cfg.Log,
		Watch: watch.Config{MaxLists: subs.MaxLists, MaxCatchUp: cfg.Limits.MaxCount,
			SubscriptionBytes: subs.BufferBytes, SlowAfter: subs.SlowTimeout, ReadTimeout: cfg.Limits.RequestTimeout,
			ListBytes: subs.ListBytes, TotalBytes: subs.TotalBytes, CatchUpBytes: subs.CatchUpBytes, CatchUpShare: subs.CatchUpShare},
		Limits: lists.Limits{
			MaxListLimit: cfg.Limits.MaxListLimit, MaxEntities: cfg.Limits.MaxEntities, MaxResponseBytes: cfg.Limits.MaxResponseBytes,
			MaxCount: cfg.Limits.MaxCount, MaxScanFactor: cfg.Limits.MaxScanFactor, MaxValues: cfg.Limits.MaxValues, MaxBatchLists: cfg.Limits.MaxBatchLists,
			MaxBuckets: cmp.Or(cfg.Limits.MaxBuckets, DefaultLimits.MaxBuckets),
		},
	})
	if err != nil {
		return nil, err
	}
	socks, err := newSockets(subs, meter)
	if err != nil {
		return nil, err
	}
	budget, err := guards.NewBudget(int64(max(cfg.Limits.MaxInFlightComplexity, cfg.Limits.MaxComplexity)), share, meter)
	if err != nil {
		return nil, err
	}
	callers, err := guards.NewCallers(cfg.Limits.CallerCostRate, max(cfg.Limits.CallerCostBurst, float64(cfg.Limits.MaxComplexity)), cfg.Now, meter)
	if err != nil {
		return nil, err
	}
	callers.AtZero(cfg.Auth.Callers())

	inFlight, err := newSlots(max(cfg.Limits.MaxInFlight, 1), max(1, int(share*float64(max(cfg.Limits.MaxInFlight, 1)))), meter)
	if err != nil {
		return nil, err
	}

	x := executor.New(graph.NewExecutableSchema(svc))
	x.SetDefaultRulesFn(guards.ValidationRules)
	installed := &recording{setup: x}
	extensions{cfg: cfg, lists: svc, budget: budget, callers: callers, tracer: tracer, spans: !tracingOff,
		present: errorPresenter(cfg.Log, socks.countRefusal, svc), recover: onPanic}.install(installed)
	h := &Handler{exec: x, lists: svc, auth: cfg.Auth, limits: cfg.Limits, hosts: newHosts(cfg.Hosts, !cfg.Auth.Configured()),
		clients:  clientAddresses{proxies: cfg.TrustedProxies},
		inFlight: inFlight, callers: callers, docs: cfg.Documents, observer: obs, sockets: socks, mutators: installed.mutators}
	if !cfg.GQLGenOnly {
		// A plan holds its document: a quarter of what the parsed
		// documents may hold.
		h.plans = newPlans(cfg.Limits.QueryCacheBytes / 4)
	}
	socks.h = h
	return h, nil
}

// Shutdown ends every subscription (each gets its complete message) and
// closes the WebSockets, waiting for them until ctx ends. Requests over
// HTTP are the http.Server's to drain.
func (h *Handler) Shutdown(ctx context.Context) {
	h.sockets.shutdown(ctx, h.lists.Close)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isWebSocket(r) {
		h.sockets.serve(w, r)
		return
	}
	op := operation.New(transportOf(r), time.Now())
	ctx := operation.With(graphql.StartOperationTrace(r.Context()), op)
	ctx, cancel := context.WithDeadline(ctx, op.Start.Add(h.limits.RequestTimeout))
	defer cancel()
	defer h.end(ctx, w, r, op)
	contentType := responseContentType(r)
	w.Header()["Content-Type"] = contentTypes[contentType]
	if status, err := h.serveHTTP(ctx, w, r, op, contentType); err != nil {
		if w.Header().Get("RateLimit") == "" {
			h.rateLimitHeaders(w, op)
		}
		w.WriteHeader(status)
		writeResponse(w, withCost(h.exec.DispatchError(ctx, gqlerror.List{gqlerror.WrapPath(nil, err)}), op, h.callers))
	}
}

// end ends an operation over HTTP once its answer is written: a panic that
// reached it is answered INTERNAL, what it holds is given back, and it is
// logged and counted.
func (h *Handler) end(ctx context.Context, w http.ResponseWriter, r *http.Request, op *operation.Operation) {
	if p := recover(); p != nil {
		w.WriteHeader(http.StatusInternalServerError)
		writeResponse(w, withCost(&graphql.Response{Errors: gqlerror.List{h.exec.PresentRecoveredError(ctx, p).(*gqlerror.Error)}}, op, h.callers))
	}
	if errors.Is(r.Context().Err(), context.Canceled) {
		op.Canceled()
	}
	op.End()
	lists.Answered(ctx) // written, or never will be
	h.observer.done(ctx, op)
}

// serveHTTP serves one operation over HTTP, or returns the status and the
// error to refuse it with.
func (h *Handler) serveHTTP(ctx context.Context, w http.ResponseWriter, r *http.Request, op *operation.Operation, contentType string) (int, error) {
	if err := h.hosts.check(r.Host); err != nil {
		return http.StatusForbidden, err
	}
	if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" {
		// A CORS preflight that --cors-origins did not answer.
		return http.StatusForbidden, fmt.Errorf("%w: a browser page of origin %s may not call this gateway: add the origin to --cors-origins", errkind.Forbidden, errkind.Quote(r.Header.Get("Origin")))
	}
	p, err := h.auth.Authenticate(r.Header.Get("Authorization"))
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="listgate"`)
		return http.StatusUnauthorized, err
	}
	op.Principal, op.Caller = p, h.callerOf(p, r)
	req, status, err := h.readParams(w, r, op)
	if err != nil {
		return status, err
	}
	defer recycle(req)
	op.AskedCost = req.params.Extensions["cost"] == true
	if q, err := h.callers.Blocked(ctx, op.Caller, p); err != nil {
		// Refused before its document is parsed: a client that retries
		// at once costs the gateway little.
		op.Quota = q
		w.Header().Set("Retry-After", strconv.FormatInt(q.RetrySeconds(), 10))
		return http.StatusTooManyRequests, err
	}
	slot, err := h.admit(ctx, op.Caller)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		if errors.Is(err, errkind.Throttled) {
			return http.StatusTooManyRequests, err
		}
		return http.StatusServiceUnavailable, err
	}
	defer slot.Release()
	if err := h.resolveDocument(ctx, op, req.params, req.documentID); err != nil {
		status := http.StatusOK
		if contentType == graphQLResponseJSON {
			status = http.StatusBadRequest
		}
		return status, err
	}
	req.params.Headers = r.Header
	req.params.ReadTime = graphql.TraceTiming{Start: graphql.GetStartTime(ctx), End: graphql.Now()}
	ctx, rc, errs := h.operationContext(ctx, op, req)
	h.rateLimitHeaders(w, op)
	if errs != nil {
		status := operationErrorStatus(errs, contentType)
		resp := withCost(h.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs), op, h.callers)
		switch {
		case op.Quota.Throttled > 0:
			w.Header().Set("Retry-After", strconv.FormatInt(op.Quota.RetrySeconds(), 10))
			status = http.StatusTooManyRequests
		case unserved(resp, contentType):
			w.Header().Set("Retry-After", "1")
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		writeResponse(w, resp)
		return 0, nil
	}
	switch {
	case op.Transport == operation.GET && rc.Operation.Operation != ast.Query:
		// 405, as the GraphQL-over-HTTP draft says of a mutation by GET.
		w.Header().Set("Allow", "POST")
		return http.StatusMethodNotAllowed, fmt.Errorf("%w: a GET runs queries only; send a %s with POST, Content-Type: application/json", errkind.Malformed, rc.Operation.Operation)
	case rc.Operation.Operation == ast.Subscription:
		return http.StatusBadRequest, fmt.Errorf("%w: subscriptions are served over WebSockets (graphql-transport-ws) on this endpoint, not over HTTP", errkind.Malformed)
	}
	responses, ctx := h.exec.DispatchOperation(ctx, rc)
	resp := responses(ctx)
	// The answer is made: a client that reads it slowly, or not at all,
	// holds its bytes of answers until the write ends (Handler.end), but
	// no slot of --max-in-flight and no complexity.
	slot.Release()
	op.End()
	writeResult(w, ctx, resp, contentType, h.exec, op, h.callers)
	return 0, nil
}

// readParams reads an HTTP request's GraphQL parameters: a POST's body, by
// its deadline, or a GET's query string. Give them back with recycle.
func (h *Handler) readParams(w http.ResponseWriter, r *http.Request, op *operation.Operation) (req *request, status int, err error) {
	switch op.Transport {
	case operation.POST:
		body, status, err := readBody(w, r, h.limits.MaxBodyBytes, op.Start.Add(h.limits.RequestTimeout))
		if err != nil {
			return nil, status, err
		}
		req = requests.Get().(*request)
		if err := h.decodeRequest("request body", body, req); err != nil {
			recycle(req)
			return nil, http.StatusBadRequest, err
		}
		return req, 0, nil
	case operation.GET:
		req = requests.Get().(*request)
		if err := getParams(r, req, h.plans != nil); err != nil {
			recycle(req)
			return nil, http.StatusBadRequest, err
		}
		return req, 0, nil
	}
	status, err = unsupported(w, r)
	return nil, status, err
}

// decodeRequest reads a POST's body, or a subscribe message's payload
// (what says which): split, when documents are compiled and it splits,
// else decoded whole.
func (h *Handler) decodeRequest(what string, body []byte, req *request) (err error) {
	if h.plans != nil && split(body, req) {
		return nil
	}
	*req.params = graphql.RawParams{}
	req.variables, req.compilable = nil, false
	req.documentID, err = decodeParams(what, body, req.params)
	return err
}

// requests keep the parameters of requests, whose operations give them
// back when they end.
var requests = sync.Pool{New: func() any { return &request{params: new(graphql.RawParams)} }}

// recycle gives back the parameters of a request, once it is answered.
func recycle(req *request) {
	*req.params = graphql.RawParams{}
	*req = request{params: req.params}
	requests.Put(req)
}

// resolveDocument puts in params the text of the trusted document the
// request names by documentId or by its APQ hash, and checks its own text
// against the trusted documents as --trusted-documents-mode says.
func (h *Handler) resolveDocument(ctx context.Context, op *operation.Operation, params *graphql.RawParams, documentID string) error {
	if h.docs == nil {
		if documentID != "" {
			return fmt.Errorf("%w documentId %s: this gateway has no trusted documents (--trusted-documents)", errkind.Invalid, errkind.Quote(documentID))
		}
		return nil
	}
	var hash string
	if pq, ok := params.Extensions["persistedQuery"].(map[string]any); ok {
		hash, _ = pq["sha256Hash"].(string)
	}
	query, found, err := h.docs.Resolve(ctx, documents.Request{DocumentID: documentID, APQHash: hash, Query: params.Query,
		OperationName: params.OperationName, AnyAllowed: op.Principal != nil && op.Principal.Has(auth.DocumentsAny)})
	if found {
		params.Query = query
	}
	return err
}

// rateLimitHeaders tell a caller its cost budget, as the IETF draft
// "RateLimit header fields for HTTP" has them: the policy (the bucket's
// size, and the seconds to fill it), and what is left, with the seconds
// until it is full again.
func (h *Handler) rateLimitHeaders(w http.ResponseWriter, op *operation.Operation) {
	q := quotaOf(op, h.callers)
	if q.Off() {
		return
	}
	// Appended, and set under their canonical names, as Header.Set would:
	// every answer of a caller with a budget carries them.
	var b [96]byte
	policy := strconv.AppendInt(append(b[:0], `"cost";q=`...), q.Limit, 10)
	policy = strconv.AppendInt(append(policy, ";w="...), max(1, int64(q.Window.Seconds()+0.5)), 10)
	left := len(policy)
	state := strconv.AppendInt(append(policy, `"cost";r=`...), q.Remaining, 10)
	state = strconv.AppendInt(append(state, ";t="...), int64(q.Reset.Seconds()+0.999), 10)
	both := string(state) // one string for the two
	w.Header()["Ratelimit-Policy"] = []string{both[:left]}
	w.Header()["Ratelimit"] = []string{both[left:]}
}

// quotaOf is op's caller's budget as the operation found it, or, for one
// refused before it was charged, as it stands; Off when no budget applies
// or the caller is not known.
func quotaOf(op *operation.Operation, callers *guards.Callers) operation.Quota {
	if op.Caller == "" || !op.Quota.Off() {
		return op.Quota
	}
	return callers.Peek(op.Caller, op.Principal)
}

// costOf is extensions.cost when the request asked for it (extensions:
// {"cost": true}): the operation's cost (for one refused before it was
// measured, that of its caller's last refused one, or 0), and its caller's
// budget after it; nil when not asked, or no budget applies.
func costOf(op *operation.Operation, callers *guards.Callers) map[string]any {
	if op == nil || !op.AskedCost {
		return nil
	}
	q := quotaOf(op, callers)
	if q.Off() {
		return nil
	}
	return map[string]any{"requested": q.Requested, "limit": q.Limit, "remaining": q.Remaining, "resetSeconds": int64(q.Reset.Seconds() + 0.999)}
}

// withCost adds extensions.cost to a response when the request asked for
// it.
func withCost(resp *graphql.Response, op *operation.Operation, callers *guards.Callers) *graphql.Response {
	cost := costOf(op, callers)
	if resp == nil || cost == nil {
		return resp
	}
	if resp.Extensions == nil {
		resp.Extensions = map[string]any{}
	}
	resp.Extensions["cost"] = cost
	return resp
}

// callerOf names the caller of a request: its principal, namespaced by
// kind, or its client's address when nobody authenticates.
func (h *Handler) callerOf(p *auth.Principal, r *http.Request) string {
	return callerName(p, h.clients.of(r))
}

// callerName names the caller of principal p from client: p's name, or
// the client's address when nobody authenticates.
func callerName(p *auth.Principal, client string) string {
	if p.Caller != "" {
		return p.Caller
	}
	return "addr:" + client
}

// setup is what gqlgen's executor takes to serve: the endpoint's own, and
// gqlgen's handler.Server, which tests compare it with.
type setup interface {
	Use(graphql.HandlerExtension)
	SetQueryCache(graphql.Cache[*ast.QueryDocument])
	SetErrorPresenter(graphql.ErrorPresenterFunc)
	SetRecoverFunc(graphql.RecoverFunc)
	SetParserTokenLimit(int)
}

// extensions are what runs around every operation.
type extensions struct {
	cfg     Config
	lists   *lists.Service
	budget  *guards.Budget
	callers *guards.Callers
	tracer  trace.Tracer
	spans   bool // resolver spans, when spans are recorded
	present graphql.ErrorPresenterFunc
	recover graphql.RecoverFunc
}

// install adds every extension, in the order an operation meets them.
func (e extensions) install(s setup) {
	s.SetParserTokenLimit(e.cfg.Limits.MaxTokens)
	documents := guards.NewDocumentCache(e.cfg.Limits.QueryCacheBytes)
	s.SetQueryCache(documents)
	if e.cfg.Introspection {
		s.Use(extension.Introspection{})
	}
	s.Use(extension.AutomaticPersistedQuery{Cache: guards.NewAPQCache(e.cfg.Limits.APQCacheBytes)})
	// Before a new document is parsed and validated: how big.
	s.Use(guards.DocumentLimits(e.cfg.Limits.MaxTokens, e.cfg.Limits.MaxFields, documents))
	// Before anything runs: who may, what shape, how much.
	s.Use(guards.Scopes(e.cfg.Introspection))
	s.Use(guards.Depth(e.cfg.Limits.MaxDepth))
	s.Use(guards.OneStream())
	s.Use(guards.Complexity(e.cfg.Limits.MaxComplexity, e.budget, e.callers, e.lists))
	s.Use(costExtension{e.callers})
	s.Use(responseBound{e.lists, e.callers})
	s.Use(guards.CheckMutationsFirst())
	s.Use(operationTracing{e.tracer})
	if e.spans {
		// Every field of every item passes this interceptor; add it only
		// when spans are recorded.
		s.Use(resolverTracing{e.tracer})
	}
	s.SetErrorPresenter(e.present)
	s.SetRecoverFunc(e.recover)
}

// costExtension adds extensions.cost to the answer of an operation that
// asked for it.
type costExtension struct{ callers *guards.Callers }

var _ interface {
	graphql.HandlerExtension
	graphql.ResponseInterceptor
} = costExtension{}

func (costExtension) ExtensionName() string                   { return "Cost" }
func (costExtension) Validate(graphql.ExecutableSchema) error { return nil }
func (c costExtension) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	return withCost(next(ctx), operation.From(ctx), c.callers)
}
