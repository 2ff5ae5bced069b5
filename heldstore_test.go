package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/telemetry"
)

// heldStore is the store the flags name (the embedded one, in these
// tests) with some of its calls held: they wait, heeding no context,
// until the test releases them, as calls to a store that hangs do.
type heldStore struct {
	store.Store
	holds   map[string]bool // the calls held, by method name
	entered chan string     // each held call, as it begins to wait
	release chan struct{}   // closed: held calls go on
	once    sync.Once
	closed  chan struct{} // closed once Close returned

	// A held call let go at the test's end must not meet a store Close
	// closed meanwhile: calls hold mu for reading while they use the
	// store, Close for writing as it closes it and sets shut.
	mu   sync.RWMutex
	shut bool
}

// errShut is what a held call let go after Close gets.
var errShut = errors.New("the store was closed while the call was held")

// holdStore makes a heldStore holding the methods named. The test's end
// releases whatever is held, and waits a little for the store to close,
// so that its folder can go.
func holdStore(t *testing.T, methods ...string) *heldStore {
	h := &heldStore{holds: map[string]bool{}, entered: make(chan string, 100), release: make(chan struct{}), closed: make(chan struct{})}
	for _, m := range methods {
		h.holds[m] = true
	}
	t.Cleanup(func() {
		h.releaseAll()
		if h.Store != nil {
			select {
			case <-h.closed:
			case <-time.After(10 * time.Second):
			}
		}
	})
	return h
}

// open is a storeOpener: the configured store, held.
func (h *heldStore) open(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger) (store.Store, error) {
	s, err := openStore(ctx, cfg, tel, log)
	if err != nil {
		return nil, err
	}
	h.Store = s
	return h, nil
}

// hold waits, if method is held, until the test releases held calls.
func (h *heldStore) hold(method string) {
	if !h.holds[method] {
		return
	}
	select {
	case h.entered <- method:
	default: // nobody waits for so many
	}
	<-h.release
}

// releaseAll lets every held call go on, now and from now on.
func (h *heldStore) releaseAll() { h.once.Do(func() { close(h.release) }) }

// waitEntered waits until a held call of method began.
func (h *heldStore) waitEntered(t *testing.T, method string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-h.entered:
			if m == method {
				return
			}
		case <-deadline:
			t.Fatalf("no call of %s within 30 s", method)
		}
	}
}

func (h *heldStore) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	h.hold("AddItems")
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.shut {
		return store.AddResult{}, errShut
	}
	return h.Store.AddItems(ctx, l, items)
}

func (h *heldStore) Since(ctx context.Context, l store.List, from string, limit int) (store.SincePage, error) {
	h.hold("Since")
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.shut {
		return store.SincePage{}, errShut
	}
	return h.Store.Since(ctx, l, from, limit)
}

func (h *heldStore) Close() error {
	defer close(h.closed)
	h.hold("Close")
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shut = true
	return h.Store.Close()
}

// logBuffer keeps a gateway's log lines for a test to read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}

// readyz is the status /readyz answers, and its body.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}
