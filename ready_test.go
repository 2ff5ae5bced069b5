package main

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/telemetry"
)

// A gateway whose adds hang stops being ready once one has run past
// --request-timeout and as long again (at least a second more): /readyz
// answers 503 without saying why, its log says why, and listgate_ready is
// 0. Once the add returns it is ready again.
func TestAStuckWriteMakesTheGatewayUnready(t *testing.T) {
	held := holdStore(t, "AddItems")
	logs := &logBuffer{}
	g := launch(t, telemetry.Options{}, telemetry.NewLogger(logs, "text", slog.LevelWarn), held.open,
		"--data-dir", t.TempDir(), "--request-timeout", "300ms")
	t.Cleanup(func() {
		held.releaseAll()
		if err := g.stop(); err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	})
	gauge := func() float64 {
		f := metricFamilies(t, g.base)["listgate_ready"]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("listgate_ready: %v", f)
		}
		return f.Metric[0].GetGauge().GetValue()
	}
	if a, out := gatewaytest.Post(t, g.base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`); out["errors"] != nil {
		t.Fatalf("create: %s", a)
	}
	if status, body := readyz(t, g.base); status != http.StatusOK || gauge() != 1 {
		t.Fatalf("before the add: /readyz %d %s, listgate_ready %v", status, body, gauge())
	}

	answered := make(chan gatewaytest.Answer, 1)
	go func() {
		answered <- gatewaytest.Send(http.DefaultClient, g.base, "", []byte(`{"query":"mutation { addListItems(list: {entityType: \"user\", entityId: \"u1\", feature: \"f\"}, items: [{value: \"a\"}]) { added } }"}`))
	}()
	held.waitEntered(t, "AddItems")
	var body string
	waitFor(t, 30*time.Second, "/readyz answering 503 while the add hangs", func() bool {
		var status int
		status, body = readyz(t, g.base)
		return status == http.StatusServiceUnavailable
	})
	if !strings.Contains(body, "not ready") || strings.Contains(body, "write") {
		t.Errorf("/readyz body %s: want a plain not ready, the reason in the log", body)
	}
	if !strings.Contains(logs.String(), "a store write has been running for") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	if v := gauge(); v != 0 {
		t.Errorf("listgate_ready %v while the add hangs, want 0", v)
	}

	held.releaseAll()
	select {
	case a := <-answered:
		if a.Err != nil {
			t.Fatalf("the add, released: %s", a)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the add did not answer within 30 s of its release")
	}
	waitFor(t, 30*time.Second, "/readyz answering 200 once the add returned", func() bool {
		status, _ := readyz(t, g.base)
		return status == http.StatusOK
	})
	if v := gauge(); v != 1 {
		t.Errorf("listgate_ready %v once the add returned, want 1", v)
	}
}
