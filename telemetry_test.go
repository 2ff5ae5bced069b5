package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/telemetry"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// One 3-entity request is one trace: the HTTP span, the operation span, the
// loader's batch span with the 3 keys, and under it one span per CQL query,
// with the database conventions' attributes. Then /metrics shows the
// request, the statements and the items.
func TestTraceAndMetricsOfARequest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	keyspace := fmt.Sprintf("listgate_tel_%d", os.Getpid())
	base := startWith(t, telemetry.Options{SpanProcessor: rec},
		"--cql-hosts", strings.Join(cqltest.Hosts(t), ","), "--cql-keyspace", keyspace, "--migrate",
		"--cql-timeout", "10s", "--loader-wait", "20ms", "--feature-refresh", "1s")
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	for _, id := range []string{"a", "b", "c"} {
		gatewaytest.Post(t, base, "", fmt.Sprintf(`mutation { addListItems(list: {entityType: "user", entityId: %q, feature: "f"},
			items: [{value: "story-%s"}, {value: "old", timestamp: "2020-01-01T00:00:00Z"}]) { added } }`, id, id))
	}
	_, out := gatewaytest.Post(t, base, "", `query ThreeLists { entities(type: "user", entityIds: ["a", "b", "c"]) { id list(feature: "f") { items { value } } } }`)
	if out["errors"] != nil {
		t.Fatalf("query: %v", out)
	}

	// The HTTP span ends just after the response is written.
	var spans []sdktrace.ReadOnlySpan
	var op sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		op, spans = nil, nil
		for _, s := range rec.Ended() {
			if s.Name() == "query ThreeLists" {
				op = s
			}
		}
		if op != nil {
			for _, s := range rec.Ended() {
				if s.SpanContext().TraceID() == op.SpanContext().TraceID() {
					spans = append(spans, s)
				}
			}
		}
		if op != nil && len(spans) > 0 && spans[len(spans)-1].Name() == "POST /graphql" || time.Now().After(deadline) {
			break
		}
	}
	if op == nil {
		t.Fatal("no span for the operation")
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	parent := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan { return byID[s.Parent().SpanID().String()] }
	descends := func(s, ancestor sdktrace.ReadOnlySpan) bool {
		for p := parent(s); p != nil; p = parent(p) {
			if p.SpanContext().SpanID() == ancestor.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}
	var httpSpan, batch sdktrace.ReadOnlySpan
	var cql []sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "POST /graphql":
			httpSpan = s
		case "Dataloader: batch":
			if batch != nil {
				t.Fatal("the 3 lists were read in more than one batch")
			}
			batch = s
		case "SELECT list_items":
			cql = append(cql, s)
		}
	}
	if httpSpan == nil || parent(op) != httpSpan {
		t.Fatalf("the operation span's parent is not the HTTP span")
	}
	if batch == nil || !descends(batch, op) {
		t.Fatal("no loader batch span under the operation span")
	}
	if keys := attrs(batch)["dataloader.keys"].AsString(); strings.Count(keys, "user#f|/") != 3 {
		t.Fatalf("batch keys %q", keys)
	}
	if len(cql) != 3 {
		t.Fatalf("%d CQL spans, want 3", len(cql))
	}
	for _, s := range cql {
		if parent(s) != batch {
			t.Fatalf("CQL span %s is not a child of the batch span", s.Name())
		}
		a := attrs(s)
		for k, want := range map[attribute.Key]string{
			"db.system.name": "cassandra", "db.system": "cassandra", "db.operation.name": "SELECT",
			"db.namespace": keyspace, "db.collection.name": "list_items", "cassandra.consistency.level": "local_quorum",
			"server.address": "127.0.0.1",
		} {
			if got := a[k].String(); got != want {
				t.Errorf("CQL span %s = %q, want %q", k, got, want)
			}
		}
		if a["db.response.returned_rows"].AsInt64() != 1 || a["cassandra.attempt"].AsInt64() != 0 || !strings.Contains(a["db.query.text"].AsString(), "?") {
			t.Errorf("CQL span attributes %v", a)
		}
	}
	// Nothing of the request's values reaches any span.
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "story-") {
				t.Errorf("span %s carries a value: %s=%s", s.Name(), kv.Key, kv.Value.String())
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].StartTime().Before(spans[j].StartTime()) })
	var tree strings.Builder
	for _, s := range spans {
		depth := 0
		for p := parent(s); p != nil; p = parent(p) {
			depth++
		}
		fmt.Fprintf(&tree, "%s%s %v\n", strings.Repeat("  ", depth), s.Name(), s.EndTime().Sub(s.StartTime()).Round(time.Microsecond))
	}
	t.Logf("trace of the 3-entity request:\n%s", tree.String())

	checkMetrics(t, base)
}

// checkMetrics scrapes /metrics after the traffic above.
func checkMetrics(t *testing.T, base string) {
	families := metricFamilies(t, base)
	value := func(name string, labels map[string]string) float64 {
		f := families[name]
		if f == nil {
			t.Fatalf("no series %s", name)
		}
		total := 0.0
	metrics:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
		return total
	}
	for _, c := range []struct {
		name     string
		labels   map[string]string
		min, max float64
	}{
		{"listgate_graphql_requests_total", map[string]string{"graphql_operation_name": "ThreeLists", "outcome": "ok"}, 1, 1},
		{"listgate_graphql_requests_total", map[string]string{"graphql_operation_type": "mutation", "outcome": "ok"}, 4, 4},
		{"listgate_graphql_request_duration_seconds", map[string]string{"graphql_operation_name": "ThreeLists"}, 1, 1},
		{"listgate_cql_statement_duration_seconds", map[string]string{"db_operation_name": "SELECT list_items", "outcome": "ok"}, 3, 1e9},
		{"listgate_cql_statement_duration_seconds", map[string]string{"db_operation_name": "BATCH INSERT list_items"}, 3, 1e9},
		{"listgate_list_items_read_total", nil, 3, 3},
		{"listgate_list_items_added_total", nil, 3, 3},
		{"listgate_list_items_expired_total", nil, 3, 3},
		{"listgate_loader_batch_size", nil, 1, 1},
		{"listgate_features_refreshes_total", map[string]string{"outcome": "ok"}, 2, 1e9},
		{"listgate_features_age_seconds", nil, 0, 5},
	} {
		if v := value(c.name, c.labels); v < c.min || v > c.max {
			t.Errorf("%s%v = %v, want %v to %v", c.name, c.labels, v, c.min, c.max)
		}
	}
	// Latency buckets resolve sub-millisecond and multi-second requests.
	h := families["listgate_graphql_request_duration_seconds"].Metric[0].Histogram
	bounds := []float64{}
	for _, b := range h.Bucket {
		bounds = append(bounds, b.GetUpperBound())
	}
	if bounds[0] > 0.0005 || bounds[len(bounds)-1] < 5 {
		t.Errorf("latency buckets %v", bounds)
	}
}

// A client that goes away is counted as canceled, not as the gateway being
// unavailable.
func TestCanceledRequestIsCountedAsCanceled(t *testing.T) {
	// Two pages, so that they go through the loader, which waits.
	base := start(t, "--data-dir", t.TempDir(), "--loader-wait", "1500ms")
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/graphql",
		strings.NewReader(`{"query": "query Slow { entity(type: \"user\", entityId: \"u1\") { a: list(feature: \"f\") { items { value } } b: list(feature: \"f\", limit: 1) { hasMore } } }"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the request was answered before the client gave up")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := scrape(t, base)
		if m["Slow"]["canceled"] == 1 {
			if n := m["Slow"]["UNAVAILABLE"]; n != 0 {
				t.Fatalf("also counted %v times as UNAVAILABLE", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests by outcome: %v; want Slow counted once as canceled", m["Slow"])
		}
	}
}

// scrape reads listgate_graphql_requests_total by operation and outcome.
func scrape(t *testing.T, base string) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	if f := metricFamilies(t, base)["listgate_graphql_requests_total"]; f != nil {
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			op := labels["graphql_operation_name"]
			if out[op] == nil {
				out[op] = map[string]float64{}
			}
			out[op][labels["outcome"]] += m.Counter.GetValue()
		}
	}
	return out
}

// metricFamilies reads the gateway's /metrics.
func metricFamilies(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return families
}

// A request's log lines carry its trace_id only when traces are on (an
// exporter, here a recorder): then the caller's trace, joined through its
// traceparent. With nothing exporting there is no trace, and no trace_id;
// the request_id is there either way.
func TestTraceIDInLogsOnlyWhenTracing(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		name string
		opts telemetry.Options
		want string // the trace_id logged; "" for none
	}{
		{"nothing exported", telemetry.Options{}, ""},
		{"traces on", telemetry.Options{SpanProcessor: tracetest.NewSpanRecorder()}, traceID},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			base := startLogging(t, c.opts, telemetry.NewLogger(&logs, "json", slog.LevelInfo), "--data-dir", t.TempDir())
			req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query": "query Traced { listFeatures { key } }"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			line := operationLine(t, &logs, "Traced")
			if line["request_id"] == nil {
				t.Errorf("no request_id: %v", line)
			}
			if got, _ := line["trace_id"].(string); got != c.want {
				t.Errorf("trace_id %q, want %q: %v", got, c.want, line)
			}
		})
	}
}

// operationLine waits for the log line of the operation named name.
func operationLine(t *testing.T, logs *syncBuffer, name string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		logs.mu.Lock()
		text := logs.buf.String()
		logs.mu.Unlock()
		for line := range strings.SplitSeq(text, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "graphql request" && m["operation"] == name {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line of operation %s within 10 s:\n%s", name, text)
		}
	}
}
