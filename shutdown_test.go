package main

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/internal/wsclient"
	"github.com/listgate/listgate/telemetry"
)

// A gateway told to stop returns whatever hangs (a store call that never
// returns, a subscription's catch-up that never ends, a WebSocket whose
// client never reads): soon after --shutdown-timeout, with an error
// naming what did not stop, which it leaves behind. The bound asserted is
// a generous one: that it returns at all.
func TestShutdownEndsWhateverHangs(t *testing.T) {
	const shutdownTimeout = time.Second
	for _, tc := range []struct {
		name  string
		holds []string
		says  []string // what the error names
		load  bool     // an add and a subscription's catch-up hang as it is told to stop
	}{
		{"the store's Close never returns", []string{"Close"}, []string{"the store did not stop", "not stopped: the operators' listeners, the telemetry flush"}, false},
		// Which step hangs first (the subscriptions, whose catch-up
		// never returns, or the store) is the hub's business.
		{"every store call hangs", []string{"AddItems", "Since", "Close"}, []string{"did not stop"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := holdStore(t, tc.holds...)
			// What is left behind logs past the test's end: not to t.
			logs := &logBuffer{}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("the gateway's log:\n%s", logs)
				}
			})
			g := launch(t, telemetry.Options{}, telemetry.NewLogger(logs, "text", slog.LevelWarn), held.open,
				"--data-dir", t.TempDir(), "--shutdown-timeout", shutdownTimeout.String(), "--request-timeout", "1s")
			if tc.load {
				hang(t, g.base, held)
			}
			returned := make(chan error, 1)
			go func() { returned <- g.stop() }()
			select {
			case err := <-returned:
				if err == nil {
					t.Fatal("serve returned nil with calls still hanging")
				}
				t.Logf("serve returned: %v", err)
				for _, s := range tc.says {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("serve returned %q; want it to say %q", err, s)
					}
				}
			case <-time.After(shutdownTimeout + 30*time.Second):
				t.Fatalf("serve did not return within --shutdown-timeout and 30 s")
			}
		})
	}
}

// hang starts an add that hangs in the store, and a subscription whose
// catch-up hangs, on a WebSocket whose client never reads again.
func hang(t *testing.T, base string, held *heldStore) {
	t.Helper()
	if a, out := gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`); out["errors"] != nil {
		t.Fatalf("create: %s", a)
	}
	go gatewaytest.Send(http.DefaultClient, base, "", []byte(`{"query":"mutation { addListItems(list: {entityType: \"user\", entityId: \"u1\", feature: \"f\"}, items: [{value: \"a\"}]) { added } }"}`))
	held.waitEntered(t, "AddItems")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, err := wsclient.Dial(ctx, base, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if err := ws.Subscribe(ctx, "1", `subscription($since: Time) { listItemsAdded(entityType: "user", entityId: "u1", feature: "f", since: $since) { value } }`, map[string]any{"since": since}); err != nil {
		t.Fatal(err)
	}
	held.waitEntered(t, "Since")
}

// The steps run last added first, each after the one before stopped;
// when one hangs, run returns by its timeout and grace, naming it and
// the steps it kept from running.
func TestTeardownNamesWhatDidNotStop(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	hung := make(chan struct{})
	defer close(hung)
	step := func(name string, hangs bool) func(context.Context) error {
		return func(ctx context.Context) error {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
			if hangs {
				<-hung
			}
			return nil
		}
	}
	var down teardown
	down.add("first", step("first", false))
	down.add("second", step("second", false))
	down.add("third", step("third", false))
	if err := down.run(context.Background(), time.Second, time.Second); err != nil {
		t.Fatalf("nothing hangs: %v", err)
	}
	if !slices.Equal(ran, []string{"third", "second", "first"}) {
		t.Fatalf("ran %v, want the last added first", ran)
	}

	ran = nil
	var stuck teardown
	stuck.add("the last", step("the last", false))
	stuck.add("the one before", step("the one before", false))
	stuck.add("the hanging one", step("the hanging one", true))
	stuck.add("the first", step("the first", false))
	returned := make(chan error, 1)
	go func() { returned <- stuck.run(context.Background(), 10*time.Millisecond, 10*time.Millisecond) }()
	select {
	case err := <-returned:
		if err == nil || !strings.Contains(err.Error(), "the hanging one did not stop") || !strings.Contains(err.Error(), "not stopped: the one before, the last") {
			t.Fatalf("run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30 s")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []string{"the first", "the hanging one"}) {
		t.Fatalf("ran %v", ran)
	}
}
