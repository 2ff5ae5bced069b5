package cql

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// observer turns every statement and batch the driver runs into a span
// (OpenTelemetry database conventions), a latency sample, and, above the
// slow threshold, a log line. It sees statements as prepared, with "?" for
// every value, so no value reaches a span or a log. It gives the
// speculative delay the latency of every read of the keyspace that
// answered, and the slow hosts every attempt. Slow statements are logged
// through slowLog, which summarizes them under load.
type observer struct {
	spec     *speculation
	hosts    *slowHosts
	tracer   trace.Tracer
	duration metric.Float64Histogram
	errors   metric.Int64Counter
	slow     time.Duration // --slow-query
	slowLog  *slowLog
	cfg      *Config
	stmts    [2]sync.Map // statement → *statementInfo, of statements [0] and of batches [1]
}

type statementInfo struct {
	query, operation, namespace, table, consistency, spanName string
	read                                                      bool // a SELECT of the keyspace's tables
	ok, failed                                                metric.MeasurementOption
	spanAttrs                                                 []attribute.KeyValue
}

func newObserver(cfg *Config, spec *speculation, hosts *slowHosts) (*observer, error) {
	meter := cfg.MeterProvider.Meter("github.com/listgate/listgate/store/cql")
	o := &observer{
		spec:    spec,
		hosts:   hosts,
		tracer:  cfg.TracerProvider.Tracer("github.com/listgate/listgate/store/cql"),
		slow:    cfg.SlowQuery,
		slowLog: newSlowLog(cfg.Log, slowLogInterval),
		cfg:     cfg,
	}
	var err error
	if o.duration, err = meter.Float64Histogram("listgate.cql.statement.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of CQL statements and batches, per attempt, by operation and outcome.")); err != nil {
		return nil, err
	}
	if o.errors, err = meter.Int64Counter("listgate.cql.statement.errors",
		metric.WithDescription("CQL statement attempts that failed, by operation and error.")); err != nil {
		return nil, err
	}
	return o, nil
}

// info parses a statement once: its operation, keyspace and table.
func (o *observer) info(stmt string, batch bool) *statementInfo {
	stmts := &o.stmts[b2i(batch)]
	if v, ok := stmts.Load(stmt); ok {
		return v.(*statementInfo)
	}
	fields := strings.Fields(stmt)
	op := ""
	if len(fields) > 0 {
		op = strings.ToUpper(fields[0])
	}
	target := ""
	for i, f := range fields[:max(len(fields)-1, 0)] {
		switch strings.ToUpper(f) {
		case "FROM", "INTO", "UPDATE", "TABLE", "ON", "EXISTS":
			if target == "" || strings.ToUpper(f) == "EXISTS" {
				target = strings.TrimSuffix(fields[i+1], "(")
			}
		}
	}
	ns, table, found := strings.Cut(target, ".")
	if !found {
		ns, table = "", target
	}
	consistency := o.cfg.WriteConsistency.String()
	switch {
	case op == "SELECT":
		consistency = o.cfg.ReadConsistency.String()
	case strings.Contains(stmt, " IF "):
		consistency = o.cfg.SerialConsistency.String()
	case op == "CREATE":
		consistency = ""
	}
	if batch {
		op = "BATCH " + op
	}
	info := &statementInfo{query: stmt, operation: op, namespace: ns, table: table, consistency: consistency, spanName: strings.TrimSpace(op + " " + table),
		read: op == "SELECT" && ns == o.cfg.Keyspace}
	kind := attribute.String("db.operation.name", info.spanName)
	info.ok = metric.WithAttributeSet(attribute.NewSet(kind, attribute.String("outcome", "ok")))
	info.failed = metric.WithAttributeSet(attribute.NewSet(kind, attribute.String("outcome", "error")))
	info.spanAttrs = []attribute.KeyValue{
		semconv.DBSystemNameCassandra,
		attribute.String("db.system", "cassandra"), // the name before semantic conventions 1.26
		semconv.DBOperationName(op),
		semconv.DBNamespace(ns),
		semconv.DBCollectionName(table),
		semconv.DBQueryText(stmt),
	}
	if consistency != "" {
		info.spanAttrs = append(info.spanAttrs, semconv.CassandraConsistencyLevelKey.String(strings.ToLower(consistency)))
	}
	v, _ := stmts.LoadOrStore(stmt, info)
	return v.(*statementInfo)
}

func (o *observer) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	o.observe(ctx, o.info(q.Statement, false), q.Start, q.End, q.Err, q.Host, q.Attempt,
		semconv.DBResponseReturnedRows(q.Rows))
}

func (o *observer) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	stmt := ""
	if len(b.Statements) > 0 {
		stmt = b.Statements[0]
	}
	o.observe(ctx, o.info(stmt, true), b.Start, b.End, b.Err, b.Host, b.Attempt,
		semconv.DBOperationBatchSize(len(b.Statements)))
}

func (o *observer) observe(ctx context.Context, info *statementInfo, start, end time.Time, err error, host *gocql.HostInfo, attempt int, extra attribute.KeyValue) {
	took := end.Sub(start)
	if err == nil && info.read {
		o.spec.observe(took)
	}
	o.hosts.observe(ctx, host, took, err)
	if err != nil {
		o.duration.Record(ctx, took.Seconds(), info.failed)
		o.errors.Add(ctx, 1, metric.WithAttributes(attribute.String("db.operation.name", info.spanName), semconv.ErrorTypeKey.String(errorType(err))))
	} else {
		o.duration.Record(ctx, took.Seconds(), info.ok)
	}
	hostAddr := func() string {
		if host == nil {
			return ""
		}
		return host.ConnectAddress().String()
	}
	if _, span := o.tracer.Start(ctx, info.spanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start)); span.IsRecording() {
		span.SetAttributes(info.spanAttrs...)
		span.SetAttributes(extra, semconv.ServerAddress(hostAddr()), attribute.Int("cassandra.attempt", attempt))
		if host != nil {
			span.SetAttributes(semconv.CassandraCoordinatorID(host.HostID()), semconv.CassandraCoordinatorDC(host.DataCenter()))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, errorType(err))
			span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		}
		span.End(trace.WithTimestamp(end))
	}
	if o.slow > 0 && took >= o.slow {
		o.slowLog.record(slowStatement{ctx: ctx, statement: info.spanName, query: info.query, took: took, host: hostAddr(), attempt: attempt, err: err}, time.Now())
	}
}

// zeroErrors puts listgate_cql_statement_errors_total at zero, from the
// start, for every statement of the keyspace's tables the store runs (and
// the batches of its adds), by every error type: a dashboard shows 0, not
// "No data", and an absent() alert fires only for a gateway not scraped.
func (o *observer) zeroErrors(st *statements) {
	seen := map[string]bool{}
	zero := func(stmt string, batch bool) {
		info := o.info(stmt, batch)
		if info.namespace != o.cfg.Keyspace || seen[info.spanName] {
			return
		}
		seen[info.spanName] = true
		for _, e := range errorTypes {
			o.errors.Add(context.Background(), 0, metric.WithAttributes(attribute.String("db.operation.name", info.spanName), semconv.ErrorTypeKey.String(e)))
		}
	}
	st.each(func(stmt string) { zero(stmt, false) })
	zero(st.insertItem, true)
	zero(st.insertChange, true)
}

// errorTypes are the names errorType gives.
var errorTypes = []string{"unavailable", "overloaded", "bootstrapping", "write_timeout", "read_timeout", "read_failure",
	"write_failure", "invalid", "server_error", "canceled", "timeout", "no_connections", "other"}

// errorType names an error for metrics and spans by its kind, not its text.
func errorType(err error) string {
	if code, ok := serverErrorCode(err); ok {
		switch code {
		case gocql.ErrCodeUnavailable:
			return "unavailable"
		case gocql.ErrCodeOverloaded:
			return "overloaded"
		case gocql.ErrCodeBootstrapping:
			return "bootstrapping"
		case gocql.ErrCodeWriteTimeout:
			return "write_timeout"
		case gocql.ErrCodeReadTimeout:
			return "read_timeout"
		case gocql.ErrCodeReadFailure:
			return "read_failure"
		case gocql.ErrCodeWriteFailure:
			return "write_failure"
		case gocql.ErrCodeInvalid, gocql.ErrCodeSyntax:
			return "invalid"
		}
		return "server_error"
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, gocql.ErrTimeoutNoResponse):
		return "timeout"
	case errors.Is(err, gocql.ErrNoConnections):
		return "no_connections"
	}
	return "other"
}
