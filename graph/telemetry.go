package graph

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// requestInfo is what a GraphQL request learns about itself as it runs: its
// operation and the codes of its errors. The HTTP middleware that made it
// reads it when the request ends.
type requestInfo struct {
	mu                  sync.Mutex
	operation, operType string
	codes               []string
	canceled            bool // the client went away before the answer
}

func requestInfoFrom(ctx context.Context) *requestInfo {
	if r := requestFrom(ctx); r != nil {
		return &r.info
	}
	return nil
}

func (ri *requestInfo) setOperation(name, typ string) {
	ri.mu.Lock()
	ri.operation, ri.operType = name, typ
	ri.mu.Unlock()
}

func (ri *requestInfo) addCode(code string) {
	ri.mu.Lock()
	ri.codes = append(ri.codes, code)
	ri.mu.Unlock()
}

// outcome is "canceled" when the client went away, else "ok" or the code
// of the request's first error. A client that cancels is not a failure of
// the gateway: it must not count against availability.
func (ri *requestInfo) outcome() string {
	ri.mu.Lock()
	defer ri.mu.Unlock()
	if ri.canceled {
		return "canceled"
	}
	if len(ri.codes) == 0 {
		return "ok"
	}
	return ri.codes[0]
}

// requestObserver counts, times and logs every GraphQL request.
type requestObserver struct {
	log      *slog.Logger
	refused  metric.Int64Counter // requests refused for --max-in-flight
	panics   metric.Int64Counter
	requests metric.Int64Counter
	duration metric.Float64Histogram
	mu       sync.Mutex
	names    map[string]bool // operation names with series of their own, at most maxOperationNames
	attrs    sync.Map        // requestLabels → metric.MeasurementOption
}

// requestLabels are the metric labels of a request.
type requestLabels struct{ name, typ, outcome string }

// maxOperationNames bounds the distinct operation names metrics carry:
// clients choose them, and each is a time series.
const maxOperationNames = 500

func newRequestObserver(meter metric.Meter, log *slog.Logger) (*requestObserver, error) {
	o := &requestObserver{log: log, names: map[string]bool{}}
	var err error
	if o.requests, err = meter.Int64Counter("listgate.graphql.requests",
		metric.WithDescription("GraphQL requests, by operation name, operation type and outcome (ok, canceled by the client, or the first error's code).")); err != nil {
		return nil, err
	}
	if o.refused, err = meter.Int64Counter("listgate.graphql.refused",
		metric.WithDescription("GraphQL requests refused because --max-in-flight were being served.")); err != nil {
		return nil, err
	}
	if o.panics, err = meter.Int64Counter("listgate.panics",
		metric.WithDescription("Panics recovered in resolvers and loaders; each failed its field with INTERNAL.")); err != nil {
		return nil, err
	}
	if o.duration, err = meter.Float64Histogram("listgate.graphql.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of GraphQL requests, by operation name, type and outcome.")); err != nil {
		return nil, err
	}
	return o, nil
}

// labels returns the attribute set of a request's metrics, made once per
// distinct labels. Operation names past the first maxOperationNames (and
// names longer than 64 bytes) are counted as "other".
func (o *requestObserver) labels(name, typ, outcome string) metric.MeasurementOption {
	if name == "" {
		name = "anonymous"
	}
	key := requestLabels{name, typ, outcome}
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
		attribute.String("outcome", key.outcome),
	))
	o.attrs.Store(key, a)
	return a
}

// done counts, times and logs a finished request.
func (o *requestObserver) done(ctx context.Context, ri *requestInfo, took time.Duration) {
	outcome := ri.outcome()
	ri.mu.Lock()
	name, typ := ri.operation, ri.operType
	ri.mu.Unlock()
	attrs := o.labels(name, typ, outcome)
	o.requests.Add(ctx, 1, attrs)
	o.duration.Record(ctx, took.Seconds(), attrs)
	if len(name) > 64 {
		name = name[:64]
	}
	o.log.LogAttrs(ctx, slog.LevelInfo, "graphql request",
		slog.String("operation", name), slog.String("type", typ),
		slog.Duration("duration", took), slog.String("outcome", outcome))
}

// operationTracing is the gqlgen extension that gives every operation a
// span and tells the request's info its operation. resolverTracing gives
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
	if ri := requestInfoFrom(ctx); ri != nil {
		ri.setOperation(name, typ)
	}
	ctx, span := t.tracer.Start(ctx, typ+" "+name)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(semconv.GraphQLOperationName(name), attribute.String("graphql.operation.type", typ))
	}
	resp := next(ctx)
	if resp != nil && len(resp.Errors) > 0 {
		span.SetStatus(codes.Error, resp.Errors[0].Message)
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
