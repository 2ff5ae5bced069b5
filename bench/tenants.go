package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// tenantResult is one two-caller scenario on one store, with the gateway's
// default limits: caller A runs the heaviest operation its budget allows
// (nine listCount fields, 90,000 points, over a list of Items items of
// ValueBytes) back to back, and caller B reads one list of 10 items, one
// request at a time, alone and beside A.
type tenantResult struct {
	Store          string  `json:"store"`
	Items          int     `json:"heavy_list_items"`
	ValueBytes     int     `json:"heavy_list_value_bytes"`
	AloneP50Ms     float64 `json:"small_read_alone_p50_ms"`
	AloneP99Ms     float64 `json:"small_read_alone_p99_ms"`
	BesideP50Ms    float64 `json:"small_read_beside_p50_ms"`
	BesideP99Ms    float64 `json:"small_read_beside_p99_ms"`
	P99Ratio       float64 `json:"p99_beside_to_alone"`
	SmallErrors    int     `json:"small_read_errors"`
	HeavyServed    int     `json:"heavy_served"`
	HeavyThrottled int     `json:"heavy_throttled"`
	HeavyFailed    int     `json:"heavy_failed"`
	HeavyMs        float64 `json:"heavy_p50_ms"`
	// CPU of the gateway and of the database per heavy operation served,
	// while A ran.
	GatewayCPUMs  float64 `json:"gateway_cpu_ms_per_heavy"`
	DatabaseCPUMs float64 `json:"database_cpu_ms_per_heavy"`
	Failed        string  `json:"failed,omitempty"`
}

const (
	tenantType   = "tenant"
	heavyFeature = "heavy"
	smallFeature = "small"
	heavyEntity  = "big"
	smallEntity  = "small"
)

// Nine counts of one list, each priced at --max-count keys: 90,000 of the
// 100,000 points one operation may cost, and more than half of the
// in-flight complexity one caller may hold, so that A has one at a time.
// Each has a window of its own (all of the list), so that the operation's
// loader does not make them one.
var heavyQuery = func() string {
	var b strings.Builder
	b.WriteString("{")
	for i := range 9 {
		fmt.Fprintf(&b, ` c%d: listCount(entityType: %q, entityId: %q, feature: %q, minTimestamp: "1970-01-01T00:00:00.00000000%dZ")`, i, tenantType, heavyEntity, heavyFeature, i+1)
	}
	return b.String() + " }"
}()

var smallQuery = fmt.Sprintf(`{ listItems(entityType: %q, entityId: %q, feature: %q, limit: 10) { items { value } } }`, tenantType, smallEntity, smallFeature)

// tenants runs the two-caller scenario on each store.
func tenants(ctx context.Context, c config, bin, keyspace string, cs store.Store, dbPid int) ([]tenantResult, error) {
	dir, err := os.MkdirTemp("", "listgate-bench-tenants")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []tenantResult
	for _, name := range strings.Split(c.tenantStores, ",") {
		r := tenantResult{Store: name, Items: c.tenantItems, ValueBytes: c.tenantValueBytes}
		var args []string
		pid := 0
		switch name {
		case "embedded":
			data := filepath.Join(dir, "data")
			s, err := embedded.Open(embedded.Config{Dir: data})
			if err != nil {
				return nil, err
			}
			err = seedTenants(ctx, s, c.tenantItems, c.tenantValueBytes)
			if cerr := s.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
			args = []string{"--data-dir", data}
		case "CQL":
			r.Items, r.ValueBytes = c.tenantCQLItems, c.tenantCQLValueBytes
			if err := seedTenants(ctx, cs, r.Items, r.ValueBytes); err != nil {
				return nil, err
			}
			args, pid = []string{"--cql-hosts", c.cqlHosts, "--cql-keyspace", keyspace}, dbPid
		default:
			return nil, fmt.Errorf("--tenant-stores: %q is no store (embedded, CQL)", name)
		}
		fmt.Fprintf(os.Stderr, "two callers on the %s store: %s items of %d bytes\n", name, grouped(r.Items), r.ValueBytes)
		if err := twoCallers(ctx, c, bin, args, pid, &r); err != nil {
			r.Failed = err.Error()
		}
		fmt.Fprintf(os.Stderr, "  B's p99 alone %.2f ms, beside A %.2f ms (%.1f×); A served %d, throttled %d, failed %d; gateway %.0f ms CPU per heavy operation %s\n",
			r.AloneP99Ms, r.BesideP99Ms, r.P99Ratio, r.HeavyServed, r.HeavyThrottled, r.HeavyFailed, r.GatewayCPUMs, r.Failed)
		out = append(out, r)
	}
	return out, nil
}

// seedTenants makes A's list of items items of valueBytes random bytes
// (26 values over and over, so that no compression makes them small) and
// B's list of 10.
func seedTenants(ctx context.Context, s store.Store, items, valueBytes int) error {
	heavy, err := s.CreateFeature(ctx, store.Feature{EntityType: tenantType, Name: heavyFeature, ValueType: store.Bytes, TTL: 24 * time.Hour})
	if err != nil {
		return err
	}
	small, err := s.CreateFeature(ctx, store.Feature{EntityType: tenantType, Name: smallFeature, ValueType: store.String, TTL: 24 * time.Hour})
	if err != nil {
		return err
	}
	values := make([][]byte, 26)
	for i := range values {
		values[i] = make([]byte, valueBytes)
		rand.Read(values[i])
	}
	now := time.Now()
	// Adds of up to 1 MiB: a node's heap takes each add twice, as its
	// items and as its change record.
	per := max(1, min(1000, (1<<20)/(valueBytes+64)))
	var batch []store.NewItem
	for i := range items {
		batch = append(batch, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: values[i%26]})
		if len(batch) == per || i == items-1 {
			if _, err := s.AddItems(ctx, store.List{Feature: &heavy, EntityID: heavyEntity}, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	for i := range 10 {
		batch = append(batch, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Second).UnixNano(), Value: value(i)})
	}
	_, err = s.AddItems(ctx, store.List{Feature: &small, EntityID: smallEntity}, batch)
	return err
}

// twoCallers starts a gateway with two API keys and the default limits,
// and measures B's reads alone and beside A's heavy operations, c.runs
// times each, alternating.
func twoCallers(ctx context.Context, c config, bin string, args []string, dbPid int, r *tenantResult) error {
	keys := map[string]string{"a": "bench-tenant-a", "b": "bench-tenant-b"}
	var entries []string
	for name, key := range keys {
		sum := sha256.Sum256([]byte(key))
		entries = append(entries, name+" "+hex.EncodeToString(sum[:])+" lists:read")
	}
	// The defaults, as a gateway in production has them: not startGateway's
	// environment, which lifts the per-caller budgets.
	g, err := startServerEnv(bin, 4, []string{"LISTGATE_MODE=prod", "LISTGATE_LOG_FORMAT=text", "LISTGATE_API_KEYS=" + strings.Join(entries, ";")},
		append([]string{"--listen", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	if err != nil {
		return err
	}
	defer g.stop()
	a := caller{g: g, token: keys["a"], body: graphQLBody(heavyQuery)}
	b := caller{g: g, token: keys["b"], body: graphQLBody(smallQuery)}
	// The caches warm, the documents parsed. An operation that fails (past
	// its deadline, say) has cost what it cost all the same: counted, not
	// the end of the scenario.
	if _, _, err := a.send(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "  A's first operation: %.300v\n", err)
	}
	if _, _, err := b.send(ctx); err != nil {
		return fmt.Errorf("B's read: %w", err)
	}
	var alone, beside []time.Duration
	var heavy []time.Duration
	var gwCPU, dbCPU time.Duration
	for range c.runs {
		d, errs := b.readFor(ctx, c.duration)
		alone, r.SmallErrors = append(alone, d...), r.SmallErrors+errs

		stop := make(chan struct{})
		var wg sync.WaitGroup
		var served, throttled, failed atomic.Int64
		var mu sync.Mutex
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				took, wait, err := a.send(ctx)
				switch {
				case wait > 0:
					throttled.Add(1)
					select { // as Retry-After says
					case <-stop:
						return
					case <-time.After(wait):
					}
				case err != nil:
					failed.Add(1)
				default:
					served.Add(1)
					mu.Lock()
					heavy = append(heavy, took)
					mu.Unlock()
				}
			}
		})
		gw0, db0 := processCPU(g.cmd.Process.Pid), processCPU(dbPid)
		d, errs = b.readFor(ctx, c.duration)
		gwCPU += processCPU(g.cmd.Process.Pid) - gw0
		if dbPid > 0 {
			dbCPU += processCPU(dbPid) - db0
		}
		close(stop)
		wg.Wait()
		beside, r.SmallErrors = append(beside, d...), r.SmallErrors+errs
		r.HeavyServed += int(served.Load())
		r.HeavyThrottled += int(throttled.Load())
		r.HeavyFailed += int(failed.Load())
	}
	for _, l := range [][]time.Duration{alone, beside, heavy} {
		slices.Sort(l)
	}
	lat := result{latencies: alone}
	r.AloneP50Ms, r.AloneP99Ms = ms(lat.percentile(0.5)), ms(lat.percentile(0.99))
	lat = result{latencies: beside}
	r.BesideP50Ms, r.BesideP99Ms = ms(lat.percentile(0.5)), ms(lat.percentile(0.99))
	if r.AloneP99Ms > 0 {
		r.P99Ratio = r.BesideP99Ms / r.AloneP99Ms
	}
	lat = result{latencies: heavy}
	r.HeavyMs = ms(lat.percentile(0.5))
	// CPU while A ran, per operation A got served; none served is none to
	// divide by.
	if n := r.HeavyServed + r.HeavyFailed; n > 0 {
		r.GatewayCPUMs = float64(gwCPU.Milliseconds()) / float64(n)
		r.DatabaseCPUMs = float64(dbCPU.Milliseconds()) / float64(n)
	}
	return nil
}

// caller sends one request, over and over, with its API key.
type caller struct {
	g     *server
	token string
	body  []byte
}

func graphQLBody(query string) []byte {
	b, _ := json.Marshal(map[string]any{"query": query})
	return b
}

// send sends the request and returns how long it took, or, when it was
// throttled, how long Retry-After says to wait. An answer with errors is
// an error.
func (c caller) send(ctx context.Context) (took, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.g.base+"/graphql", bytes.NewReader(c.body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	start := time.Now()
	resp, err := c.g.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took = time.Since(start)
	if resp.StatusCode == http.StatusTooManyRequests {
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return took, max(time.Duration(s)*time.Second, 100*time.Millisecond), nil
	}
	if err == nil && (resp.StatusCode != http.StatusOK || bytes.Contains(body, []byte(`"errors"`))) {
		err = fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, body)
	}
	return took, 0, err
}

// readFor sends the request one at a time for d, and returns the
// latencies of those answered without errors, and how many were not.
func (c caller) readFor(ctx context.Context, d time.Duration) ([]time.Duration, int) {
	var lat []time.Duration
	errs := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		took, wait, err := c.send(ctx)
		if err != nil || wait > 0 {
			errs++
			continue
		}
		lat = append(lat, took)
	}
	return lat, errs
}
