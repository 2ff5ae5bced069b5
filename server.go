// Command listgate is a GraphQL gateway for the list features of a feature
// store on ScyllaDB or Cassandra, or, with no cluster configured, on an
// embedded Pebble store.
package main

//go:generate go run ./graph/fastpath

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/cors"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/documents"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/playground"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.As(err, new(loggedError)) {
			fmt.Fprintln(os.Stderr, "listgate:", err)
		}
		os.Exit(1)
	}
}

// loggedError is an error run has written to a JSON log already: the
// process's output stays one stream of JSON.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// run serves until ctx ends, then shuts down gracefully; or, when args
// start with a command's name (schema, backup), runs that command.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if isCommand(args) {
		return runCommand(ctx, args, getenv, stdout, stderr)
	}
	cfg, err := parseConfig(args, getenv, stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil // the usage is written
	case err != nil:
		return err
	case cfg.PrintVersion:
		_, err := fmt.Fprint(stdout, readBuild())
		return err
	}
	if getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if getenv("GOMEMLIMIT") == "" {
		// With GOGC at 400 the heap may grow to five times what is live;
		// the limit makes the collector work harder instead near it.
		debug.SetMemoryLimit(int64(cfg.MemoryLimit))
	}
	tel, err := telemetry.Setup(ctx, getenv, telemetry.Options{})
	if err != nil {
		return err
	}
	log := telemetry.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err := serve(ctx, cfg, tel, log, stdout); err != nil {
		if cfg.LogFormat != "json" {
			return err
		}
		log.Error("listgate stopped", "err", err)
		return loggedError{err}
	}
	return nil
}

// serve runs the gateway until ctx ends, on the store the configuration
// names.
func serve(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger, stdout io.Writer) error {
	return serveOn(ctx, cfg, tel, log, stdout, openStore)
}

// storeOpener opens the gateway's store: openStore, or a test's.
type storeOpener func(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger) (store.Store, error)

// serveOn runs the gateway, on the store open opens, until ctx ends. It
// listens first, and while the store cannot be opened (a cluster not up
// yet) it answers /healthz, reports unready on /readyz and /graphql
// UNAVAILABLE, and tries again, backing off (openStoreRetrying). Once
// ctx ends it stops accepting connections, lets in-flight requests finish and ends
// subscriptions (up to the shutdown timeout), closes the store and
// flushes telemetry. Whatever has not stopped shortly after the shutdown
// timeout is left behind, and the error names it.
func serveOn(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger, stdout io.Writer, open storeOpener) (err error) {
	var down teardown
	defer func() { err = errors.Join(err, down.run(ctx, cfg.ShutdownTimeout, shutdownGrace)) }()
	down.add("the telemetry flush", func(ctx context.Context) error {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return tel.Shutdown(flushCtx)
	})
	build := readBuild()
	if err := observeBuild(tel.MeterProvider, build); err != nil {
		return err
	}
	ready := &readiness{stuckAfter: stuckAfter(cfg.Limits.RequestTimeout)}
	if err := observeReady(tel.MeterProvider, ready); err != nil {
		return err
	}
	// The loader's histogram is on /metrics at zero until its first batch.
	tel.AtZero("listgate_loader_batch_size", lists.BatchSizeHelp, lists.BatchSizeBounds)
	// The operators' listeners outlive the public one's draining and the
	// subscriptions' ending, so /metrics shows them.
	ops, err := listenOps(cfg, tel, log)
	if err != nil {
		return err
	}
	down.add("the operators' listeners", func(context.Context) error { ops.close(); return nil })
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w: give another address with --listen (or LISTGATE_LISTEN), such as --listen 127.0.0.1:8081", cfg.Listen, err)
	}
	api := new(gateway)
	srv := &http.Server{
		Handler: newServer(cfg, api, ready, tel, log),
		// A client that sends or reads slowly cannot hold a connection
		// past these; a request's own work ends at --request-timeout.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.Limits.RequestTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(jsonRefusals(ln, cfg.MaxHeaderBytes)) }()
	log.Info("listgate listening, opening the store", "listen", ln.Addr().String())
	st, err := openStoreRetrying(ctx, cfg, tel, log, open, ready)
	if err != nil || st == nil {
		srv.Close() // it served nothing but refusals: nothing to drain
		return err
	}
	down.add("the store", func(context.Context) error {
		if err := st.Close(); err != nil {
			log.Warn("closing the store", "err", err)
		}
		return nil
	})
	if e, ok := st.(*embedded.Store); ok {
		backups := listenBackups(cfg.DataDir, e, log)
		down.add("the backup socket (a backup under way)", func(context.Context) error { backups.close(); return nil })
	}
	in, err := store.Instrument(st, tel.MeterProvider)
	if err != nil {
		return err
	}
	catalog, err := features.New(ctx, in, log, tel.MeterProvider)
	if err != nil {
		return err
	}
	authn, err := newAuthenticator(cfg, log)
	if err != nil {
		return err
	}
	catalogCtx, stopCatalog := context.WithCancel(context.WithoutCancel(ctx))
	authCtx, stopAuth := context.WithCancel(context.WithoutCancel(ctx))
	down.add("the catalog's, keys' and documents' refreshes", func(context.Context) error { stopCatalog(); stopAuth(); return nil })
	catalog.SetStaleness(cfg.FeatureStaleness)
	go catalog.Run(catalogCtx, cfg.FeatureRefresh)
	go authn.Run(authCtx)

	mode := documents.Off
	if cfg.TrustedDocuments != "" {
		mode = documents.Enforce
	}
	if cfg.TrustedDocumentsMode != "" {
		if mode, err = documents.ParseMode(cfg.TrustedDocumentsMode); err != nil {
			return err
		}
	}
	docs, err := documents.New(cfg.TrustedDocuments, mode, log, tel.MeterProvider.Meter("github.com/listgate/listgate/documents"))
	if err != nil {
		return err
	}
	go docs.Run(authCtx, 5*time.Second)
	if cfg.TrustedDocuments != "" {
		log.Info("trusted documents", "path", cfg.TrustedDocuments, "mode", string(docs.Mode()))
	}
	gql, err := endpoint.New(endpoint.Config{
		Store: in, Catalog: catalog, Auth: authn, Loader: cfg.Loader, Limits: cfg.Limits, Subscriptions: cfg.Subscriptions,
		Introspection: cfg.Introspection, GQLGenOnly: !cfg.CompiledDocuments, Hosts: cfg.AllowedHosts, TrustedProxies: cfg.TrustedProxies, Log: log, Now: cfg.now, Documents: docs,
		TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider,
	})
	if err != nil {
		return err
	}
	// On a shutdown the subscriptions end while the server drains its
	// requests over HTTP: each gets its complete message, then its
	// WebSocket closes, up to the shutdown timeout. Whatever ends serve,
	// their pollers stop before the store closes, past the timeout too:
	// the store must not close under a read.
	subscriptions := newEarlyStep(gql.Shutdown)
	down.add("the subscriptions and WebSockets", func(ctx context.Context) error {
		subscriptions.wait(ctx)
		gql.Shutdown(context.WithoutCancel(ctx))
		return nil
	})
	api.h.Store(gql)
	ready.st.Store(in)
	log.Info("listgate serving", startupAttrs(cfg, build, ln.Addr().String(), ops)...)
	// With JSON logs, output is one stream of JSON: the line above, with
	// its listen field, is the one that says where.
	switch {
	case cfg.LogFormat != "text":
	case cfg.Playground:
		fmt.Fprintf(stdout, "listgate serving http://%s (playground at /, GraphQL at /graphql)\n", ln.Addr())
	default:
		fmt.Fprintf(stdout, "listgate serving http://%s (GraphQL at /graphql)\n", ln.Addr())
	}

	down.add("in-flight requests", func(ctx context.Context) error {
		subscriptions.begin(ctx)
		drain(ctx, srv, cfg.ShutdownTimeout, log)
		return nil
	})
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: ending subscriptions, finishing in-flight requests", "timeout", cfg.ShutdownTimeout)
	return nil
}

// gateway serves /graphql: the endpoint, once the store is open and the
// endpoint built; until then every request is answered UNAVAILABLE.
type gateway struct {
	h atomic.Pointer[endpoint.Handler]
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.h.Load(); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "1")
	endpoint.WriteError(w, http.StatusServiceUnavailable, endpoint.CodeUnavailable, "the gateway is starting: its store is not open yet (its log says why); try again")
}

// openStoreRetrying opens the store, and while a cluster cannot be reached
// (or its schema is not in place yet) tries again, from half a second
// apart to 10 s, each failure logged and kept for /readyz, until it opens
// or ctx ends (nil, nil). An error of the configuration (errkind.Invalid,
// or a TLS mismatch explainTLS recognizes), or any of the embedded store,
// which is local, ends the start at once.
func openStoreRetrying(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger, open storeOpener, ready *readiness) (store.Store, error) {
	wait := 500 * time.Millisecond
	for {
		st, err := open(ctx, cfg, tel, log)
		switch {
		case err == nil:
			return st, nil
		case ctx.Err() != nil:
			return nil, nil // stopped while starting
		case len(cfg.CQLHosts) == 0 || errors.Is(err, errkind.Invalid) || errors.As(err, new(*explainedError)):
			return nil, err // no retry mends the configuration (a TLS mismatch included)
		}
		ready.opening.Store(&err)
		log.Warn("the store cannot be opened yet; trying again", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// drain stops srv taking connections and waits for its requests until ctx
// ends. Requests still running then are cut off: closing their
// connections cancels their contexts. Stopping on time is what was asked,
// so it is no failure.
func drain(ctx context.Context, srv *http.Server, timeout time.Duration, log *slog.Logger) {
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutting down: requests still running after the shutdown timeout; closing their connections", "timeout", timeout, "err", err)
		srv.Close()
	}
}

// newAuthenticator reads the configured API keys and JWT keys, and fetches
// the JWKS's.
func newAuthenticator(cfg config, log *slog.Logger) (*auth.Authenticator, error) {
	ac := auth.Config{APIKeys: cfg.APIKeys, JWKSURL: cfg.JWTJWKSURL, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience, Log: log}
	if cfg.JWTKeysFile != "" {
		b, err := os.ReadFile(cfg.JWTKeysFile)
		if err != nil {
			return nil, fmt.Errorf("--jwt-keys-file: %w", err)
		}
		ac.JWTKeys = b
	}
	return auth.New(ac)
}

// openStore opens the CQL store when hosts are configured (migrating the
// schema if asked), else the embedded store in the data folder.
func openStore(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger) (store.Store, error) {
	if len(cfg.CQLHosts) == 0 {
		s, err := embedded.Open(embedded.Config{Dir: cfg.DataDir, SweepInterval: time.Minute, Now: cfg.now, Limits: cfg.StoreLimits, MeterProvider: tel.MeterProvider, FeedRetention: cfg.Feed.Retention,
			RecreateWait: cfg.FeatureStaleness + features.ClockSkew, Log: log, LongScans: cfg.LongScans})
		var inUse *embedded.InUseError
		if errors.As(err, &inUse) {
			return nil, fmt.Errorf("%w; stop it, or use --data-dir to name another folder", err)
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	c := cqlConfig(cfg)
	c.ReadConsistency, c.WriteConsistency = cfg.CQLReadConsistency, cfg.CQLWriteConsistency
	c.NumConns = cfg.CQLConnections
	c.Speculation = cfg.CQLSpeculation
	c.Feed = cfg.Feed
	c.Now = cfg.now
	c.RecreateWait = cfg.FeatureStaleness + features.ClockSkew
	c.Limits = cfg.StoreLimits
	c.LongScans = cfg.LongScans
	c.TracerProvider, c.MeterProvider = tel.TracerProvider, tel.MeterProvider
	c.SlowQuery, c.Log = cfg.SlowQuery, log
	s, err := cql.Open(ctx, c)
	if err != nil {
		return nil, explainTLS(cfg, err)
	}
	if cfg.Migrate {
		existed, err := s.KeyspaceExists(ctx)
		if err == nil {
			err = s.Migrate(ctx, cfg.schema())
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		if !existed && cfg.CQLReplication == cql.DefaultSchema().Replication {
			log.Warn("--migrate created the keyspace with the default replication: one replica of each list, for development; set --cql-replication",
				"keyspace", cfg.CQLKeyspace, "replication", cfg.CQLReplication)
		}
	}
	if err := s.Ready(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.CheckFeedConsistency(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// cqlConfig is the store's configuration of the cluster's address, login,
// TLS and statement timeout, which the gateway and listgate migrate share.
func cqlConfig(cfg config) cql.Config {
	c := cql.DefaultConfig()
	c.Hosts = cfg.CQLHosts
	c.Keyspace = cfg.CQLKeyspace
	c.LocalDC = cfg.CQLLocalDC
	c.Username, c.Password = cfg.CQLUsername, cfg.CQLPassword
	c.TLS = cfg.CQLTLS
	c.Timeout = cfg.CQLTimeout
	return c
}

// opsListeners are the operators' own listeners, off the public one:
// /metrics on --metrics-listen, Go's profiles on --pprof-listen, and both on
// one listener when the two flags name one address. Profiles are never
// served unless --pprof-listen asks: they reveal internals and a CPU profile
// or trace costs the gateway while it runs.
type opsListeners struct {
	servers        []*http.Server
	metrics, pprof string // the addresses serving /metrics and the profiles; "" when none
}

func listenOps(cfg config, tel *telemetry.Telemetry, log *slog.Logger) (*opsListeners, error) {
	o := &opsListeners{}
	open := func(flags, addr string, h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			o.close()
			return "", fmt.Errorf("%s: %w", flags, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: cfg.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		o.servers = append(o.servers, srv)
		go func() {
			if err := srv.Serve(jsonRefusals(ln, cfg.MaxHeaderBytes)); !errors.Is(err, http.ErrServerClosed) {
				log.Warn("listener stopped", "flags", flags, "addr", ln.Addr().String(), "err", err)
			}
		}()
		return ln.Addr().String(), nil
	}
	metricsMux := func(mux *http.ServeMux) *http.ServeMux {
		mux.Handle("GET /metrics", tel.MetricsHandler())
		return mux
	}
	// An operator's listener answers other paths as the gateway's does,
	// naming what it serves.
	opsMux := func(serves string) *http.ServeMux {
		mux := http.NewServeMux()
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			endpoint.WriteError(w, http.StatusNotFound, endpoint.CodeNotFound, "no such path: this listener serves "+serves)
		})
		return mux
	}
	var err error
	switch {
	case cfg.MetricsListen != "" && cfg.MetricsListen == cfg.PprofListen:
		if o.metrics, err = open("--metrics-listen and --pprof-listen", cfg.MetricsListen, pprofRoutes(metricsMux(opsMux("/metrics and /debug/pprof/")))); err != nil {
			return nil, err
		}
		o.pprof = o.metrics
		return o, nil
	case cfg.MetricsListen != "":
		if o.metrics, err = open("--metrics-listen", cfg.MetricsListen, metricsMux(opsMux("/metrics"))); err != nil {
			return nil, err
		}
	}
	if cfg.PprofListen != "" {
		if o.pprof, err = open("--pprof-listen", cfg.PprofListen, pprofRoutes(opsMux("/debug/pprof/"))); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// close stops the listeners at once: a scrape is quick, and a profile
// still running is of a process that is going away.
func (o *opsListeners) close() {
	for _, srv := range o.servers {
		srv.Close()
	}
}

// pprofRoutes adds net/http/pprof's profiles to mux.
func pprofRoutes(mux *http.ServeMux) *http.ServeMux {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// metricsOnAPI reports whether /metrics is served on --listen: only in
// dev mode without --metrics-listen. In prod mode it is served on
// --metrics-listen alone, a listener an operator keeps off the callers'
// network: operation names, callers and error rates are not theirs to
// read, and a scraper then needs no token.
func metricsOnAPI(cfg config) bool {
	return cfg.MetricsListen == "" && cfg.Mode != "prod"
}

// newServer lists every route.
func newServer(cfg config, gql http.Handler, ready *readiness, tel *telemetry.Telemetry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/graphql", withCORS(cfg, gql))
	if metricsOnAPI(cfg) {
		mux.Handle("GET /metrics", tel.MetricsHandler())
	} else {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			endpoint.WriteError(w, http.StatusNotFound, endpoint.CodeNotFound, "no such path: /metrics is served on the address of --metrics-listen, not on this listener (in --mode prod, only there)")
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready.check(r.Context()); err != nil {
			// The driver's words name hosts and keyspaces: the log has them.
			log.WarnContext(r.Context(), "not ready", "err", err)
			endpoint.WriteError(w, http.StatusServiceUnavailable, endpoint.CodeUnavailable, "not ready: the gateway's log says why")
			return
		}
		io.WriteString(w, "ok\n")
	})
	// Every other path, and a method a route does not take, answers in
	// the endpoint's shape too.
	notFound := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		endpoint.WriteError(w, http.StatusNotFound, endpoint.CodeNotFound, "no such path: GraphQL is served on /graphql")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		if _, pattern := mux.Handler(get); pattern != "/" {
			w.Header().Set("Allow", "GET, HEAD")
			endpoint.WriteError(w, http.StatusMethodNotAllowed, endpoint.CodeBadRequest, fmt.Sprintf("method %s: %s takes GET", r.Method, r.URL.Path))
			return
		}
		notFound(w, r)
	})
	if cfg.Playground {
		page := playground.Handler(notFound)
		mux.Handle("GET /{$}", page)
		mux.Handle("GET /playground/", page)
		mux.Handle("GET /favicon.ico", page)
	}
	var h http.Handler = mux
	if tel.Tracing() {
		// The HTTP server span, joining the caller's trace. Its metrics stay
		// off: listgate_graphql_request_duration_seconds counts requests.
		h = otelhttp.NewHandler(mux, "listgate",
			otelhttp.WithTracerProvider(tel.TracerProvider),
			otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
			otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path == "/graphql" }),
		)
	}
	return telemetry.WithRequestID(h)
}

// exposedHeaders are what a page's code may read of an answer besides its
// body: its caller's budget, when to retry, and the id its log line
// carries.
var exposedHeaders = []string{"RateLimit", "RateLimit-Policy", "Retry-After", "X-Request-Id"}

// withCORS lets the configured browser origins call the endpoint, and
// answers their preflights; the preflights of other origins go on to the
// endpoint, which refuses them saying why. With no origins configured it
// adds nothing.
func withCORS(cfg config, next http.Handler) http.Handler {
	if len(cfg.CORSOrigins) == 0 {
		return next
	}
	c := cors.New(cors.Options{
		AllowedOrigins:   cfg.CORSOrigins,
		AllowedMethods:   []string{http.MethodGet, http.MethodPost},
		AllowedHeaders:   []string{"Content-Type", "Authorization", "Accept", "X-Request-Id"},
		ExposedHeaders:   exposedHeaders,
		AllowCredentials: cfg.CORSCredentials,
		MaxAge:           600, // seconds a browser may cache a preflight
	})
	allowed := c.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && !c.OriginAllowed(r) {
			next.ServeHTTP(w, r)
			return
		}
		allowed.ServeHTTP(w, r)
	})
}
