package cql_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
)

// A frozen node holds no read up. Three nodes, RF 3, one frozen (SIGSTOP)
// for 8 s while lists are read one at a time: with speculative reads no
// read waits for the thaw (the first whose first node is the frozen one
// answers after the speculative delay, the rest from the other nodes; on
// an idle machine the slowest takes tens of milliseconds, on a loaded one
// 2.6 s has been seen, twice: on a cold cluster, or a loaded one, the
// table's own speculative retry (99th percentile) is seconds, and the
// coordinators of both sends may each wait that long for the frozen
// replica); without, a read whose first node is the frozen one waits for it to
// thaw, or, with a --cql-timeout shorter than the freeze, is retried on
// another node once it times out (it was retried on the frozen node, as
// gocql retries a lightweight transaction, which it took every statement
// on Cassandra for). The bounds are the freeze's halves, which no load on
// the machine can cross: a read that waits for the node cannot end before
// it thaws, and one retried on it fails or waits for it.
func TestClusterFrozenNodeHoldsNoReadUp(t *testing.T) {
	const freeze = 8 * time.Second
	nodes := cqltest.StartSlowNodeCluster(t)
	var hosts []string
	for _, n := range nodes {
		hosts = append(hosts, n.Host())
	}
	ctx := context.Background()
	base := cql.DefaultConfig()
	base.Hosts, base.Keyspace = hosts, "listgate_slownode"
	// Longer than the freeze: without speculation a read waits it out
	// rather than timing out.
	base.Timeout = 10 * time.Second
	seeder := cqltest.Open(t, base)
	schema := cql.DefaultSchema()
	schema.Replication = "{'class': 'SimpleStrategy', 'replication_factor': 3}"
	if err := seeder.Migrate(ctx, schema); err != nil {
		t.Fatal(err)
	}
	f, err := seeder.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "reading_history", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var lists []store.List
	for i := range 30 {
		l := store.List{Feature: &f, EntityID: fmt.Sprint("u", i)}
		var items []store.NewItem
		for j := range 10 {
			items = append(items, store.NewItem{Timestamp: time.Now().UnixNano(), Value: fmt.Appendf(nil, "story%d", j)})
		}
		if _, err := seeder.AddItems(ctx, l, items); err != nil {
			t.Fatal(err)
		}
		lists = append(lists, l)
	}

	frozen := nodes[2]
	for _, tc := range []struct {
		speculative bool
		timeout     time.Duration
	}{{true, base.Timeout}, {false, base.Timeout}, {false, time.Second}} {
		speculative := tc.speculative
		t.Run(fmt.Sprintf("speculative=%v,timeout=%v", speculative, tc.timeout), func(t *testing.T) {
			cfg := base
			cfg.Speculation.Enabled = speculative
			cfg.Timeout = tc.timeout
			metrics := sdkmetric.NewManualReader()
			cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(metrics))
			s := cqltest.Open(t, cfg)
			i := 0
			read := func() time.Duration {
				t.Helper()
				l := lists[i%len(lists)]
				i++
				began := time.Now()
				p, err := s.Items(ctx, l, store.Range{Limit: 10})
				took := time.Since(began)
				if err != nil || len(p.Items) != 10 {
					t.Fatalf("reading %s after %v: %d items, %v", l.EntityID, took, len(p.Items), err)
				}
				return took
			}
			// Every node prepares the read, and the delay is measured.
			for range 300 {
				read()
			}
			thaw := frozen.Freeze()
			timer := time.AfterFunc(freeze, thaw)
			defer timer.Stop()
			var took []time.Duration
			for end := time.Now().Add(freeze); time.Now().Before(end); {
				took = append(took, read())
			}
			thaw()
			frozen.AwaitCQL()
			slowest := slices.Max(took)
			slices.Sort(took)
			sent := counter(t, metrics, "listgate.cql.speculative_executions")
			t.Logf("%d reads while %s was frozen for %v: p50 %v, p99 %v, slowest %v; %d sent twice, after %v",
				len(took), frozen.Addr, freeze, took[len(took)/2], took[len(took)*99/100], slowest, sent, s.SpeculativeDelay())
			switch {
			case speculative:
				if slowest >= freeze/2 {
					t.Errorf("with speculative reads the slowest read took %v: it waited for the frozen node (the freeze is %v)", slowest, freeze)
				}
				if sent == 0 {
					t.Error("no read was sent twice while a node was frozen")
				}
			case tc.timeout < freeze/2:
				// Retried on the frozen node, a read failed after its
				// three attempts' timeouts, or waited for the thaw.
				if slowest >= freeze*3/4 {
					t.Errorf("without speculative reads, with --cql-timeout %v, the slowest read took %v: it was not retried on another node", tc.timeout, slowest)
				}
			case slowest < freeze/2:
				t.Errorf("without speculative reads the slowest read took %v: none waited for the frozen node", slowest)
			}
		})
	}
}

// counter sums the points of a counter the store exports.
func counter(t *testing.T, r *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range sum.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}
