// Package telemetry sets up OpenTelemetry for the process: a tracer
// provider that exports over OTLP only when the standard OTEL_* variables
// ask for it, a meter provider read by a Prometheus registry for /metrics,
// and the request id and log handler every log line carries. Packages
// instrument themselves through the providers; none reaches back here.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// LatencyBuckets are the bounds, in seconds, of every latency histogram:
// 100 µs to 10 s, so a sub-millisecond ScyllaDB read and a multi-second
// timeout both land in a bucket of their own.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Telemetry holds the process's providers.
type Telemetry struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	registry       *prometheus.Registry
	shutdown       []func(context.Context) error
	atZero         atomic.Pointer[[]*dto.MetricFamily] // AtZero's, replaced whole
}

// Options are for tests: a span processor (an in-memory recorder, say)
// turns tracing on without exporting anything.
type Options struct {
	SpanProcessor sdktrace.SpanProcessor
}

// exporting reports whether the OTEL_* variables ask for traces to be
// exported. With none of them set nothing is exported, and spans are not
// even recorded.
func exporting(getenv func(string) string) bool {
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// Setup builds the providers. Call Shutdown to flush them.
func Setup(ctx context.Context, getenv func(string) string, opts Options) (*Telemetry, error) {
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithAttributes(semconv.ServiceName("listgate")))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	t := &Telemetry{TracerProvider: noop.NewTracerProvider()}
	if opts.SpanProcessor != nil || exporting(getenv) {
		tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if opts.SpanProcessor != nil {
			tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(opts.SpanProcessor))
		} else {
			exp, err := autoexport.NewSpanExporter(ctx)
			if err != nil {
				return nil, fmt.Errorf("trace exporter from OTEL_* variables: %w", err)
			}
			tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
		}
		tp := sdktrace.NewTracerProvider(tpOpts...)
		t.TracerProvider = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	t.registry = prometheus.NewRegistry()
	t.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reader, err := otelprom.New(otelprom.WithRegisterer(t.registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	latency := sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: LatencyBuckets}},
	)
	mpOpts := []sdkmetric.Option{sdkmetric.WithReader(reader), sdkmetric.WithResource(res), sdkmetric.WithView(latency)}
	if !t.Tracing() {
		// Exemplars name sampled spans; with no spans, the default filter
		// only looks each measurement's context through for one.
		mpOpts = append(mpOpts, sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	}
	mp := sdkmetric.NewMeterProvider(mpOpts...)
	t.MeterProvider = mp
	t.shutdown = append(t.shutdown, mp.Shutdown)
	return t, nil
}

// Tracing reports whether spans are recorded (and exported) at all.
func (t *Telemetry) Tracing() bool {
	_, off := t.TracerProvider.(noop.TracerProvider)
	return !off
}

// MetricsHandler serves every metric in the Prometheus text format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(zeroed{t}, promhttp.HandlerOpts{})
}

// AtZero has /metrics show the histogram name (as Prometheus names it),
// with its bucket bounds, empty until its first observation: the
// OpenTelemetry exporter shows an instrument only once it has measured
// something, so a dashboard's quantile of it would say "No data", and an
// absent() alert would fire. Counters need none of this: they are added 0
// where they are made.
func (t *Telemetry) AtZero(name, help string, bounds []float64) {
	h := &dto.Histogram{SampleCount: new(uint64(0)), SampleSum: new(0.0)}
	for _, b := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: new(b), CumulativeCount: new(uint64(0))})
	}
	f := &dto.MetricFamily{Name: new(name), Help: new(help), Type: dto.MetricType_HISTOGRAM.Enum(),
		Metric: []*dto.Metric{{Histogram: h}}}
	for {
		old := t.atZero.Load()
		var next []*dto.MetricFamily
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, f)
		if t.atZero.CompareAndSwap(old, &next) {
			return
		}
	}
}

// zeroed gathers the registry, and the AtZero histograms it lacks.
type zeroed struct{ t *Telemetry }

func (z zeroed) Gather() ([]*dto.MetricFamily, error) {
	fams, err := z.t.registry.Gather()
	zero := z.t.atZero.Load()
	if zero == nil {
		return fams, err
	}
	have := make(map[string]bool, len(fams))
	for _, f := range fams {
		have[f.GetName()] = true
	}
	for _, f := range *zero {
		if !have[f.GetName()] {
			fams = append(fams, f)
		}
	}
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return fams, err
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
