package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
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

// /readyz follows the CQL node: ready, unready soon after it dies, ready
// again once it is back, and the gateway serves again without a restart.
func TestReadinessFollowsTheStore(t *testing.T) {
	node := cqltest.StartNode(t, "127.0.0.2")
	base := start(t, "--cql-hosts", node.Addr, "--cql-keyspace", "ready", "--migrate", "--cql-timeout", "2s")
	waitReady(t, base, http.StatusOK, 10*time.Second)
	post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)

	node.Kill()
	down := waitReady(t, base, http.StatusServiceUnavailable, 15*time.Second)
	_, out := post(t, base, "", `{ listItems(entityType: "user", entityId: "u1", feature: "f") { hasMore } }`)
	if errs, _ := out["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["extensions"].(map[string]any)["code"] != "UNAVAILABLE" {
		t.Fatalf("a read with the node down: %v", out)
	}

	node.Start()
	up := waitReady(t, base, http.StatusOK, 60*time.Second)
	_, out = post(t, base, "", `{ listItems(entityType: "user", entityId: "u1", feature: "f") { hasMore } }`)
	if out["errors"] != nil {
		t.Fatalf("a read after the node came back: %v", out)
	}
	t.Logf("/readyz unready %v after the node was killed, ready %v after it started", down.Round(time.Millisecond), up.Round(time.Millisecond))
}
