package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
)

// readyz asks /readyz and reports its status and how long it took.
func readyz(t *testing.T, base string) (int, time.Duration) {
	t.Helper()
	began := time.Now()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(began)
}

func waitReady(t *testing.T, base string, want int, limit time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		code, took := readyz(t, base)
		if took > 3*time.Second {
			t.Fatalf("/readyz took %v; it must fail fast", took)
		}
		if code == want {
			return time.Since(began)
		}
		if time.Since(began) > limit {
			t.Fatalf("/readyz still %d after %v, want %d", code, limit, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// /readyz and listgate_ready follow the CQL node: ready, unready soon after
// it dies, ready again once it is back, and the gateway serves again
// without a restart.
func TestReadinessFollowsTheStore(t *testing.T) {
	node := cqltest.StartNode(t, "127.0.0.2")
	base := startGateway(t, "LISTGATE_CQL_HOSTS="+node.Addr, "LISTGATE_CQL_KEYSPACE=ready", "LISTGATE_MIGRATE=true", "LISTGATE_CQL_TIMEOUT=2s").base
	waitReady(t, base, http.StatusOK, 10*time.Second)
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)

	waitMetric(t, base, "listgate_ready", 1, time.Second)

	node.Kill()
	down := waitReady(t, base, http.StatusServiceUnavailable, 15*time.Second)
	waitMetric(t, base, "listgate_ready", 0, 5*time.Second)
	// Anyone may ask /readyz: it names no host, only the log does.
	if resp, err := http.Get(base + "/readyz"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "127.0.0.2") || !strings.Contains(string(b), "log") {
			t.Fatalf("/readyz with the node down: %s", b)
		}
	}
	_, out := gatewaytest.Post(t, base, "", `{ listItems(entityType: "user", entityId: "u1", feature: "f") { hasMore } }`)
	if errs, _ := out["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["extensions"].(map[string]any)["code"] != "UNAVAILABLE" {
		t.Fatalf("a read with the node down: %v", out)
	}

	node.Start()
	up := waitReady(t, base, http.StatusOK, 60*time.Second)
	waitMetric(t, base, "listgate_ready", 1, 5*time.Second)
	_, out = gatewaytest.Post(t, base, "", `{ listItems(entityType: "user", entityId: "u1", feature: "f") { hasMore } }`)
	if out["errors"] != nil {
		t.Fatalf("a read after the node came back: %v", out)
	}
	t.Logf("/readyz unready %v after the node was killed, ready %v after it started", down.Round(time.Millisecond), up.Round(time.Millisecond))
}

// addRecord is one add sent during the fault test.
type addRecord struct {
	entity, batch string
	acked         bool
	code          string
	took          time.Duration
}

// A node dies under a bounded load of adds and reads: requests fail fast
// with UNAVAILABLE, /readyz turns unready, and once the node is back the
// gateway serves again without a restart. Afterwards every acknowledged
// add is there, whole, and every failed add is all there or not at all.
func TestNoAcknowledgedAddIsLost(t *testing.T) {
	node := cqltest.StartNode(t, "127.0.0.2")
	const timeout = 3 * time.Second
	base := startGateway(t, "LISTGATE_CQL_HOSTS="+node.Addr, "LISTGATE_CQL_KEYSPACE=faults", "LISTGATE_MIGRATE=true", "LISTGATE_CQL_TIMEOUT=1s", "LISTGATE_REQUEST_TIMEOUT="+timeout.String()).base
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)

	var (
		mu      sync.Mutex
		adds    []addRecord
		reads   []addRecord
		stop    = make(chan struct{})
		workers sync.WaitGroup
		client  = &http.Client{Timeout: 2 * timeout}
	)
	send := func(query string) (string, time.Duration) {
		r := gatewaytest.Send(client, base, "", []byte(query))
		switch {
		case r.Err != nil:
			return "transport: " + r.Err.Error(), r.Took
		case len(r.Errors) > 0:
			return r.Errors[0].Extensions.Code, r.Took
		}
		return "", r.Took
	}
	for w := range 6 {
		workers.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r := addRecord{entity: fmt.Sprint("e", (w*7+n)%12), batch: fmt.Sprintf("w%d-%d", w, n)}
				var items []string
				for i := range 10 {
					items = append(items, fmt.Sprintf(`{value: \"%s-%d\"}`, r.batch, i))
				}
				r.code, r.took = send(fmt.Sprintf(`{"query": "mutation { addListItems(list: {entityType: \"user\", entityId: \"%s\", feature: \"f\"}, items: [%s]) { added } }"}`, r.entity, strings.Join(items, ", ")))
				r.acked = r.code == ""
				mu.Lock()
				adds = append(adds, r)
				mu.Unlock()
			}
		})
	}
	for w := range 2 {
		workers.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var r addRecord
				r.code, r.took = send(fmt.Sprintf(`{"query": "{ listItems(entityType: \"user\", entityId: \"e%d\", feature: \"f\", limit: 10) { hasMore } }"}`, (w+n)%12))
				mu.Lock()
				reads = append(reads, r)
				mu.Unlock()
			}
		})
	}
	time.Sleep(3 * time.Second)
	node.Kill()
	killed := time.Now()
	down := waitReady(t, base, http.StatusServiceUnavailable, 15*time.Second)
	time.Sleep(3 * time.Second) // load against a dead node
	node.Start()
	up := waitReady(t, base, http.StatusOK, 60*time.Second)
	waitMetric(t, base, "listgate_ready", 1, 5*time.Second)
	time.Sleep(3 * time.Second) // load after recovery
	close(stop)
	workers.Wait()
	outage := time.Since(killed)

	// Every request answered within the deadline, and failures were
	// UNAVAILABLE.
	codes := map[string]int{}
	var slowest time.Duration
	for _, r := range append(append([]addRecord(nil), adds...), reads...) {
		codes[r.code]++
		slowest = max(slowest, r.took)
	}
	for code, n := range codes {
		if code != "" && code != "UNAVAILABLE" {
			t.Errorf("%d requests failed with %q", n, code)
		}
	}
	if slowest > timeout+time.Second {
		t.Errorf("the slowest request took %v, past the %v deadline", slowest, timeout)
	}
	if codes["UNAVAILABLE"] == 0 {
		t.Error("no request failed while the node was down")
	}

	// Every acknowledged add is there whole; every failed one whole or not
	// at all.
	present := batchesPresent(t, base, 12)
	acked, failed, missing, partial := 0, 0, 0, 0
	for _, r := range adds {
		n := present[r.batch]
		if r.acked {
			acked++
			if n != 10 {
				missing++
				t.Errorf("acknowledged add %s to %s: %d of its 10 items are there", r.batch, r.entity, n)
			}
		} else {
			failed++
			if n != 0 && n != 10 {
				partial++
				t.Errorf("failed add %s to %s: %d of its 10 items are there", r.batch, r.entity, n)
			}
		}
	}
	t.Logf("adds sent %d, acknowledged %d, failed %d (UNAVAILABLE), acknowledged but missing %d, partly written %d; reads %d; slowest request %v; /readyz unready %v after the kill and ready %v after the node answered again; outage %v",
		len(adds), acked, failed, missing, partial, len(reads), slowest.Round(time.Millisecond), down.Round(time.Millisecond), up.Round(time.Millisecond), outage.Round(time.Millisecond))
}

// batchesPresent reads the lists e0… of feature f whole, page by page, and
// counts the values of each batch (a value is "<batch>-<i>").
func batchesPresent(t *testing.T, base string, entities int) map[string]int {
	present := map[string]int{}
	for e := range entities {
		after := "null"
		for {
			q := fmt.Sprintf(`{ listItems(entityType: "user", entityId: "e%d", feature: "f", limit: 1000, after: %s) { items { value } hasMore endCursor } }`, e, after)
			_, out := gatewaytest.Post(t, base, "", q)
			if out["errors"] != nil {
				t.Fatalf("reading e%d back: %v", e, out["errors"])
			}
			page := out["data"].(map[string]any)["listItems"].(map[string]any)
			for _, it := range page["items"].([]any) {
				v := it.(map[string]any)["value"].(string)
				present[v[:strings.LastIndexByte(v, '-')]]++
			}
			if page["hasMore"] != true {
				break
			}
			after = fmt.Sprintf("%q", page["endCursor"])
		}
	}
	return present
}

// A gateway started before its cluster listens at once: /healthz answers,
// /readyz is unready (the reason in its log, not in the body) and /graphql
// answers UNAVAILABLE, while it keeps trying; once the node is up it
// serves, without a restart.
func TestStartsBeforeItsCluster(t *testing.T) {
	node := cqltest.NewNode(t, "127.0.0.2")
	cmd := exec.Command(builtBinary(t))
	cmd.Env = append(cleanEnv(), "LISTGATE_LISTEN=127.0.0.1:0", "LISTGATE_CQL_HOSTS="+node.Addr, "LISTGATE_CQL_KEYSPACE=early",
		"LISTGATE_MIGRATE=true", "LISTGATE_CQL_TIMEOUT=2s", "LISTGATE_LOG_FORMAT=json", "LISTGATE_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	logged := make(chan map[string]any, 1024)
	go func() {
		defer close(logged)
		lines := bufio.NewScanner(stderr)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			var line map[string]any
			if json.Unmarshal(lines.Bytes(), &line) == nil {
				select {
				case logged <- line:
				default: // a test that stopped reading
				}
			}
		}
	}()
	// waitLog waits for a log line whose msg is msg, and returns it.
	waitLog := func(msg string) map[string]any {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case line, ok := <-logged:
				if !ok {
					t.Fatalf("the gateway exited before logging %q", msg)
				}
				if line["msg"] == msg {
					return line
				}
			case <-deadline:
				t.Fatalf("no log line %q within 30 s", msg)
			}
		}
	}
	base := "http://" + waitLog("listgate listening, opening the store")["listen"].(string)
	if why := waitLog("the store cannot be opened yet; trying again"); !strings.Contains(fmt.Sprint(why["err"]), node.Addr) {
		t.Fatalf("the log says %v, naming no host", why)
	}
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz before the cluster: %v %v", resp, err)
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(body), node.Addr) {
		t.Fatalf("/readyz before the cluster: %d %s", resp.StatusCode, body)
	}
	if why := waitLog("not ready"); !strings.Contains(fmt.Sprint(why["err"]), "the store is not open yet") {
		t.Fatalf("/readyz logged %v", why)
	}
	a, _ := gatewaytest.Post(t, base, "", `{ listFeatures { key } }`)
	if a.Status != http.StatusServiceUnavailable || fmt.Sprint(a.Codes()) != "[UNAVAILABLE]" {
		t.Fatalf("/graphql before the cluster: %s", a)
	}

	node.Start()
	waitReady(t, base, http.StatusOK, 60*time.Second)
	waitLog("listgate serving")
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	if _, out := gatewaytest.Post(t, base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "f"}, items: [{value: "a"}]) { added } }`); fmt.Sprint(out["data"]) != "map[addListItems:map[added:1]]" {
		t.Fatalf("an add once the cluster is up: %v", out)
	}
}
