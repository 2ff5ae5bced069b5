package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/watch"
)

// config is every setting, read once at start-up from flags and from
// LISTGATE_* environment variables (a flag wins over its variable).
type config struct {
	Mode           string // dev or prod
	Listen         string
	DevAllowRemote bool     // dev mode without credentials may listen beyond loopback
	AllowedHosts   []string // Host names answered besides loopback ones
	// TrustedProxies are the proxies in front of the gateway whose
	// X-Forwarded-For names a client that has not authenticated.
	TrustedProxies []netip.Prefix
	DataDir        string

	APIKeys     []string
	JWTKeysFile string
	JWTJWKSURL  string
	JWTIssuer   string
	JWTAudience string
	StoreLimits store.Limits
	LongScans   int // scans of many rows read at once (store.Turns); 0: half the cores

	CQLHosts            []string
	CQLKeyspace         string
	CQLLocalDC          string
	CQLUsername         string
	CQLPassword         string
	CQLTLSFiles         cqlTLSFiles // the --cql-tls* flags as given
	CQLTLS              *cql.TLS    // read from CQLTLSFiles; nil: plain text
	CQLReadConsistency  gocql.Consistency
	CQLWriteConsistency gocql.Consistency
	CQLTimeout          time.Duration
	CQLConnections      int
	CQLSpeculation      cql.SpeculationConfig
	Migrate             bool
	ClockOffset         time.Duration // for tests: how far ahead of the machine's clock this gateway's runs
	// TrustedDocuments is the manifest path; TrustedDocumentsMode off,
	// audit or enforce ("": enforce with a path, else off).
	TrustedDocuments, TrustedDocumentsMode string
	CQLReplication                         string
	FeatureRefresh                         time.Duration
	FeatureStaleness                       time.Duration
	Loader                                 lists.LoaderConfig
	Limits                                 endpoint.Limits
	Subscriptions                          endpoint.Subscriptions
	Feed                                   cql.FeedConfig
	Introspection                          bool
	CompiledDocuments                      bool
	Playground                             bool
	CORSOrigins                            []string
	CORSCredentials                        bool
	ShutdownTimeout                        time.Duration
	LogFormat                              string
	LogLevel                               slog.Level
	SlowQuery                              time.Duration
	PprofListen                            string
	MetricsListen                          string
	MaxHeaderBytes                         int // of a request's line and headers, on every listener
	GCPercent                              int
	MemoryLimit                            byteSize

	PrintVersion bool // --version: print the version and exit
}

// byteSize is a flag of bytes: 1048576, 512KiB, 64MiB or 1GiB.
type byteSize int64

// byteUnits are the suffixes of a byteSize, largest first.
var byteUnits = []struct {
	suffix string
	size   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

// String writes the size in its largest whole unit, as --help shows it.
func (b *byteSize) String() string {
	for _, u := range byteUnits {
		if *b != 0 && int64(*b)%u.size == 0 {
			return strconv.FormatInt(int64(*b)/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	n, unit := s, int64(1)
	for _, u := range byteUnits {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			n, unit = v, u.size
			break
		}
	}
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/unit {
		return fmt.Errorf("%q is not a size such as 1048576, 512KiB, 64MiB or 1GiB", s)
	}
	*b = byteSize(v * unit)
	return nil
}

// byteFlag is an int64 of bytes as a flag: 1048576, 512KiB, 64MiB, 1GiB.
func byteFlag(p *int64) *byteSize { return (*byteSize)(p) }

// envName is the environment variable of a flag: --cql-hosts is
// LISTGATE_CQL_HOSTS.
func envName(flagName string) string {
	return "LISTGATE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// commandOnly are the flags no environment variable sets: a LISTGATE_VERSION
// that deployment tooling sets to a release name must not stop the gateway.
// So are the flags of one command alone, such as backup's --to.
var commandOnly = map[string]bool{"version": true, "to": true}

// flagText are the flags parseConfig reads as text and turns into settings.
type flagText struct {
	apiKeys, apiKeysFile, hosts, readCL, writeCL, origins, allowedHosts, trustedProxies *string
}

// newFlagSet defines every flag, each setting its part of c.
func newFlagSet(c *config) (*flag.FlagSet, flagText) {
	fs := flag.NewFlagSet("listgate", flag.ContinueOnError)
	// The caller reports a bad flag; the whole usage is for --help alone.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&c.Mode, "mode", "dev", "dev: auth optional, playground and introspection on; prod: refuses to start without auth, playground and introspection off unless set, /metrics on --metrics-listen alone, JSON logs")
	apiKeys := fs.String("api-keys", "", `API keys, ";"-separated entries "name sha256-hex scope[,scope…] [cost=rate/burst]" (the key's SHA-256, never the key; cost: its own budget, the burst at least --max-complexity)`)
	apiKeysFile := fs.String("api-keys-file", "", "file of API keys, one entry per line as in --api-keys")
	fs.StringVar(&c.JWTKeysFile, "jwt-keys-file", "", "PEM file of the public keys (RSA, ECDSA, Ed25519) that sign valid JWTs")
	fs.StringVar(&c.JWTJWKSURL, "jwt-jwks-url", "", "URL of the JWKS whose keys sign valid JWTs (an identity provider's jwks_uri), fetched hourly and when a token names an unknown key")
	fs.StringVar(&c.JWTIssuer, "jwt-issuer", "", "iss a JWT must carry (empty: any)")
	fs.StringVar(&c.JWTAudience, "jwt-audience", "", "aud a JWT must carry (empty: any; --mode prod with JWTs requires one, so that tokens an identity provider mints for other applications do not verify)")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	fs.BoolVar(&c.DevAllowRemote, "dev-allow-remote", false, "let --mode dev without credentials listen beyond loopback (e.g. --listen 0.0.0.0:8080 in a container): every caller that reaches it then has every scope")
	trustedProxies := fs.String("trusted-proxies", "", "addresses and CIDRs of the proxies and load balancers in front of the gateway, comma separated (e.g. 10.0.0.0/8): a request from one is from the right-most address of its X-Forwarded-For that is not one of them, for the bounds of clients that have not authenticated; empty: a request is from its peer")
	allowedHosts := fs.String("allowed-hosts", "", "Host names the gateway answers for besides localhost and IP addresses, comma separated (* any); without authentication others are refused (DNS rebinding), with it any is answered unless names are set")
	fs.StringVar(&c.DataDir, "data-dir", "./data", "folder of the embedded store, used when no CQL hosts are set")
	hosts := fs.String("cql-hosts", "", "ScyllaDB or Cassandra contact points, comma separated (host or host:port); empty runs the embedded store")
	fs.StringVar(&c.CQLKeyspace, "cql-keyspace", "listgate", "keyspace of the list tables")
	fs.StringVar(&c.CQLLocalDC, "cql-local-dc", "", "local data centre for DC-aware routing (empty: all hosts)")
	fs.StringVar(&c.CQLUsername, "cql-username", "", "CQL user name")
	fs.StringVar(&c.CQLPassword, "cql-password", "", "CQL password (prefer the environment variable)")
	fs.BoolVar(&c.CQLTLSFiles.On, "cql-tls", false, "connect to the cluster over TLS (--cql-tls-ca, -cert, -key, -server-name and --cql-tls-verify-hostname=false turn it on too), trusting the system's CAs unless --cql-tls-ca names others")
	fs.StringVar(&c.CQLTLSFiles.CA, "cql-tls-ca", "", "PEM file of the CAs the nodes' certificates must chain to (empty: the system's)")
	fs.StringVar(&c.CQLTLSFiles.Cert, "cql-tls-cert", "", "PEM file of the client certificate (and its chain) for clusters that require one; needs --cql-tls-key")
	fs.StringVar(&c.CQLTLSFiles.Key, "cql-tls-key", "", "PEM file of the client certificate's private key; needs --cql-tls-cert")
	fs.StringVar(&c.CQLTLSFiles.ServerName, "cql-tls-server-name", "", "name every node's certificate must carry (empty: the IP address each node is dialed at)")
	fs.BoolVar(&c.CQLTLSFiles.VerifyHostname, "cql-tls-verify-hostname", true, "check that a node's certificate names the address dialed (or --cql-tls-server-name); false checks its chain to the CAs only")
	readCL := fs.String("cql-read-consistency", "LOCAL_QUORUM", "consistency level of reads")
	writeCL := fs.String("cql-write-consistency", "LOCAL_QUORUM", "consistency level of writes")
	fs.DurationVar(&c.CQLTimeout, "cql-timeout", 2*time.Second, "timeout of one CQL statement attempt")
	fs.IntVar(&c.CQLConnections, "cql-connections", 2, "connections per host (per shard on ScyllaDB)")
	fs.BoolVar(&c.CQLSpeculation.Enabled, "cql-speculative-reads", cql.DefaultSpeculation.Enabled, "send a read whose first node has not answered within --cql-speculative-delay to the next node as well, the first answer winning (once, and only within --cql-speculative-budget), so that a slow or frozen node holds no read up past the delay")
	fs.DurationVar(&c.CQLSpeculation.Delay, "cql-speculative-delay", 0, "how long a read waits for its first node before it is sent to the next (0: the 99th percentile of this gateway's recent reads, from 1ms to 250ms)")
	fs.Float64Var(&c.CQLSpeculation.Budget, "cql-speculative-budget", cql.DefaultSpeculation.Budget, "the share of reads that may be sent to a second node, above 0 and at most 1 (give or take a burst of 10 and the reads in flight)")
	fs.DurationVar(&c.ClockOffset, "test-clock-offset", 0, "for tests only: run this gateway's clock this far ahead of the machine's (negative: behind), as a writer with a wrong clock would")
	fs.BoolVar(&c.Migrate, "migrate", false, "create the keyspace and tables that are missing (as listgate migrate does), then serve: for development; in production run listgate migrate first")
	fs.StringVar(&c.CQLReplication, "cql-replication", cql.DefaultSchema().Replication, "keyspace replication map used by --migrate and listgate schema")
	fs.DurationVar(&c.FeatureRefresh, "feature-refresh", 10*time.Second, "how often the feature catalog is reloaded (at most a third of --feature-staleness)")
	fs.DurationVar(&c.FeatureStaleness, "feature-staleness", features.DefaultStaleness, "how old the feature catalog may be and still be served, the same on every gateway of a fleet: past it lists are refused (UNAVAILABLE); a deleted feature may still be served this long through a gateway that has not reloaded, one re-created with another value type or cap waits this long (and 5 s of clock skew) after its deletion, and subscriptions to a feature made live wait as long after the change (on a cluster; on the embedded store, which one gateway serves, not at all)")
	fs.DurationVar(&c.Loader.Wait, "loader-wait", lists.DefaultLoaderConfig.Wait, "how long the list loader gathers keys before a batch runs")
	fs.IntVar(&c.Loader.MaxBatch, "loader-max-batch", lists.DefaultLoaderConfig.MaxBatch, "keys that make the list loader run a batch at once")
	fs.IntVar(&c.Loader.Concurrency, "loader-concurrency", lists.DefaultLoaderConfig.Concurrency, "queries one loader batch runs at once")
	fs.IntVar(&c.Limits.MaxListLimit, "max-list-limit", endpoint.DefaultLimits.MaxListLimit, "largest limit of one list")
	fs.IntVar(&c.Limits.MaxEntities, "max-entities", endpoint.DefaultLimits.MaxEntities, "most entity ids in one entities query")
	fs.IntVar(&c.Limits.MaxCount, "max-count", endpoint.DefaultLimits.MaxCount, "most items one listCount, or one listContains, may look at")
	fs.IntVar(&c.Limits.MaxScanFactor, "max-scan-factor", endpoint.DefaultLimits.MaxScanFactor, "rows a distinct page (or one of a feature created again) may look at, per item of its limit")
	fs.IntVar(&c.Limits.MaxValues, "max-values", endpoint.DefaultLimits.MaxValues, "most values in one listContains or removeListItemsWithValues")
	fs.IntVar(&c.Limits.MaxBuckets, "max-buckets", endpoint.DefaultLimits.MaxBuckets, "most buckets of one listHistogram")
	fs.IntVar(&c.Limits.MaxBatchLists, "max-batch-lists", endpoint.DefaultLimits.MaxBatchLists, "most lists in one addListItemsBatch")
	fs.IntVar(&c.Limits.MaxDepth, "max-depth", endpoint.DefaultLimits.MaxDepth, "deepest nesting of fields in one operation")
	fs.IntVar(&c.Limits.MaxComplexity, "max-complexity", endpoint.DefaultLimits.MaxComplexity, "largest operation complexity (a list counts its fields times its limit; listFeatures its fields times the features it may return)")
	fs.Int64Var(&c.Limits.MaxBodyBytes, "max-body-bytes", endpoint.DefaultLimits.MaxBodyBytes, "largest request body")
	fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", http.DefaultMaxHeaderBytes, "largest request line (a GET's URL with its query string) and headers together; past it the answer is 431")
	fs.IntVar(&c.Limits.MaxTokens, "max-tokens", endpoint.DefaultLimits.MaxTokens, "most tokens in one GraphQL document")
	fs.IntVar(&c.Limits.MaxFields, "max-fields", endpoint.DefaultLimits.MaxFields, "most fields in one operation, aliases counted and fragments expanded")
	fs.IntVar(&c.Limits.MaxResponseBytes, "max-response-bytes", endpoint.DefaultLimits.MaxResponseBytes, "most bytes of one response, its list items, features and errors included")
	fs.IntVar(&c.Limits.MaxInFlightComplexity, "max-in-flight-complexity", endpoint.DefaultLimits.MaxInFlightComplexity, "complexity of the operations running at once (at least --max-complexity); more wait for room until their deadline")
	c.Limits.MaxInFlightResponseBytes = endpoint.DefaultLimits.MaxInFlightResponseBytes
	fs.Var(byteFlag(&c.Limits.MaxInFlightResponseBytes), "max-in-flight-response-bytes", "the `size` of the answers of queries and mutations being built and written at once (at least --max-response-bytes): a page reserves what it may hold before it is read, waiting for room until its deadline; an answer holds its bytes until its client has read it")
	fs.IntVar(&c.Limits.MaxInFlight, "max-in-flight", endpoint.DefaultLimits.MaxInFlight, "GraphQL requests served at once; more over HTTP are refused with 503, a WebSocket's subscribe message waits for a slot until its deadline")
	fs.Float64Var(&c.Limits.CallerCostRate, "caller-cost-rate", endpoint.DefaultLimits.CallerCostRate, "each caller's budget of complexity points a second on this gateway (0: no budget); an API key's cost=rate/burst or a JWT's listgate_cost claim sets its own")
	fs.Float64Var(&c.Limits.CallerCostBurst, "caller-cost-burst", endpoint.DefaultLimits.CallerCostBurst, "each caller's budget of complexity points at once (at least --max-complexity)")
	fs.Float64Var(&c.Limits.CallerInFlightShare, "caller-max-in-flight-share", endpoint.DefaultLimits.CallerInFlightShare, "the share of --max-in-flight, of --max-in-flight-complexity and of --max-in-flight-response-bytes one caller's operations may hold, above 0 and at most 1")
	fs.DurationVar(&c.Limits.RequestTimeout, "request-timeout", endpoint.DefaultLimits.RequestTimeout, "deadline of one request, passed down to every CQL statement")
	fs.IntVar(&c.Limits.QueryCacheBytes, "query-cache-bytes", endpoint.DefaultLimits.QueryCacheBytes, "memory for parsed GraphQL documents, estimated")
	fs.IntVar(&c.Limits.APQCacheBytes, "apq-cache-bytes", endpoint.DefaultLimits.APQCacheBytes, "memory for automatic persisted queries")
	c.MemoryLimit = 1 << 30
	c.Subscriptions = endpoint.DefaultSubscriptions
	c.Feed = cql.DefaultFeedConfig
	fs.Var(&c.MemoryLimit, "memory-limit", "soft limit of the Go heap, a `size` (e.g. 1GiB; about 3/4 of the memory the process may use; GOMEMLIMIT, when set, wins): the garbage collector works harder as the heap nears it")
	fs.IntVar(&c.StoreLimits.MaxAddItems, "max-add-items", 1000, "most items in one addListItems")
	fs.IntVar(&c.StoreLimits.MaxValueBytes, "max-value-bytes", store.DefaultLimits.MaxValueBytes, "largest item value, in bytes (at most 65000)")
	fs.IntVar(&c.LongScans, "long-scans", 0, "scans of many rows (counts, searches, distinct pages) that read at once, a stretch each (256 rows on the embedded store, a page of 1,000 on a cluster); the others wait their turn until their deadline, short reads never (0: half the cores)")
	fs.DurationVar(&c.Feed.Poll, "change-feed-poll", cql.DefaultFeedConfig.Poll, "how often a gateway with subscriptions reads the change feed on Cassandra or ScyllaDB: a few single-partition reads, however many lists it watches")
	fs.DurationVar(&c.Feed.MaxClockOffset, "max-clock-offset", cql.DefaultFeedConfig.MaxClockOffset, "how far apart the cluster's node clocks may be, as each gateway measures them (with the error of measuring): live lists rest on it, a subscription's start waits it out, and past it new subscriptions are refused with CLOCK_SKEW (adds never are); the same on every gateway of a fleet")
	fs.IntVar(&c.Feed.Shards, "change-feed-shards", cql.DefaultFeedConfig.Shards, "partitions the change feed spreads each 10 s over; the same on every gateway of a fleet")
	fs.DurationVar(&c.Feed.Retention, "change-feed-retention", cql.DefaultFeedConfig.Retention, "how long the change feed keeps an add's record: a subscription resumes after a position at most this old (on a cluster, each record's TTL, less 10 s or half of it, whichever is less)")
	fs.Var(byteFlag(&c.Subscriptions.BufferBytes), "subscription-buffer-bytes", "how far behind, a `size` of items, a subscription may fall: past it for --subscription-slow-timeout, it is ended with TOO_SLOW")
	fs.DurationVar(&c.Subscriptions.SlowTimeout, "subscription-slow-timeout", endpoint.DefaultSubscriptions.SlowTimeout, "how long a subscription may stay more than --subscription-buffer-bytes behind")
	fs.Var(byteFlag(&c.Subscriptions.ListBytes), "watched-list-bytes", "the `size` of the items kept for the subscriptions of one list that have not read them; past it the furthest behind are ended")
	fs.Var(byteFlag(&c.Subscriptions.TotalBytes), "subscription-memory", "the `size` of the items kept for every list's subscriptions together; past it the furthest behind are ended")
	fs.Var(byteFlag(&c.Subscriptions.CatchUpBytes), "catch-up-bytes", "the `size` of the pages subscriptions hold as they catch up (with since, or after a position), together; more wait")
	fs.Float64Var(&c.Subscriptions.CatchUpShare, "caller-catch-up-bytes-share", endpoint.DefaultSubscriptions.CatchUpShare, "the share of --catch-up-bytes one caller's subscriptions may hold as they catch up (at least one page), above 0 and at most 1; past it they wait, and other callers' do not")
	fs.Var(byteFlag(&c.Subscriptions.OperationBytes), "subscription-operation-bytes", "the `size` of what open subscriptions keep of their operations (each its parsed operation and variables, copied without their text and comments), together; past it a new subscription is refused")
	fs.Float64Var(&c.Subscriptions.OperationShare, "caller-subscription-operation-bytes-share", endpoint.DefaultSubscriptions.OperationShare, "the share of --subscription-operation-bytes one caller's subscriptions may keep, above 0 and at most 1; past it its new subscriptions are refused THROTTLED, and other callers' are not")
	fs.IntVar(&c.Subscriptions.MaxLists, "max-watched-lists", endpoint.DefaultSubscriptions.MaxLists, "lists this gateway watches at once for its subscriptions")
	fs.IntVar(&c.Subscriptions.PerConnection, "max-subscriptions-per-connection", endpoint.DefaultSubscriptions.PerConnection, "subscriptions open on one WebSocket")
	fs.IntVar(&c.Subscriptions.PerCaller, "max-subscriptions-per-caller", endpoint.DefaultSubscriptions.PerCaller, "subscriptions open for one caller (an API key, a JWT's issuer and subject, or an address without authentication) on this gateway")
	fs.IntVar(&c.Subscriptions.MaxSockets, "max-websockets", endpoint.DefaultSubscriptions.MaxSockets, "WebSocket connections open at once past their connection_init")
	fs.Float64Var(&c.Subscriptions.SocketsShare, "caller-max-websockets-share", endpoint.DefaultSubscriptions.SocketsShare, "the share of --max-websockets one caller's WebSockets may hold (at least one), above 0 and at most 1; past it more are refused THROTTLED")
	fs.IntVar(&c.Subscriptions.MaxPending, "max-pending-websockets", endpoint.DefaultSubscriptions.MaxPending, "WebSocket connections open at once that have not sent their connection_init, their upgrade carrying no Authorization; with all open, a new one takes the place of the one that has waited longest (closed with 4408)")
	fs.IntVar(&c.Subscriptions.MaxPendingPerAddress, "max-pending-websockets-per-address", endpoint.DefaultSubscriptions.MaxPendingPerAddress, "of those, from one client: its address (as --trusted-proxies report it), an IPv6 one by its /64")
	fs.DurationVar(&c.Subscriptions.InitTimeout, "websocket-init-timeout", endpoint.DefaultSubscriptions.InitTimeout, "how long a new WebSocket has to send its connection_init")
	fs.IntVar(&c.Subscriptions.MaxOperations, "max-websocket-operations", endpoint.DefaultSubscriptions.MaxOperations, "queries and mutations running at once on one WebSocket; more are refused")
	fs.StringVar(&c.TrustedDocuments, "trusted-documents", "", "a manifest of the operations clients ship, or a folder of them (Apollo's persisted query manifest, genqlient's export_operations, or {\"id\": \"body\"}); read again on SIGHUP or when it changes")
	fs.StringVar(&c.TrustedDocumentsMode, "trusted-documents-mode", "", "off, audit (run other operations, logged and counted) or enforce (refuse them, but from callers with the scope documents:any); enforce when --trusted-documents is set")
	fs.BoolVar(&c.Introspection, "introspection", true, "answer GraphQL introspection queries (default false in --mode prod)")
	fs.BoolVar(&c.CompiledDocuments, "compiled-documents", true, "answer the requests of documents seen before through plans compiled from them, without gqlgen's decoding of the request and of its variables (off: gqlgen makes every operation; same answers, the same guards)")
	fs.BoolVar(&c.Playground, "playground", true, "serve GraphQL Playground (GraphiQL) at / (default false in --mode prod)")
	origins := fs.String("cors-origins", "", "browser origins allowed to call /graphql, comma separated (e.g. https://app.example.com); * allows any")
	fs.BoolVar(&c.CORSCredentials, "cors-allow-credentials", false, "let allowed origins send cookies and HTTP auth (never with *)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long in-flight requests and subscriptions may finish after SIGINT or SIGTERM; whatever is still stuck 5s later is left behind, and the process exits 1")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log lines as text or json")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "least severe `level` logged: debug, info (a line per GraphQL request), warn or error")
	fs.DurationVar(&c.SlowQuery, "slow-query", 250*time.Millisecond, "log CQL statements slower than this (0: never); past the first, those of the next 10 s are one line: how many, and the slowest")
	fs.IntVar(&c.GCPercent, "gc-percent", 400, "Go garbage collector target (GOGC) unless GOGC is set; the live heap is small and requests allocate, so 400 halves GC work per request")
	fs.StringVar(&c.PprofListen, "pprof-listen", "", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060), never on the public listener; empty: off")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "serve /metrics on this address (e.g. 127.0.0.1:9090) and not on --listen; empty: on --listen in dev mode, and nowhere in prod mode. With the same address as --pprof-listen, one listener serves both")
	fs.BoolVar(&c.PrintVersion, "version", false, "print the version, the VCS revision and the Go version, then exit")
	return fs, flagText{apiKeys, apiKeysFile, hosts, readCL, writeCL, origins, allowedHosts, trustedProxies}
}

// parseConfig reads the flags of args, then the variables of the flags not
// given. On --help (or -h) it writes the usage to help and returns
// flag.ErrHelp; on --version it returns at once, with PrintVersion set.
func parseConfig(args []string, getenv func(string) string, help io.Writer) (config, error) {
	var c config
	fs, text := newFlagSet(&c)
	apiKeys, apiKeysFile, hosts, readCL, writeCL, origins := text.apiKeys, text.apiKeysFile, text.hosts, text.readCL, text.writeCL, text.origins
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeUsage(help, serveUsage, fs)
			return c, err
		}
		return c, fmt.Errorf("%w (listgate --help lists the flags)", err)
	}
	if c.PrintVersion {
		return c, nil
	}
	set, err := setFromEnv(fs, getenv)
	if err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	explicit := explicitly(set, getenv)
	switch c.Mode {
	case "dev":
	case "prod":
		// Production shows nothing it was not asked to.
		if !explicit("playground") {
			c.Playground = false
		}
		if !explicit("introspection") {
			c.Introspection = false
		}
		if !explicit("log-format") {
			c.LogFormat = "json"
		}
	default:
		return c, fmt.Errorf("--mode %q: must be dev or prod", c.Mode)
	}
	for _, entry := range strings.Split(*apiKeys, ";") {
		if entry = strings.TrimSpace(entry); entry != "" {
			c.APIKeys = append(c.APIKeys, entry)
		}
	}
	if *apiKeysFile != "" {
		lines, err := auth.ReadAPIKeys(*apiKeysFile)
		if err != nil {
			return c, fmt.Errorf("--api-keys-file: %w", err)
		}
		c.APIKeys = append(c.APIKeys, lines...)
	}
	if err := auth.CheckAPIKeys(c.APIKeys, c.Limits.MaxComplexity); err != nil {
		return c, err
	}
	authenticated := len(c.APIKeys) > 0 || c.JWTKeysFile != "" || c.JWTJWKSURL != ""
	if c.Mode == "prod" && !authenticated {
		return c, fmt.Errorf("--mode prod needs authentication: set --api-keys, --api-keys-file, --jwt-keys-file or --jwt-jwks-url")
	}
	if c.Mode == "prod" && (c.JWTKeysFile != "" || c.JWTJWKSURL != "") && c.JWTAudience == "" {
		return c, fmt.Errorf("--mode prod with JWTs needs --jwt-audience: without it, any token the identity provider signs verifies, whatever application it was minted for")
	}
	if c.Migrate {
		if err := checkReplication(c.Mode, explicit("cql-replication")); err != nil {
			return c, fmt.Errorf("--migrate: %w", err)
		}
	}
	if c.Mode == "dev" && !authenticated && !c.DevAllowRemote && !loopback(c.Listen) {
		return c, fmt.Errorf("--listen %s: --mode dev without credentials gives every caller every scope, features:admin included; listen on 127.0.0.1, configure --api-keys or JWTs, or pass --dev-allow-remote to serve it beyond loopback all the same", c.Listen)
	}
	if u, err := url.Parse(c.JWTJWKSURL); c.JWTJWKSURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
		return c, fmt.Errorf("--jwt-jwks-url %q: must be an https (or http) URL such as https://idp.example.com/.well-known/jwks.json", c.JWTJWKSURL)
	}
	c.StoreLimits.MaxAddBytes = store.DefaultLimits.MaxAddBytes

	c.CQLHosts = splitList(*hosts)
	if c.CQLTLS, err = loadCQLTLS(c.CQLTLSFiles, explicit, len(c.CQLHosts) > 0); err != nil {
		return c, err
	}
	c.AllowedHosts = splitList(*text.allowedHosts)
	if c.TrustedProxies, err = endpoint.ParseTrustedProxies(splitList(*text.trustedProxies)); err != nil {
		return c, fmt.Errorf("--trusted-proxies: %w: list addresses and CIDRs such as 10.0.0.7,10.1.0.0/16,2001:db8::/32", err)
	}
	c.CORSOrigins = splitList(*origins)
	if err := checkOrigins(c.CORSOrigins, c.CORSCredentials); err != nil {
		return c, err
	}
	c.Subscriptions.Origins = c.CORSOrigins
	if c.CQLReadConsistency, err = parseConsistency(*readCL); err != nil {
		return c, fmt.Errorf("--cql-read-consistency: %w", err)
	}
	if c.CQLWriteConsistency, err = parseConsistency(*writeCL); err != nil {
		return c, fmt.Errorf("--cql-write-consistency: %w", err)
	}
	switch {
	case c.FeatureRefresh <= 0 || c.FeatureRefresh > c.FeatureStaleness/3:
		return c, fmt.Errorf("--feature-refresh %v: must be above 0 and at most a third of --feature-staleness (%v), so that a refresh or two may fail before the catalog is too old to serve", c.FeatureRefresh, c.FeatureStaleness)
	case c.Loader.Wait < 0 || c.Loader.MaxBatch < 1 || c.Loader.Concurrency < 1:
		return c, fmt.Errorf("loader settings: wait must be 0 or more, max batch and concurrency 1 or more")
	case c.Limits.MaxListLimit < 1 || c.Limits.MaxListLimit > 10_000:
		return c, fmt.Errorf("--max-list-limit %d: must be from 1 to 10000", c.Limits.MaxListLimit)
	case c.Limits.CallerCostRate < 0 || (c.Limits.CallerCostRate > 0 && c.Limits.CallerCostBurst < float64(c.Limits.MaxComplexity)):
		return c, fmt.Errorf("--caller-cost-rate %v, --caller-cost-burst %v: the rate must be 0 (no budget) or more, and the burst at least --max-complexity (%d), so that every operation allowed can run", c.Limits.CallerCostRate, c.Limits.CallerCostBurst, c.Limits.MaxComplexity)
	case c.Limits.CallerInFlightShare <= 0 || c.Limits.CallerInFlightShare > 1:
		return c, fmt.Errorf("--caller-max-in-flight-share %v: must be above 0 and at most 1", c.Limits.CallerInFlightShare)
	case c.Subscriptions.SocketsShare <= 0 || c.Subscriptions.SocketsShare > 1:
		return c, fmt.Errorf("--caller-max-websockets-share %v: must be above 0 and at most 1", c.Subscriptions.SocketsShare)
	case c.Subscriptions.CatchUpShare <= 0 || c.Subscriptions.CatchUpShare > 1:
		return c, fmt.Errorf("--caller-catch-up-bytes-share %v: must be above 0 and at most 1", c.Subscriptions.CatchUpShare)
	case c.Subscriptions.OperationShare <= 0 || c.Subscriptions.OperationShare > 1:
		return c, fmt.Errorf("--caller-subscription-operation-bytes-share %v: must be above 0 and at most 1", c.Subscriptions.OperationShare)
	case c.Subscriptions.OperationBytes < 64<<10:
		return c, fmt.Errorf("--subscription-operation-bytes %d: must be 64KiB or more", c.Subscriptions.OperationBytes)
	case c.TrustedDocumentsMode != "" && c.TrustedDocumentsMode != "off" && c.TrustedDocuments == "":
		return c, fmt.Errorf("--trusted-documents-mode %s needs --trusted-documents, the manifest of the operations clients ship", c.TrustedDocumentsMode)
	case c.Limits.MaxEntities < 1:
		return c, fmt.Errorf("--max-entities %d: must be 1 or more", c.Limits.MaxEntities)
	case c.Feed.Poll < 10*time.Millisecond || c.Feed.Shards < 1 || c.Feed.Shards > 256:
		return c, fmt.Errorf("--change-feed-poll must be 10ms or more, --change-feed-shards from 1 to 256")
	case c.Feed.MaxClockOffset < 10*time.Millisecond || c.Feed.MaxClockOffset > 10*time.Second:
		return c, fmt.Errorf("--max-clock-offset %v: must be from 10ms to 10s", c.Feed.MaxClockOffset)
	case c.Feed.Retention < time.Second:
		return c, fmt.Errorf("--change-feed-retention %v: must be 1s or more", c.Feed.Retention)
	case c.Subscriptions.BufferBytes < 1<<10 || c.Subscriptions.SlowTimeout <= 0:
		return c, fmt.Errorf("--subscription-buffer-bytes must be 1KiB or more, --subscription-slow-timeout above 0")
	case c.Subscriptions.MaxLists < 1 || c.Subscriptions.PerConnection < 1 || c.Subscriptions.PerCaller < 1 || c.Subscriptions.MaxSockets < 1:
		return c, fmt.Errorf("--max-watched-lists, --max-subscriptions-per-connection, --max-subscriptions-per-caller and --max-websockets must be 1 or more")
	case c.Subscriptions.MaxPending < 1 || c.Subscriptions.MaxPendingPerAddress < 1 || c.Subscriptions.MaxOperations < 1 || c.Subscriptions.InitTimeout <= 0:
		return c, fmt.Errorf("--max-pending-websockets, --max-pending-websockets-per-address and --max-websocket-operations must be 1 or more, --websocket-init-timeout above 0")
	case c.Limits.MaxCount < 1 || c.Limits.MaxScanFactor < 1 || c.Limits.MaxValues < 1 || c.Limits.MaxBatchLists < 1:
		return c, fmt.Errorf("--max-count, --max-scan-factor, --max-values and --max-batch-lists must be 1 or more")
	case c.Limits.MaxBuckets < 1 || c.Limits.MaxBuckets > store.MaxBuckets:
		return c, fmt.Errorf("--max-buckets %d: must be from 1 to %d", c.Limits.MaxBuckets, store.MaxBuckets)
	case c.Limits.MaxDepth < 3 || c.Limits.MaxComplexity < 1 || c.Limits.MaxBodyBytes < 1024 || c.Limits.RequestTimeout <= 0:
		return c, fmt.Errorf("limits: --max-depth must be 3 or more, --max-complexity 1 or more, --max-body-bytes 1024 or more, --request-timeout above 0")
	case c.Limits.MaxTokens < 1000 || c.Limits.MaxFields < 100 || c.Limits.MaxResponseBytes < 1<<20 || c.Limits.MaxInFlight < 1:
		return c, fmt.Errorf("limits: --max-tokens must be 1000 or more, --max-fields 100 or more, --max-response-bytes 1MiB or more, --max-in-flight 1 or more")
	case c.Limits.MaxInFlightResponseBytes < int64(c.Limits.MaxResponseBytes):
		return c, fmt.Errorf("--max-in-flight-response-bytes %d: less than --max-response-bytes %d; no answer of that size could be built", c.Limits.MaxInFlightResponseBytes, c.Limits.MaxResponseBytes)
	case c.MaxHeaderBytes < 4096:
		return c, fmt.Errorf("--max-header-bytes must be 4KiB or more")
	case c.Limits.QueryCacheBytes < 0 || c.Limits.APQCacheBytes < 0 || c.MemoryLimit < 64<<20:
		return c, fmt.Errorf("--query-cache-bytes and --apq-cache-bytes must be 0 or more, --memory-limit 64MiB or more")
	case c.StoreLimits.MaxAddItems < 1 || c.StoreLimits.MaxAddItems > store.DefaultLimits.MaxAddItems:
		return c, fmt.Errorf("--max-add-items %d: must be from 1 to %d", c.StoreLimits.MaxAddItems, store.DefaultLimits.MaxAddItems)
	case c.StoreLimits.MaxValueBytes < 1 || c.StoreLimits.MaxValueBytes > 65000:
		return c, fmt.Errorf("--max-value-bytes %d: must be from 1 to 65000", c.StoreLimits.MaxValueBytes)
	case c.LogFormat != "text" && c.LogFormat != "json":
		return c, fmt.Errorf("--log-format %q: must be text or json", c.LogFormat)
	case c.LongScans < 0:
		return c, fmt.Errorf("--long-scans %d: must be 0 (half the cores) or more", c.LongScans)
	case c.CQLConnections < 1 || c.CQLTimeout <= 0:
		return c, fmt.Errorf("--cql-connections must be 1 or more and --cql-timeout above 0")
	case c.CQLSpeculation.Budget <= 0 || c.CQLSpeculation.Budget > 1:
		return c, fmt.Errorf("--cql-speculative-budget %v: must be above 0 and at most 1 (--cql-speculative-reads=false sends no read twice)", c.CQLSpeculation.Budget)
	case c.CQLSpeculation.Delay < 0 || c.CQLSpeculation.Delay >= c.CQLTimeout:
		return c, fmt.Errorf("--cql-speculative-delay %v: must be 0 (measured) or more, and less than --cql-timeout %v", c.CQLSpeculation.Delay, c.CQLTimeout)
	}
	sub := c.Subscriptions
	if err := watch.CheckBounds(c.StoreLimits, watch.Defaults.CatchUpPage, sub.CatchUpBytes, sub.ListBytes, sub.TotalBytes); err != nil {
		return c, err
	}
	return c, nil
}

// setFromEnv sets each flag of fs not given on the command line from its
// variable, if set, and returns the flags given on the command line.
func setFromEnv(fs *flag.FlagSet, getenv func(string) string) (map[string]bool, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if commandOnly[f.Name] {
			return
		}
		if v := getenv(envName(f.Name)); v != "" && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	return set, envErr
}

func parseConsistency(s string) (gocql.Consistency, error) {
	var c gocql.Consistency
	if err := c.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("%q is not a consistency level (ONE, LOCAL_ONE, QUORUM, LOCAL_QUORUM, EACH_QUORUM, ALL)", s)
	}
	return c, nil
}

// checkOrigins accepts "*" alone and without credentials, or origins of the
// form scheme://host[:port].
func checkOrigins(origins []string, credentials bool) error {
	for _, o := range origins {
		if o == "*" {
			if len(origins) > 1 || credentials {
				return fmt.Errorf("--cors-origins: * must stand alone and cannot go with --cors-allow-credentials")
			}
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("--cors-origins: %q is not an origin such as https://app.example.com", o)
		}
	}
	return nil
}

// splitList splits a comma-separated flag into its non-empty entries.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// serveUsage heads what listgate --help shows.
const serveUsage = `Usage: listgate [flags]
       listgate schema [flags]            print the CQL schema migrate applies
       listgate migrate [flags]           apply the CQL schema to the cluster, then exit
       listgate backup --to DIR [flags]   back up the embedded store
       listgate load [flags] FILE…        add the items of NDJSON, CSV or Parquet files to their lists
       listgate export [flags]            write lists' items as rows listgate load reads

listgate serves the list features of a feature store over GraphQL, on
ScyllaDB or Cassandra (--cql-hosts) or, without them, on an embedded store
(--data-dir). listgate schema --help, listgate migrate --help, listgate
backup --help, listgate load --help and listgate export --help say more
of the other commands.

Every flag can also be set by the environment variable in brackets after
it; a flag on the command line wins over its variable.

`

// writeUsage writes what --help shows: the head, then every flag with its
// environment variable and its default.
func writeUsage(w io.Writer, head string, fs *flag.FlagSet) {
	fmt.Fprint(w, head)
	fs.VisitAll(func(f *flag.Flag) {
		typ, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		var notes []string
		if !commandOnly[f.Name] {
			notes = append(notes, envName(f.Name))
		}
		switch {
		case f.DefValue == "" || commandOnly[f.Name]:
		case typ == "string":
			notes = append(notes, fmt.Sprintf("default %q", f.DefValue))
		default:
			notes = append(notes, "default "+f.DefValue)
		}
		if len(notes) > 0 {
			line += "  (" + strings.Join(notes, ", ") + ")"
		}
		fmt.Fprintln(w, line)
		fmt.Fprint(w, wrap(text, "      ", 80))
	})
	fmt.Fprint(w, "  -h, --help\n      print this and exit\n")
}

// wrap breaks text into lines of at most width columns (a longer word
// stands alone), each starting with indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(word) > width:
			b.WriteString("\n")
			n = 0
		default:
			b.WriteString(" ")
			n++
		}
		if n == 0 {
			b.WriteString(indent)
			n = len(indent)
		}
		b.WriteString(word)
		n += len(word)
	}
	b.WriteString("\n")
	return b.String()
}

// loopback reports whether a listen address serves this machine alone:
// localhost or a loopback IP, with a port.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// now is the gateway's clock: the machine's, moved by --test-clock-offset.
func (c config) now() time.Time { return time.Now().Add(c.ClockOffset) }
