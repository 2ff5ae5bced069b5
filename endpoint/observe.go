package endpoint

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/operation"
)

// observer counts, times and logs every GraphQL operation, whatever its
// transport: one log line and one sample of each metric per operation.
type observer struct {
	log      *slog.Logger
	refused  metric.Int64Counter // operations refused for --max-in-flight
	panics   metric.Int64Counter
	requests metric.Int64Counter
	compiled atomic.Int64 // operations made by a compiled document's plan
	gqlgen   atomic.Int64 // operations made by gqlgen
	duration metric.Float64Histogram
	mu       sync.Mutex
	names    map[string]bool // operation names with series of their own, at most maxOperationNames
	attrs    sync.Map        // seriesKey → metric.MeasurementOption
}

// seriesKey is the labels of one series of an operation's metrics.
type seriesKey struct{ name, typ, transport, outcome string }

// maxOperationNames bounds the distinct operation names metrics carry:
// clients choose them, and each is a time series.
const maxOperationNames = 500

func newObserver(meter metric.Meter, log *slog.Logger) (*observer, error) {
	o := &observer{log: log, names: map[string]bool{}}
	var err error
	if o.requests, err = meter.Int64Counter("listgate.graphql.requests",
		metric.WithDescription("GraphQL operations, by operation name, operation type, transport (post, get, websocket) and outcome (ok, canceled by the client, or the first error's code).")); err != nil {
		return nil, err
	}
	// Counted in atomics, observed at each collection: the compiled
	// path's point is its cost per request.
	if _, err = meter.Int64ObservableCounter("listgate.graphql.paths",
		metric.WithDescription("GraphQL operations made, by path: compiled (the plan of a document seen before) or gqlgen (parsed, validated and coerced by gqlgen)."),
		metric.WithInt64Callback(func(_ context.Context, obs metric.Int64Observer) error {
			obs.Observe(o.compiled.Load(), compiledPath)
			obs.Observe(o.gqlgen.Load(), gqlgenPath)
			return nil
		})); err != nil {
		return nil, err
	}
	if o.refused, err = meter.Int64Counter("listgate.graphql.refused",
		metric.WithDescription("GraphQL operations refused because --max-in-flight were being served.")); err != nil {
		return nil, err
	}
	if o.panics, err = meter.Int64Counter("listgate.panics",
		metric.WithDescription("Panics recovered in resolvers and loaders; each failed its field with INTERNAL.")); err != nil {
		return nil, err
	}
	if o.duration, err = meter.Float64Histogram("listgate.graphql.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of GraphQL operations, by operation name, type, transport and outcome.")); err != nil {
		return nil, err
	}
	// At zero from the start: a dashboard shows 0, not "No data", and an
	// absent() alert fires only for a gateway that is not scraped.
	o.refused.Add(context.Background(), 0)
	o.panics.Add(context.Background(), 0)
	return o, nil
}

// The paths an operation is made by.
var (
	compiledPath = metric.WithAttributeSet(attribute.NewSet(attribute.String("path", "compiled")))
	gqlgenPath   = metric.WithAttributeSet(attribute.NewSet(attribute.String("path", "gqlgen")))
)

// made counts an operation made, by its path.
func (o *observer) made(compiled bool) {
	if compiled {
		o.compiled.Add(1)
	} else {
		o.gqlgen.Add(1)
	}
}

// labels returns the attribute set of an operation's metrics, made once
// per distinct labels. Operation names past the first maxOperationNames
// (and names longer than 64 bytes) are counted as "other".
func (o *observer) labels(name, typ, transport, outcome string) metric.MeasurementOption {
	if name == "" {
		name = "anonymous"
	}
	key := seriesKey{name, typ, transport, outcome}
	if a, ok := o.attrs.Load(key); ok {
		return a.(metric.MeasurementOption)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.names[name] {
		if len(o.names) >= maxOperationNames || len(name) > 64 {
			key.name = "other"
		} else {
			o.names[name] = true
		}
	}
	if a, ok := o.attrs.Load(key); ok {
		return a.(metric.MeasurementOption)
	}
	a := metric.WithAttributeSet(attribute.NewSet(
		semconv.GraphQLOperationName(key.name),
		attribute.String("graphql.operation.type", key.typ),
		attribute.String("transport", key.transport),
		attribute.String("outcome", key.outcome),
	))
	o.attrs.Store(key, a)
	return a
}

// done counts, times and logs a finished operation.
func (o *observer) done(ctx context.Context, op *operation.Operation) {
	took := time.Since(op.Start)
	outcome := op.Outcome()
	name, typ := op.Name()
	attrs := o.labels(name, typ, op.Transport, outcome)
	o.requests.Add(ctx, 1, attrs)
	o.duration.Record(ctx, took.Seconds(), attrs)
	if len(name) > 64 {
		name = name[:64]
	}
	o.log.LogAttrs(ctx, slog.LevelInfo, "graphql request",
		slog.String("operation", name), slog.String("type", typ), slog.String("transport", op.Transport),
		slog.String("caller", op.Caller), slog.Duration("duration", took), slog.String("outcome", outcome))
}

// operationTracing is the gqlgen extension that gives every operation a
// span and records its name and type in its state. resolverTracing gives
// every resolver (a field that does I/O) a child span; plain struct fields
// get none. Neither records the query text or variables: they may hold item
// values.
type operationTracing struct{ tracer trace.Tracer }

type resolverTracing struct{ tracer trace.Tracer }

var (
	_ graphql.ResponseInterceptor = operationTracing{}
	_ graphql.FieldInterceptor    = resolverTracing{}
)

func (operationTracing) ExtensionName() string                   { return "OperationTracing" }
func (operationTracing) Validate(graphql.ExecutableSchema) error { return nil }
func (resolverTracing) ExtensionName() string                    { return "ResolverTracing" }
func (resolverTracing) Validate(graphql.ExecutableSchema) error  { return nil }

func operationOf(oc *graphql.OperationContext) (name, typ string) {
	if oc.Operation != nil {
		typ = string(oc.Operation.Operation)
		name = oc.Operation.Name
	}
	return name, typ
}

func (t operationTracing) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	if !graphql.HasOperationContext(ctx) {
		return next(ctx)
	}
	name, typ := operationOf(graphql.GetOperationContext(ctx))
	if op := operation.From(ctx); op != nil {
		op.SetName(name, typ)
	}
	ctx, span := t.tracer.Start(ctx, typ+" "+name)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(semconv.GraphQLOperationName(name), attribute.String("graphql.operation.type", typ))
	}
	resp := next(ctx)
	if resp != nil && len(resp.Errors) > 0 {
		// The code, not the message: a message may quote a value the
		// request sent.
		code, _ := resp.Errors[0].Extensions["code"].(string)
		span.SetStatus(codes.Error, code)
		span.SetAttributes(attribute.Int("graphql.errors", len(resp.Errors)))
	}
	return resp
}

func (t resolverTracing) InterceptField(ctx context.Context, next graphql.Resolver) (any, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !fc.IsResolver {
		return next(ctx)
	}
	ctx, span := t.tracer.Start(ctx, fc.Object+"."+fc.Field.Name)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("graphql.field.path", fc.Path().String()))
	}
	res, err := next(ctx)
	if err != nil {
		span.SetStatus(codes.Error, classify(err))
	}
	return res, err
}
