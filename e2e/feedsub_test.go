package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/wsclient"
)

// What the tests of resuming by position (resume_test.go) subscribe and
// wait with: one subscription a WebSocket, its items with their
// positions, and how it ended.

// listItemsResume is listItemsAdded with since and after, asking for each
// item's position.
const listItemsResume = `subscription($t: String!, $id: ID!, $f: String!, $since: Time, $after: String) {
  listItemsAdded(entityType: $t, entityId: $id, feature: $f, since: $since, after: $after) { value timestamp position }
}`

// positioned is an item a subscription received, with its position.
type positioned struct{ value, timestamp, position string }

func (p positioned) String() string { return p.value + "@" + p.timestamp }

// subError is one error a subscription ended with.
type subError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code     string `json:"code"`
		Position string `json:"position"`
	} `json:"extensions"`
}

// feedSub is one subscription on a WebSocket of its own: the items it
// received, in order, and how it ended.
type feedSub struct {
	t      *testing.T
	conn   *wsclient.Conn
	notify chan struct{} // a token after every change

	mu    sync.Mutex
	items []positioned
	errs  []subError
	end   string // "" while it runs; then complete, error, or how the socket ended
}

// subscribeFeed opens a WebSocket to base and subscribes with vars
// (listItemsResume's).
func subscribeFeed(t *testing.T, ctx context.Context, base string, vars map[string]any) *feedSub {
	t.Helper()
	conn, err := wsclient.Dial(ctx, base, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	s := &feedSub{t: t, conn: conn, notify: make(chan struct{}, 1)}
	if err := conn.Subscribe(ctx, "s", listItemsResume, vars); err != nil {
		t.Fatal(err)
	}
	go s.read(ctx)
	return s
}

func (s *feedSub) read(ctx context.Context) {
	for {
		m, err := s.conn.Read(ctx)
		s.mu.Lock()
		switch {
		case err != nil:
			if s.end == "" {
				s.end = fmt.Sprintf("the socket ended (close code %d): %v", wsclient.CloseStatus(err), err)
			}
		case s.end != "":
			s.end += fmt.Sprintf("; then %s %s", m.Type, m.Payload)
		case m.Type == "next":
			var p struct {
				Data *struct {
					ListItemsAdded struct {
						Value     string  `json:"value"`
						Timestamp string  `json:"timestamp"`
						Position  *string `json:"position"`
					} `json:"listItemsAdded"`
				} `json:"data"`
				Errors []subError `json:"errors"`
			}
			switch {
			case json.Unmarshal(m.Payload, &p) != nil:
				s.end = "a next that is not a result: " + string(m.Payload)
			case len(p.Errors) > 0 || p.Data == nil:
				s.errs = append(s.errs, p.Errors...) // a complete follows
			default:
				it := p.Data.ListItemsAdded
				pos := ""
				if it.Position != nil {
					pos = *it.Position
				}
				s.items = append(s.items, positioned{it.Value, it.Timestamp, pos})
			}
		case m.Type == "error":
			var errs []subError
			json.Unmarshal(m.Payload, &errs)
			s.errs, s.end = append(s.errs, errs...), "error"
		case m.Type == "complete":
			s.end = "complete"
		default:
			s.end = fmt.Sprintf("an unexpected %s %s", m.Type, m.Payload)
		}
		s.mu.Unlock()
		select {
		case s.notify <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// wait waits until cond holds of what s received, or fails the test past
// within.
func (s *feedSub) wait(within time.Duration, what string, cond func() bool) {
	s.t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.notify:
		case <-deadline.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("%s: not within %v; received %d items %v, errors %s, end %q", what, within, len(s.items), s.items, codes(s.errs), s.end)
		}
	}
}

// await returns the first n items, failing the test if the subscription
// ends before, or they do not come within.
func (s *feedSub) await(n int, within time.Duration) []positioned {
	s.t.Helper()
	s.wait(within, fmt.Sprintf("%d items", n), func() bool { return len(s.items) >= n || s.end != "" })
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) < n {
		s.t.Fatalf("the subscription ended after %d items, want %d: %s, errors %s", len(s.items), n, s.end, codes(s.errs))
	}
	return slices.Clone(s.items[:n])
}

// ended returns the errors the subscription ended with, failing the test
// if an item came, or it did not end within.
func (s *feedSub) ended(within time.Duration) []subError {
	s.t.Helper()
	s.wait(within, "the end of the subscription", func() bool { return s.end != "" })
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.items) > 0 {
		s.t.Errorf("the subscription received %v before it ended", s.items)
	}
	return slices.Clone(s.errs)
}

// codes lists the codes of errs, comma separated.
func codes(errs []subError) string {
	var c []string
	for _, e := range errs {
		c = append(c, e.Extensions.Code)
	}
	return strings.Join(c, ",")
}

// values lists the values of items.
func values(items []positioned) []string {
	var v []string
	for _, it := range items {
		v = append(v, it.value)
	}
	return v
}

// distinctPositions counts the distinct positions of items, leaving out
// the empty one (a null position).
func distinctPositions(items []positioned) int {
	seen := map[string]bool{}
	for _, it := range items {
		if it.position != "" {
			seen[it.position] = true
		}
	}
	return len(seen)
}

// listVars names a list of feature f in listItemsResume's variables, with
// more (since, after) added.
func listVars(entityType, entityID string, more ...any) map[string]any {
	v := map[string]any{"t": entityType, "id": entityID, "f": "f"}
	for i := 0; i+1 < len(more); i += 2 {
		v[more[i].(string)] = more[i+1]
	}
	return v
}

// createFeature creates the STRING feature f of entityType on g, its
// items kept a day.
func createFeature(t *testing.T, g *gateway, entityType string) {
	t.Helper()
	g.mustOK(fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 86400, live: true}) { key } }`, entityType), nil)
}

// stamp is a timestamp d from now, as a client sends it.
func stamp(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

// waitActive waits until g counts n subscriptions.
func waitActive(t *testing.T, g *gateway, n int) {
	t.Helper()
	waitMetric(t, g.base, "listgate_subscriptions_active", float64(n), 30*time.Second)
}

// positionOf subscribes to a list on g, which has no other subscription,
// adds value to it, and returns the item as it came; the subscription is
// gone when it returns.
func positionOf(t *testing.T, ctx context.Context, g *gateway, entityType, entityID, value string) positioned {
	t.Helper()
	s := subscribeFeed(t, ctx, g.base, listVars(entityType, entityID))
	waitActive(t, g, 1)
	addItems(t, g.base, "", entityType, entityID, "f", [2]string{value, ""})
	it := s.await(1, 30*time.Second)[0]
	if it.value != value || it.position == "" {
		t.Fatalf("received %v with position %q, want %s with a position", it, it.position, value)
	}
	s.conn.Close()
	waitActive(t, g, 0)
	return it
}

// refusal subscribes with vars and returns the errors the subscription
// ended with at once, no item having come.
func refusal(t *testing.T, ctx context.Context, g *gateway, vars map[string]any) []subError {
	t.Helper()
	s := subscribeFeed(t, ctx, g.base, vars)
	defer s.conn.Close()
	return s.ended(30 * time.Second)
}

// refusedWith fails the test unless a subscription with vars ends at once
// with one error of code.
func refusedWith(t *testing.T, ctx context.Context, g *gateway, what string, vars map[string]any, code string) {
	t.Helper()
	errs := refusal(t, ctx, g, vars)
	if len(errs) != 1 || errs[0].Extensions.Code != code {
		t.Errorf("%s: ended with %s %v, want %s", what, codes(errs), errs, code)
		return
	}
	t.Logf("%s: %s %q", what, code, errs[0].Message)
}

// awaitExpiry subscribes with vars (after a position) on g, which has no
// other subscription, again and again, until the gateway refuses it with
// POSITION_EXPIRED; while it accepts it, each subscription is ended
// before the next. It returns how many it accepted first.
func awaitExpiry(t *testing.T, ctx context.Context, g *gateway, vars map[string]any, within time.Duration) (accepted int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := subscribeFeed(t, ctx, g.base, vars)
		for {
			s.mu.Lock()
			end, errs := s.end, slices.Clone(s.errs)
			s.mu.Unlock()
			if end != "" {
				if len(errs) != 1 || errs[0].Extensions.Code != "POSITION_EXPIRED" {
					t.Fatalf("ended with %s (%s), want POSITION_EXPIRED: %v", codes(errs), end, errs)
				}
				t.Logf("POSITION_EXPIRED %q, after %d subscriptions accepted", errs[0].Message, accepted)
				return accepted
			}
			if metric(t, g.base, "listgate_subscriptions_active") == 1 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.conn.Close()
		waitActive(t, g, 0)
		accepted++
		if time.Now().After(deadline) {
			t.Fatalf("the position was still accepted %v later (%d subscriptions)", within, accepted)
		}
		time.Sleep(500 * time.Millisecond) // between two tries
	}
}

// stopWithin sends SIGTERM and fails the test unless the process exits 0
// before within; it returns how long it took.
func (g *gateway) stopWithin(within time.Duration) time.Duration {
	g.t.Helper()
	sent := time.Now()
	if err := g.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		g.t.Fatal(err)
	}
	select {
	case <-g.Exited:
	case <-time.After(within):
		g.t.Fatalf("the gateway still ran %v after SIGTERM", within)
	}
	took := time.Since(sent)
	if g.ExitErr != nil {
		g.t.Fatalf("after SIGTERM the gateway exited with %v after %v; want exit code 0", g.ExitErr, took.Round(time.Millisecond))
	}
	return took
}
