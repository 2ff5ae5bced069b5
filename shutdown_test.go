package main

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary as the listgate command itself.
func TestMain(m *testing.M) {
	if os.Getenv("LISTGATE_TEST_AS_MAIN") == "1" {
		os.Args = os.Args[:1]
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// SIGTERM lets a request in flight finish, refuses new connections, and
// the process exits 0.
func TestSIGTERMFinishesInFlightRequests(t *testing.T) {
	cmd, base := startProcess(t,
		"LISTGATE_DATA_DIR="+t.TempDir(),
		"LISTGATE_LOADER_WAIT=1500ms", // a request that reads a list takes 1.5 s
		"LISTGATE_SHUTDOWN_TIMEOUT=10s",
	)
	post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	post(t, base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "f"}, items: [{value: "kept"}]) { added } }`)

	type result struct {
		status int
		body   string
	}
	inFlight := make(chan result, 1)
	go func() {
		status, body := postNoFail(base, `{ entity(type: "user", entityId: "u1") { list(feature: "f") { items { value } } } }`)
		inFlight <- result{status, body}
	}()
	time.Sleep(300 * time.Millisecond) // the request is now waiting on the loader
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("a new connection was accepted after SIGTERM")
	}
	r := <-inFlight
	if r.status != http.StatusOK || !strings.Contains(r.body, `"kept"`) {
		t.Fatalf("the in-flight request: %d %s", r.status, r.body)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) || err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the process did not exit within 15 s of SIGTERM")
	}
	t.Logf("exited 0, %v after SIGTERM, with the in-flight request answered", time.Since(sent).Round(time.Millisecond))
}

func postNoFail(base, query string) (int, string) {
	resp, err := http.Post(base+"/graphql", "application/json", strings.NewReader(fmt.Sprintf(`{"query": %q}`, query)))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, b.String()
}
