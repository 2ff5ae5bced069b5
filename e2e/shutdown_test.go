package e2e

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// SIGTERM lets a request in flight finish, refuses new connections, and
// the process exits 0.
func TestSIGTERMFinishesInFlightRequests(t *testing.T) {
	g := startGateway(t,
		"LISTGATE_LOADER_WAIT=1500ms", // a request that reads a list takes 1.5 s
		"LISTGATE_SHUTDOWN_TIMEOUT=10s",
	)
	base := g.base
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	gatewaytest.Post(t, base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "f"}, items: [{value: "kept"}]) { added } }`)

	// Two pages, so that they go through the loader, which waits: one
	// page alone is read at once.
	inFlight := make(chan gatewaytest.Answer, 1)
	go func() {
		inFlight <- g.do(`{ entity(type: "user", entityId: "u1") { a: list(feature: "f") { items { value } } b: list(feature: "f", limit: 1) { hasMore } } }`, nil)
	}()
	time.Sleep(300 * time.Millisecond) // the request is now waiting on the loader
	sent := time.Now()
	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("a new connection was accepted after SIGTERM")
	}
	r := <-inFlight
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"kept"`) {
		t.Fatalf("the in-flight request: %d %s (%v)", r.Status, r.Body, r.Err)
	}
	select {
	case <-g.Exited:
		if g.ExitErr != nil {
			t.Fatalf("exit after SIGTERM: %v", g.ExitErr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the process did not exit within 15 s of SIGTERM")
	}
	t.Logf("exited 0, %v after SIGTERM, with the in-flight request answered", time.Since(sent).Round(time.Millisecond))
}
