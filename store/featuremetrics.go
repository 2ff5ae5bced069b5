package store

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MaxFeatureLabels bounds the values of the feature label of the
// per-feature metrics: the first this many features a gateway reads or
// writes have their own, by feature key; any other is counted as
// OtherFeature. Each feature costs nine series.
const MaxFeatureLabels = 100

// OtherFeature is the feature label of the features past MaxFeatureLabels.
const OtherFeature = "other"

// featureOps are the operations the per-feature metrics count, by the
// store operations they are made of.
var featureOps = map[string]string{
	"items": "read", "count": "read", "histogram": "read", "find": "read", "since": "read",
	"add":           "add",
	"remove_values": "remove", "remove_all": "remove",
}

// featureMetrics count each feature's operations, by outcome, and the
// items they add, read and remove:
// listgate_feature_operations_total{feature, operation, outcome} and
// listgate_feature_items_total{feature, operation}.
type featureMetrics struct {
	ops, items metric.Int64Counter
	series     sync.Map // feature key → *featureSeries; stored under mu alone

	mu     sync.Mutex     // guards labels and other, and each write of series
	labels int            // feature keys given a label of their own
	other  *featureSeries // of OtherFeature, once a key past the bound came
}

// featureSeries are one feature label's series: for each operation the
// options of its ok and error outcomes, and of its items.
type featureSeries struct {
	ops   map[string][2]metric.AddOption
	items map[string]metric.AddOption
}

func newFeatureMetrics(meter metric.Meter) (*featureMetrics, error) {
	m := &featureMetrics{}
	var err error
	if m.ops, err = meter.Int64Counter("listgate.feature.operations",
		metric.WithDescription("List operations on the store, by feature (the first 100 features; the rest as other), operation (add, read, remove) and outcome.")); err != nil {
		return nil, err
	}
	if m.items, err = meter.Int64Counter("listgate.feature.items",
		metric.WithDescription("Items added, read and removed, by feature (the first 100 features; the rest as other) and operation.")); err != nil {
		return nil, err
	}
	return m, nil
}

// record counts one store operation op on feature key, and the items it
// added, read or removed.
func (m *featureMetrics) record(ctx context.Context, key, op string, items int, err error) {
	s := m.of(ctx, key)
	name := featureOps[op]
	o := s.ops[name][0]
	if err != nil {
		o = s.ops[name][1]
	}
	m.ops.Add(ctx, 1, o)
	if items > 0 {
		m.items.Add(ctx, int64(items), s.items[name])
	}
}

// of returns the series of feature key, making them, at zero, the first
// time: a feature's errors show as 0 before its first one, not as no data.
// A key past the bound is kept too, pointing at the other series: keys are
// features of the catalog, which only features:admin creates.
func (m *featureMetrics) of(ctx context.Context, key string) *featureSeries {
	if s, ok := m.series.Load(key); ok {
		return s.(*featureSeries)
	}
	m.mu.Lock()
	if s, ok := m.series.Load(key); ok {
		m.mu.Unlock()
		return s.(*featureSeries)
	}
	label := key
	if m.labels < MaxFeatureLabels {
		m.labels++
	} else {
		label = OtherFeature
	}
	s, known := m.other, m.other != nil
	if label != OtherFeature || !known {
		s, known = newFeatureSeries(label), false
	}
	if label == OtherFeature {
		m.other = s
	}
	m.series.Store(key, s)
	m.mu.Unlock()
	if !known {
		for _, name := range []string{"add", "read", "remove"} {
			m.ops.Add(ctx, 0, s.ops[name][0])
			m.ops.Add(ctx, 0, s.ops[name][1])
			m.items.Add(ctx, 0, s.items[name])
		}
	}
	return s
}

func newFeatureSeries(label string) *featureSeries {
	s := &featureSeries{ops: map[string][2]metric.AddOption{}, items: map[string]metric.AddOption{}}
	for _, name := range []string{"add", "read", "remove"} {
		f, op := attribute.String("feature", label), attribute.String("operation", name)
		s.ops[name] = [2]metric.AddOption{
			metric.WithAttributeSet(attribute.NewSet(f, op, attribute.String("outcome", "ok"))),
			metric.WithAttributeSet(attribute.NewSet(f, op, attribute.String("outcome", "error"))),
		}
		s.items[name] = metric.WithAttributeSet(attribute.NewSet(f, op))
	}
	return s
}
