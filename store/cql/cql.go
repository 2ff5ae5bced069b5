// Package cql is the list store on ScyllaDB or Apache Cassandra. Every list
// operation is one single-partition statement (or one single-partition
// batch) on the list_items table of the published design; feature metadata
// lives in list_features and changes only through lightweight transactions.
// Every statement is a constant built at Open and prepared once by the
// driver; values are always bound, never spliced into CQL.
package cql

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Config says how to reach the cluster and how to use it.
type Config struct {
	Hosts    []string // host or host:port
	Keyspace string
	LocalDC  string // data centre for DC-aware routing; "" routes to all
	Username string
	Password string
	TLS      *TLS // nil: connections in plain text

	ReadConsistency   gocql.Consistency
	WriteConsistency  gocql.Consistency
	SerialConsistency gocql.Consistency // for feature metadata transactions

	Timeout        time.Duration // per statement attempt
	ConnectTimeout time.Duration
	NumConns       int // connections per host (per shard on ScyllaDB)
	Retries        int // retries of idempotent statements

	Limits store.Limits

	// Telemetry: a span and a latency sample per statement attempt, and a
	// log line for statements slower than SlowQuery (0: none).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	SlowQuery      time.Duration
	Log            *slog.Logger
	// RecreateWait is how long after its deletion a feature may be created
	// again with another value type or cap (store.CheckRecreate).
	RecreateWait time.Duration
	// Feed tunes the change feed.
	Feed FeedConfig
	// Now is the clock used for TTLs; time.Now when nil.
	Now func() time.Time
	// LongScans is how many scans of more than a page read at once
	// (store.Turns); 0: half the cores.
	LongScans int
	// Speculation says how reads are sent to a second host when the
	// first is slow (speculation.go).
	Speculation SpeculationConfig
	// Export tunes the token-range scans of an export (export.go); the
	// zero value reads as DefaultExport.
	Export ExportConfig
}

// DefaultConfig returns the settings for a local single node.
func DefaultConfig() Config {
	return Config{
		Hosts:             []string{"127.0.0.1"},
		Keyspace:          "listgate",
		ReadConsistency:   gocql.LocalQuorum,
		WriteConsistency:  gocql.LocalQuorum,
		SerialConsistency: gocql.LocalSerial,
		Timeout:           2 * time.Second,
		ConnectTimeout:    5 * time.Second,
		NumConns:          2,
		Retries:           2,
		Limits:            store.DefaultLimits,
		TracerProvider:    tracenoop.NewTracerProvider(),
		MeterProvider:     metricnoop.NewMeterProvider(),
		RecreateWait:      store.DefaultRecreateWait,
		Feed:              DefaultFeedConfig,
		Log:               slog.New(slog.DiscardHandler),
		Speculation:       DefaultSpeculation,
	}
}

// Store is a store.Store on a CQL cluster.
type Store struct {
	session *gocql.Session
	cfg     Config
	now     func() time.Time
	scylla  bool
	cap     time.Time // latest expiry date the cluster accepts
	stmt    statements
	// batchType is how AddItems batches; see there.
	batchType gocql.BatchType
	// sharedRecord bounds a record that goes in its add's batch
	// (sharedRecordBytes; changed by benchmarks).
	sharedRecord int
	rows         *store.RowMeter
	turns        *store.Turns // the long scans'
	spec         *speculation // which reads go to a second host, and when
	slow         *slowHosts   // the hosts at the back of the plans

	// The change feed (feed.go): its identity (its cluster and
	// keyspace), this gateway's measure of the cluster's clock, its
	// writer, the consistency its records and leases are written at
	// (CheckFeedConsistency), the settled end last read (lease.go), and
	// the audit of records come late (audit.go).
	feedID       [4]byte
	clock        *clock
	writer       *feedWriter
	feedWrite    gocql.Consistency
	settledTick  atomic.Int64 // ticks
	settledAt    atomic.Int64 // clock.since() of the read that set it; 0: none yet
	audit        lateAudit
	headsPerRead int // headsPerRead; changed by tests
	feedLag      metric.Float64Histogram
	lateRecords  metric.Int64Counter
	lateLogged   atomic.Bool
	tracer       trace.Tracer
	// stop ends the clock's and the lease's goroutines (background), which
	// Close waits for.
	stop       context.CancelFunc
	background sync.WaitGroup
	slowLog    *slowLog // the observer's, closed with the store
}

var _ store.Store = (*Store)(nil)

// each calls f with every statement.
func (st *statements) each(f func(stmt string)) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			if v.String() != "" {
				f(v.String())
			}
		case reflect.Array, reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(*st))
}

type statements struct {
	// scans[values][writeTimes] reads rows of one list between two keys,
	// newest first; scansAscending[writeTimes] reads them with values,
	// oldest first.
	scans                                                                         [2][2]string
	scansAscending                                                                [2]string
	fetchItems, insertItem, deleteItems, deleteBelow, deleteList, selectTTL       string
	countRows, insertChange, selectChangeHeads, selectChanges, selectChangeIDs    string
	publishWriter, releaseWriter, selectWriters, selectReplication                string
	selectChangeKeys                                                              string
	insertFeature, selectFeature, selectFeatures, selectFeaturesOfType            string
	recreateFeature, deleteFeature, schemaTables, schemaColumns, addFeatureColumn string
	setFeatureLive                                                                string
}

func newStatements(ks string) statements {
	items, features := ks+".list_items", ks+".list_features"
	const featureColumns = "entity_type, name, version, value_type, ttl_seconds, description, created_at, deleted_at, max_items, items_since, live, live_since"
	const where = " WHERE feature_key = ? AND entity_id = ?"
	scan := func(columns string) string {
		return "SELECT " + columns + " FROM " + items + where + " AND item_key >= ? AND item_key < ? LIMIT ?"
	}
	return statements{
		scans: [2][2]string{
			{scan("item_key"), scan("item_key, WRITETIME(value)")},
			{scan("item_key, value"), scan("item_key, value, WRITETIME(value)")},
		},
		scansAscending: [2]string{
			strings.Replace(scan("item_key, value"), " LIMIT", " ORDER BY item_key ASC LIMIT", 1),
			strings.Replace(scan("item_key, value, WRITETIME(value)"), " LIMIT", " ORDER BY item_key ASC LIMIT", 1),
		},
		fetchItems:        "SELECT item_key, value FROM " + items + where + " AND item_key IN ?",
		insertChange:      "INSERT INTO " + ks + ".list_changes (bucket, shard, id, feature_key, created_at, entity_id, item_keys, item_values, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
		selectChangeHeads: "SELECT id, feature_key, created_at, entity_id, bytes FROM " + ks + ".list_changes WHERE bucket = ? AND shard = ? AND id > ? AND id < ? LIMIT ?",
		selectChangeIDs:   "SELECT id FROM " + ks + ".list_changes WHERE bucket = ? AND shard = ? AND id > ? AND id < ?",
		selectChangeKeys:  "SELECT item_keys FROM " + ks + ".list_changes WHERE bucket = ? AND shard = ? AND id = ?",
		publishWriter:     "INSERT INTO " + ks + ".list_change_writers (feed, writer, closed, expires) VALUES (0, ?, ?, ?) USING TTL ?",
		releaseWriter:     "DELETE FROM " + ks + ".list_change_writers WHERE feed = 0 AND writer = ?",
		selectWriters:     "SELECT writer, closed, expires FROM " + ks + ".list_change_writers WHERE feed = 0",
		selectReplication: "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?",
		selectChanges:     "SELECT id, feature_key, created_at, entity_id, item_keys, item_values FROM " + ks + ".list_changes WHERE bucket = ? AND shard = ? AND id IN ?",
		insertItem:        "INSERT INTO " + items + " (feature_key, entity_id, item_key, value) VALUES (?, ?, ?, ?) USING TTL ?",
		deleteItems:       "DELETE FROM " + items + where + " AND item_key IN ?",
		deleteBelow:       "DELETE FROM " + items + where + " AND item_key < ?",
		deleteList:        "DELETE FROM " + items + where,
		selectTTL:         "SELECT TTL(value) FROM " + items + where + " AND item_key = ?",
		countRows:         "SELECT COUNT(*) FROM " + items + where,

		insertFeature:        "INSERT INTO " + features + " (entity_type, name, version, value_type, ttl_seconds, description, created_at, max_items, live) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS",
		selectFeature:        "SELECT " + featureColumns + " FROM " + features + " WHERE entity_type = ? AND name = ? AND version = ?",
		selectFeatures:       "SELECT " + featureColumns + " FROM " + features,
		selectFeaturesOfType: "SELECT " + featureColumns + " FROM " + features + " WHERE entity_type = ?",
		recreateFeature:      "UPDATE " + features + " SET value_type = ?, ttl_seconds = ?, description = ?, created_at = ?, max_items = ?, items_since = ?, live = ?, live_since = null, deleted_at = null WHERE entity_type = ? AND name = ? AND version = ? IF deleted_at = ?",
		deleteFeature:        "UPDATE " + features + " SET deleted_at = ? WHERE entity_type = ? AND name = ? AND version = ? IF deleted_at = null AND created_at = ?",
		setFeatureLive:       "UPDATE " + features + " SET live = ?, live_since = ? WHERE entity_type = ? AND name = ? AND version = ? IF deleted_at = null AND created_at = ?",

		schemaTables:     "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?",
		schemaColumns:    "SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'list_features'",
		addFeatureColumn: "ALTER TABLE " + features + " ADD %s",
	}
}

// Open connects to the cluster. It does not touch the schema (see Migrate).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, nil)
}

// open is Open with a last say on the driver's settings, for tests.
func open(ctx context.Context, cfg Config, tune func(*gocql.ClusterConfig)) (*Store, error) {
	if !validKeyspace(cfg.Keyspace) {
		return nil, fmt.Errorf("%w keyspace %q: must match [a-z][a-z0-9_]{0,47}", errkind.Invalid, cfg.Keyspace)
	}
	if len(cfg.Hosts) == 0 {
		return nil, fmt.Errorf("%w CQL hosts: none given", errkind.Invalid)
	}
	cluster := gocql.NewCluster(cfg.Hosts...)
	cluster.Timeout = cfg.Timeout
	cluster.ConnectTimeout = cfg.ConnectTimeout
	cluster.NumConns = cfg.NumConns
	cluster.Consistency = cfg.ReadConsistency
	cluster.SerialConsistency = cfg.SerialConsistency
	cluster.RetryPolicy = retryNextHost{&gocql.ExponentialBackoffRetryPolicy{NumRetries: cfg.Retries, Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}}
	// Keep reconnecting to a node that went away, so the store recovers
	// without a restart when it comes back.
	cluster.ReconnectInterval = time.Second
	cluster.ReconnectionPolicy = &gocql.ExponentialReconnectionPolicy{MaxRetries: 1 << 20, InitialInterval: 100 * time.Millisecond, MaxInterval: 2 * time.Second}
	convict := &convictUp{}
	cluster.ConvictionPolicy = convict
	fallback := gocql.RoundRobinHostPolicy()
	if cfg.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(cfg.LocalDC)
	}
	if cfg.Speculation.Enabled && (cfg.Speculation.Budget <= 0 || cfg.Speculation.Budget > 1) {
		return nil, fmt.Errorf("%w speculative budget %v: must be above 0 and at most 1", errkind.Invalid, cfg.Speculation.Budget)
	}
	began := time.Now()
	mono := func() int64 { return int64(time.Since(began)) + 1 }
	meter := cfg.MeterProvider.Meter("github.com/listgate/listgate/store/cql")
	spec, err := newSpeculation(cfg.Speculation, meter, mono)
	if err != nil {
		return nil, err
	}
	// Shuffled replicas (the token-aware policy's default) spread a
	// partition's reads over its replicas; a replica that does not answer
	// in time goes to the back of the plans (hosts.go).
	slow := newSlowHosts(gocql.TokenAwareHostPolicy(fallback, gocql.ShuffleReplicas()), mono, spec.Delay)
	if err := observeSlowHosts(meter, slow); err != nil {
		return nil, err
	}
	cluster.PoolConfig.HostSelectionPolicy = slow
	if cfg.Username != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
	}
	if cfg.TLS != nil {
		cluster.SslOpts = cfg.TLS.sslOptions()
	}
	obs, err := newObserver(&cfg, spec, slow)
	if err != nil {
		return nil, err
	}
	cluster.QueryObserver = obs
	cluster.BatchObserver = obs
	cluster.Logger = quietLogger{}
	if tune != nil {
		tune(cluster)
	}
	session, err := cluster.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to CQL hosts %s: %w", errkind.Unavailable, strings.Join(cfg.Hosts, ","), oneLine(err))
	}
	convict.session.Store(session)
	rows, err := store.NewRowMeter(cfg.MeterProvider)
	if err != nil {
		session.Close()
		return nil, err
	}
	s := &Store{session: session, cfg: cfg, now: cfg.Now, stmt: newStatements(cfg.Keyspace), batchType: gocql.LoggedBatch, sharedRecord: sharedRecordBytes, rows: rows, turns: store.NewTurns(cfg.LongScans),
		spec: spec, slow: slow, slowLog: obs.slowLog}
	obs.zeroErrors(&s.stmt)
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.Feed.MaxClockOffset <= 0 {
		s.cfg.Feed.MaxClockOffset = DefaultMaxClockOffset
	}
	s.clock = newClock(time.Now, s.now(), s.cfg.Feed.MaxClockOffset)
	s.feedWrite = cfg.WriteConsistency
	s.audit.after = auditAfter
	s.headsPerRead = headsPerRead
	if s.writer, err = newFeedWriter(); err != nil {
		session.Close()
		return nil, err
	}
	s.tracer = cfg.TracerProvider.Tracer("github.com/listgate/listgate/store/cql")
	if s.feedLag, err = meter.Float64Histogram("listgate.change_feed.lag", metric.WithUnit("s"),
		metric.WithDescription("How long after its time a change record was read: once every gateway's lease says it is written, with the clock's margin, and how far this gateway's reads of the feed trail it."),
		metric.WithExplicitBucketBoundaries(0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30)); err != nil {
		session.Close()
		return nil, err
	}
	if s.lateRecords, err = meter.Int64Counter("listgate.change_feed.late_records",
		metric.WithDescription("Change records found in the feed after this gateway's readers had passed their time, so not delivered: written later than the settled end (a write that timed out and was applied late, or a replica or data centre behind the consistency levels).")); err != nil {
		session.Close()
		return nil, err
	}
	s.lateRecords.Add(ctx, 0) // a series from the start, for the alert's rate
	if err := s.observeClock(meter); err != nil {
		session.Close()
		return nil, err
	}
	if err := s.probe(ctx); err != nil {
		session.Close()
		return nil, err
	}
	for range 3 {
		if err := s.measureClock(ctx); err != nil {
			s.cfg.Log.Warn("measuring the cluster's clock failed", "err", err)
		}
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.background.Add(2)
	go func() { defer s.background.Done(); s.runClock(bg) }()
	go func() { defer s.background.Done(); s.runLease(bg) }()
	return s, nil
}

// probe learns which server this is and the latest expiry date it stores.
func (s *Store) probe(ctx context.Context) error {
	var n int
	err := s.session.Query("SELECT COUNT(*) FROM system_schema.tables WHERE keyspace_name = 'system' AND table_name = 'scylla_local'").
		WithContext(ctx).Consistency(gocql.One).Scan(&n)
	if err != nil {
		return classify("probing the server", err)
	}
	s.scylla = n > 0
	var cluster string
	if err := s.session.Query("SELECT cluster_name FROM system.local").WithContext(ctx).Consistency(gocql.One).Scan(&cluster); err != nil {
		return classify("probing the server", err)
	}
	s.feedID = feedIdentity(cluster, s.cfg.Keyspace)
	s.cap = keys.ExpiryCap2038
	// Cassandra 5.0 with storage_compatibility_mode NONE stores expiry dates
	// up to 2106; every other server and mode stops at 2038.
	var mode string
	err = s.session.Query("SELECT value FROM system_views.settings WHERE name = 'storage_compatibility_mode'").
		WithContext(ctx).Consistency(gocql.One).Scan(&mode)
	if err == nil && mode == "NONE" {
		s.cap = keys.ExpiryCap2106
	}
	return nil
}

// ExpiryCap is the latest expiry date the cluster stores.
func (s *Store) ExpiryCap() time.Time { return s.cap }

// Limits are the bounds AddItems enforces.
func (s *Store) Limits() store.Limits { return s.cfg.Limits }

// Close closes the session.
func (s *Store) Close() error {
	s.stop()
	s.background.Wait() // the lease is let go of first
	s.session.Close()
	s.slowLog.close()
	return nil
}

func validKeyspace(ks string) bool {
	return keys.ValidateName("keyspace", ks) == nil && len(ks) <= 48
}

// quietLogger drops gocql's own log lines; failures reach callers as errors
// and telemetry sees every statement through the observer.
type quietLogger struct{}

func (quietLogger) Print(...any)          {}
func (quietLogger) Printf(string, ...any) {}
func (quietLogger) Println(...any)        {}

// classify wraps a driver error with the store's error kind. Timeouts,
// unavailable replicas and lost connections are errkind.Unavailable: the caller
// may retry. Anything else is a fault of the store and keeps its cause.
// serverErrorCode is the protocol error code of an error the server sent.
// scylladb/gocql's typed errors (*RequestErrUnavailable,
// *RequestErrWriteTimeout, …) give it as GetCode: none of them implements
// gocql.RequestError, whose method is Code.
func serverErrorCode(err error) (int, bool) {
	var e interface{ GetCode() int }
	if errors.As(err, &e) {
		return e.GetCode(), true
	}
	return 0, false
}

func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	err = oneLine(err)
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if code, ok := serverErrorCode(err); ok {
		switch code {
		// A server error is a coordinator failing on its side (a node that is
		// starting up, say): another attempt may well succeed.
		case gocql.ErrCodeServer, gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeBootstrapping,
			gocql.ErrCodeWriteTimeout, gocql.ErrCodeReadTimeout, gocql.ErrCodeReadFailure,
			gocql.ErrCodeWriteFailure, gocql.ErrCodeCASWriteUnknown, gocql.ErrCodeTruncate:
			return fmt.Errorf("%s: %w: %v", op, errkind.Unavailable, err)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var netErr net.Error
	for _, transient := range []error{gocql.ErrNoConnections, gocql.ErrTimeoutNoResponse, gocql.ErrConnectionClosed,
		gocql.ErrSessionClosed, gocql.ErrHostDown, gocql.ErrNoStreams, gocql.ErrNoPool, gocql.ErrNoConnectionsInPool,
		gocql.ErrNoConnectionsStarted, context.DeadlineExceeded} {
		if errors.Is(err, transient) {
			return fmt.Errorf("%s: %w: %v", op, errkind.Unavailable, err)
		}
	}
	if errors.As(err, &netErr) {
		return fmt.Errorf("%s: %w: %v", op, errkind.Unavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// oneLine is err on one line: some of the driver's errors end in line
// breaks (gocql's "unable to discover protocol version: …\n"), which a log
// line's field or a message must not carry.
func oneLine(err error) error {
	if !strings.ContainsAny(err.Error(), "\r\n") {
		return err
	}
	return lineError{err}
}

type lineError struct{ err error }

func (e lineError) Error() string {
	return strings.Join(strings.FieldsFunc(e.err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), " ")
}
func (e lineError) Unwrap() error { return e.err }
