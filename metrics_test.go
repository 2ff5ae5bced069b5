package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
)

// seriesOf returns each series of a family by its labels ("reason=too_slow"),
// with its value: a counter's, or a histogram's sample count.
func seriesOf(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		v := m.GetCounter().GetValue()
		if h := m.GetHistogram(); h != nil {
			v = float64(h.GetSampleCount())
		}
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// The documented metrics that count rare events are on /metrics at zero
// from the start, each known label value: a dashboard shows 0, not "No
// data", and an absent() alert fires only for a gateway that is not
// scraped. The loader's histogram is there empty until its first batch,
// then counts it, once.
func TestRareEventsAreExportedAtZero(t *testing.T) {
	base := start(t, "--data-dir", t.TempDir())
	families := metricFamilies(t, base)
	for name, labels := range map[string][]string{
		"listgate_panics_total":                    {""},
		"listgate_graphql_refused_total":           {""},
		"listgate_graphql_paths_total":             {"path=compiled", "path=gqlgen"},
		"listgate_subscriptions_ended_total":       {"reason=too_slow", "reason=not_found", "reason=not_live", "reason=position_expired", "reason=shutting_down"},
		"listgate_subscriptions_refused_total":     {"reason=max_websockets", "reason=caller_max_websockets_share", "reason=max_pending_websockets", "reason=max_pending_websockets_per_address", "reason=per_connection", "reason=per_caller", "reason=subscription_operation_bytes", "reason=caller_subscription_operation_bytes_share", "reason=max_watched_lists", "reason=clock_skew", "reason=shutting_down"},
		"listgate_untrusted_operations_total":      {"mode=audit", "mode=enforce"},
		"listgate_trusted_documents_reloads_total": {"outcome=ok", "outcome=failed"},
		"listgate_trusted_documents":               {""},
		"listgate_loader_batch_size":               {""},
		"listgate_caller_throttled_total":          {"caller=address,reason=cost", "caller=address,reason=share"},
		"listgate_caller_cost_spent_total":         {"caller=address"},
	} {
		f := families[name]
		if f == nil {
			t.Errorf("%s is not on /metrics at the start", name)
			continue
		}
		got := seriesOf(f)
		for _, l := range labels {
			if v, ok := got[l]; !ok || v != 0 {
				t.Errorf("%s{%s} at the start: %v (there: %v), want 0", name, l, v, ok)
			}
		}
	}
	if _, out := gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`); out["errors"] != nil {
		t.Fatal(out)
	}
	if _, out := gatewaytest.Post(t, base, "", `{ entities(type: "user", entityIds: ["a", "b"]) { list(feature: "f") { items { value } } } }`); out["errors"] != nil {
		t.Fatal(out)
	}
	if got := seriesOf(metricFamilies(t, base)["listgate_loader_batch_size"]); len(got) != 1 || got[""] < 1 {
		t.Errorf("listgate_loader_batch_size after one batch: %v, want one series counting the batches", got)
	}
}

// A document sent again is made by its plan, and counted so; with
// --compiled-documents=false every operation is gqlgen's.
func TestCompiledDocumentsAreCounted(t *testing.T) {
	for _, tc := range []struct {
		flag             string
		compiled, gqlgen float64
	}{{"true", 2, 2}, {"false", 0, 4}} {
		base := start(t, "--data-dir", t.TempDir(), "--compiled-documents="+tc.flag)
		if _, out := gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`); out["errors"] != nil {
			t.Fatal(out)
		}
		for range 3 {
			if _, out := gatewaytest.Post(t, base, "", `{ listItems(entityType: "user", entityId: "u1", feature: "f") { items { value } } }`); out["errors"] != nil {
				t.Fatal(out)
			}
		}
		got := seriesOf(metricFamilies(t, base)["listgate_graphql_paths_total"])
		if got["path=compiled"] != tc.compiled || got["path=gqlgen"] != tc.gqlgen {
			t.Errorf("--compiled-documents=%s: %v, want compiled %v, gqlgen %v", tc.flag, got, tc.compiled, tc.gqlgen)
		}
	}
}

// On a cluster, listgate_cql_statement_errors_total is at zero from the
// start for the statements of the keyspace's tables, by every error type.
func TestStatementErrorsAreExportedAtZero(t *testing.T) {
	hosts := cqltest.Hosts(t)
	ks := fmt.Sprintf("zero_%d", os.Getpid())
	freshKeyspace(t, hosts, ks)
	base := start(t, "--cql-hosts", strings.Join(hosts, ","), "--cql-keyspace", ks, "--migrate", "--cql-timeout", "10s")
	f := metricFamilies(t, base)["listgate_cql_statement_errors_total"]
	if f == nil {
		t.Fatal("listgate_cql_statement_errors_total is not on /metrics at the start")
	}
	got := seriesOf(f)
	for _, l := range []string{"db_operation_name=SELECT list_items,error_type=timeout", "db_operation_name=BATCH INSERT list_items,error_type=write_timeout", "db_operation_name=SELECT list_changes,error_type=unavailable"} {
		if v, ok := got[l]; !ok || v != 0 {
			t.Errorf("listgate_cql_statement_errors_total{%s}: %v (there: %v), want 0; the series: %d", l, v, ok, len(got))
		}
	}
	t.Logf("%d series of listgate_cql_statement_errors_total at the start", len(got))
}
