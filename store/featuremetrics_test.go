package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// failingRemoves is a store whose adds succeed and whose removals fail.
type failingRemoves struct{ quickAdds }

func (failingRemoves) RemoveAll(context.Context, List) error {
	return errors.New("the database did not answer")
}

// Each feature's adds, items and errors are counted under its own label,
// at zero before they happen, up to MaxFeatureLabels features; the rest
// share the label other.
func TestFeatureMetricsAreBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	in, err := Instrument(failingRemoves{}, mp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const features = MaxFeatureLabels + 5
	for i := range features {
		l := List{Feature: &Feature{EntityType: "user", Name: fmt.Sprint("f", i), ValueType: String, TTL: time.Hour}, EntityID: "u1"}
		if _, err := in.AddItems(ctx, l, []NewItem{{Value: []byte("a")}, {Value: []byte("b")}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := in.RemoveAll(ctx, l); err == nil {
				t.Fatal("RemoveAll did not fail")
			}
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	// by metric, then "feature operation outcome"
	got := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || (m.Name != "listgate.feature.operations" && m.Name != "listgate.feature.items") {
				continue
			}
			got[m.Name] = map[string]int64{}
			for _, dp := range sum.DataPoints {
				f, _ := dp.Attributes.Value(attribute.Key("feature"))
				op, _ := dp.Attributes.Value(attribute.Key("operation"))
				outcome, _ := dp.Attributes.Value(attribute.Key("outcome"))
				got[m.Name][fmt.Sprint(f.AsString(), " ", op.AsString(), " ", outcome.AsString())] = dp.Value
			}
		}
	}
	labels := map[string]bool{}
	for k := range got["listgate.feature.operations"] {
		label, _, _ := strings.Cut(k, " ")
		labels[label] = true
	}
	if len(labels) != MaxFeatureLabels+1 || !labels[OtherFeature] {
		t.Fatalf("%d feature labels (other: %v); want %d and other", len(labels), labels[OtherFeature], MaxFeatureLabels+1)
	}
	ops, items := got["listgate.feature.operations"], got["listgate.feature.items"]
	for key, want := range map[string]int64{
		"user#f0| add ok":       1,
		"user#f0| remove error": 1,
		"user#f0| remove ok":    0, // at zero from the start
		"user#f1| remove error": 0,
		"user#f1| read ok":      0,
		"other add ok":          5,
		"other add error":       0,
	} {
		if v, ok := ops[key]; !ok || v != want {
			t.Errorf("operations %q = %d (present: %v); want %d", key, v, ok, want)
		}
	}
	for key, want := range map[string]int64{"user#f0| add ": 2, "other add ": 10, "user#f1| read ": 0} {
		if v, ok := items[key]; !ok || v != want {
			t.Errorf("items %q = %d (present: %v); want %d", key, v, ok, want)
		}
	}
}
