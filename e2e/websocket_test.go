package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// heavyEntities is the reproduction's query: 33 lists of 1,000 items,
// complexity 99,067, so that three at once fill the default
// --max-in-flight-complexity (300,000).
func heavyEntities() string {
	ids := make([]string, 33)
	for i := range ids {
		ids[i] = fmt.Sprintf("%q", fmt.Sprint("u", i))
	}
	return `{ entities(type: "user", entityIds: [` + strings.Join(ids, ", ") + `]) { list(feature: "reading_history", limit: 1000) { items { value timestamp } } } }`
}

// seedHeavy writes the 33 lists of 1,000 items of heavyEntities.
func seedHeavy(t *testing.T, dir string) {
	seedStore(t, dir, func(ctx context.Context, s *embedded.Store) {
		f := seedFeature(t, ctx, s, "reading_history", store.String)
		now := time.Now()
		items := make([]store.NewItem, 1000)
		for i := range items {
			items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Second).UnixNano(), Value: fmt.Appendf(nil, "story%04d", i)}
		}
		for i := range 33 {
			if _, err := s.AddItems(ctx, store.List{Feature: f, EntityID: fmt.Sprint("u", i)}, items); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// The reproduction: a graphql-ws client sends the heavy query over its
// socket 20 times, one after another. Each is answered, and once the
// socket closes the in-flight budget and the answers' bytes are whole
// again: the same query over HTTP answers, and each operation was one log
// line.
func TestWebSocketGivesBackWhatEachOperationHolds(t *testing.T) {
	dir := t.TempDir()
	seedHeavy(t, dir)
	// One caller runs three heavy queries at once at the end: its share is
	// the whole budget. Its 20 queries of 99,034 points one after another
	// pass its budget of points when each takes less than 0.2 s: it has
	// none, what is tested is what each gives back.
	g := startGateway(t, "LISTGATE_DATA_DIR="+dir, "LISTGATE_LOG_LEVEL=info", "LISTGATE_CALLER_MAX_IN_FLIGHT_SHARE=1", "LISTGATE_CALLER_COST_RATE=0")
	js := startJSClient(t)
	js.send(map[string]any{"op": "connect", "conn": "c", "url": "ws" + strings.TrimPrefix(g.base, "http") + "/graphql", "eager": true})
	js.awaitEvent("c", "connected")
	query := heavyEntities()
	for i := range 20 {
		id := fmt.Sprint("q", i)
		js.send(map[string]any{"op": "subscribe", "conn": "c", "id": id, "query": query})
		for answered := false; ; {
			e := js.nextOf("c", 30*time.Second)
			switch {
			case e.Ev == "next" && e.ID == id && len(e.Errors) == 0 && strings.Count(string(e.Data), "story0999") == 33:
				answered = true
			case e.Ev == "complete" && e.ID == id && answered:
			default:
				t.Fatalf("heavy query %d over the socket: %v", i, e)
			}
			if e.Ev == "complete" {
				break
			}
		}
	}
	js.send(map[string]any{"op": "dispose", "conn": "c"})
	for _, m := range []string{"listgate_inflight_complexity", "listgate_inflight_response_bytes"} {
		for deadline := time.Now().Add(10 * time.Second); metric(t, g.base, m) != 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is %v after the socket closed, want 0", m, metric(t, g.base, m))
			}
		}
	}
	// Three at once fit the budget; none waits out its deadline.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { g.mustOK(query, nil) })
	}
	wg.Wait()
	lines := strings.Count(g.stderr.String(), "transport=websocket")
	if lines != 20 {
		t.Fatalf("%d log lines of operations over the WebSocket, want 20", lines)
	}
	if n := metric(t, g.base, "listgate_graphql_requests_total", `graphql_operation_type="query"`, `outcome="ok"`, `transport="websocket"`); n != 20 {
		t.Fatalf("listgate_graphql_requests_total of the socket's queries: %v, want 20", n)
	}
}

// 2,000 WebSockets that never send their connection_init, more than
// --max-websockets, keep no subscriber out: a graphql-ws client from
// another address subscribes and receives an item meanwhile.
func TestIdleWebSocketsKeepNoSubscriberOut(t *testing.T) {
	g := startGateway(t, "LISTGATE_MAX_WEBSOCKETS=1000")
	g.mustOK(`mutation { createListFeature(input: {entityType: "user", name: "seen", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var idle []*websocket.Conn
	defer func() {
		for _, c := range idle {
			c.CloseNow()
		}
	}()
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range 50 {
		wg.Go(func() {
			for range work {
				c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
				if err == nil {
					mu.Lock()
					idle = append(idle, c)
					mu.Unlock()
				}
			}
		})
	}
	for range 2000 {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()

	js := startJSClient(t)
	js.send(map[string]any{"op": "connect", "conn": "c", "url": "ws" + strings.TrimPrefix(g.base, "http") + "/graphql", "localAddress": "127.0.0.2"})
	js.subscribe("c", "s", map[string]any{"t": "user", "id": "u1", "f": "seen"})
	js.awaitEvent("c", "connected")
	for deadline := time.Now().Add(10 * time.Second); metric(t, g.base, "listgate_subscriptions_active") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscription did not start")
		}
	}
	g.mustOK(`mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "seen"}, items: [{value: "story1"}]) { added } }`, nil)
	js.await("s", "story1")
	if refused := metric(t, g.base, "listgate_subscriptions_refused_total", `reason="max_pending_websockets_per_address"`); refused < 1900 {
		t.Fatalf("%v idle WebSockets refused for their address, want at least 1,900 of 2,000", refused)
	}
}

// A client that sends its body slowly holds no slot of --max-in-flight:
// 256 of them (the default bound) while another client reads, which is
// served; each slow one is answered 408 with a code once the request's
// deadline passes.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	g := startGateway(t, "LISTGATE_REQUEST_TIMEOUT=3s")
	addr := strings.TrimPrefix(g.base, "http://")
	goroutines := metric(t, g.base, "go_goroutines")
	type slow struct {
		conn net.Conn
		read chan string
	}
	var slows []slow
	defer func() {
		for _, s := range slows {
			s.conn.Close()
		}
	}()
	for range 256 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s := slow{conn, make(chan string, 1)}
		slows = append(slows, s)
		fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":", addr)
		go func() {
			conn.SetReadDeadline(time.Now().Add(time.Minute))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				s.read <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			s.read <- fmt.Sprintf("%d %s", resp.StatusCode, b)
		}()
	}
	// Every slow request has reached the gateway, a goroutine each, which
	// reads its body.
	for deadline := time.Now().Add(10 * time.Second); metric(t, g.base, "go_goroutines") < goroutines+256; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow requests did not reach the gateway")
		}
	}
	g.mustOK(`{ listFeatures { key } }`, nil)
	for _, s := range slows {
		if got := <-s.read; !strings.HasPrefix(got, "408 ") || !strings.Contains(got, `"code":"BAD_REQUEST"`) || !strings.Contains(got, "--request-timeout") {
			t.Fatalf("a slow body: %s", got)
		}
	}
}

// Without credentials, the gateway answers loopback names and addresses
// only: a page of another site that reaches it by DNS rebinding names its
// own host, and is refused, over HTTP and WebSocket alike.
func TestOpenGatewayAnswersItsHostsOnly(t *testing.T) {
	g := startGateway(t)
	for _, host := range []string{"evil.example", "evil.example:80", "localhost.evil.example"} {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/graphql", strings.NewReader(`{"query": "{ listFeatures { key } }"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"code":"FORBIDDEN"`) || !strings.Contains(string(b), "--allowed-hosts") {
			t.Fatalf("Host %s: %d %s", host, resp.StatusCode, b)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, wsResp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/graphql",
			&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}, Host: host})
		cancel()
		if err == nil || wsResp == nil || wsResp.StatusCode != http.StatusForbidden {
			t.Fatalf("a WebSocket for Host %s: %v %v", host, wsResp, err)
		}
	}
	for _, host := range []string{"localhost", "127.0.0.1:8080", "[::1]:8080", "app.localhost"} {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/graphql", strings.NewReader(`{"query": "{ listFeatures { key } }"}`))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("Host %s: %d", host, resp.StatusCode)
		}
	}
}
