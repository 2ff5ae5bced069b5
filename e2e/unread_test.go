package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/internal/wsclient"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// keysEnv configures API keys named by their tokens, each with scopes.
func keysEnv(scopes string, tokens ...string) string {
	var lines []string
	for _, tok := range tokens {
		sum := sha256.Sum256([]byte(tok))
		lines = append(lines, tok+" "+hex.EncodeToString(sum[:])+" "+scopes)
	}
	return "LISTGATE_API_KEYS=" + strings.Join(lines, ";")
}

// seedLargeList writes, into the embedded store in dir, the list
// user/u1 of feature "big": n items of size bytes each.
func seedLargeList(t *testing.T, dir string, n, size int) {
	t.Helper()
	seedStore(t, dir, func(ctx context.Context, s *embedded.Store) {
		f := seedFeature(t, ctx, s, "big", store.String)
		now := time.Now()
		var batch []store.NewItem
		for i := range n {
			v := []byte(strings.Repeat("x", size))
			copy(v, fmt.Sprintf("item %d ", i))
			batch = append(batch, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: v})
			if len(batch) == 200 || i == n-1 {
				if _, err := s.AddItems(ctx, store.List{Feature: f, EntityID: "u1"}, batch); err != nil {
					t.Fatal(err)
				}
				batch = nil
			}
		}
	})
}

// unread is a request whose client reads the status line of its answer
// and nothing more, through a receive buffer of 4 KiB: the gateway's write
// of a large answer blocks until the connection closes.
type unread struct {
	conn   net.Conn
	status int
}

// sendUnread sends a GraphQL query with token over a connection of its
// own, by POST or GET, and reads the answer's status line.
func sendUnread(base, method, token, query string) (*unread, error) {
	conn, err := smallDialer.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return nil, err
	}
	var req string
	if method == http.MethodGet {
		req = fmt.Sprintf("GET /graphql?query=%s HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n\r\n", url.QueryEscape(query), token)
	} else {
		body, _ := json.Marshal(map[string]string{"query": query})
		req = fmt.Sprintf("POST /graphql HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", token, len(body), body)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(req)); err != nil {
		conn.Close()
		return nil, err
	}
	line, err := bufio.NewReaderSize(conn, 64).ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("status line: %w", err)
	}
	u := &unread{conn: conn}
	if _, err := fmt.Sscanf(line, "HTTP/1.1 %d", &u.status); err != nil {
		conn.Close()
		return nil, fmt.Errorf("status line %q", line)
	}
	conn.SetDeadline(time.Time{})
	return u, nil
}

// sendUnreadMany sends n requests with token at once, alternately by POST
// and GET, and returns them once each has its status line; they are
// closed when the test ends.
func sendUnreadMany(t *testing.T, g *gateway, token, query string, n int) []*unread {
	t.Helper()
	out := make([]*unread, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			method := http.MethodPost
			if i%2 == 1 {
				method = http.MethodGet
			}
			out[i], errs[i] = sendUnread(g.base, method, token, query)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, u := range out {
			if u != nil {
				u.conn.Close()
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("unread request %d of %s: %v (statuses %v)%s", i, token, err, statuses(out), g.mem.note())
		}
	}
	return out
}

func statuses(us []*unread) map[int]int {
	m := map[int]int{}
	for _, u := range us {
		if u == nil {
			m[0]++
			continue
		}
		m[u.status]++
	}
	return m
}

// smallDialer dials with a receive buffer of 4 KiB: a client that stops
// reading soon stops the gateway's write.
var smallDialer = net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return err
}}

// sendUnreadWS sends a query with token over a WebSocket of its own, and
// reads the type of the message that answers it (next, or error) and
// nothing more. The socket closes when the test ends, or with close.
func sendUnreadWS(t *testing.T, ctx context.Context, base, token, query string) (typ string, close func(), err error) {
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
		HTTPClient:   &http.Client{Transport: &http.Transport{DialContext: smallDialer.DialContext}},
	})
	if err != nil {
		return "", nil, err
	}
	close = func() { ws.CloseNow() }
	t.Cleanup(close)
	ws.SetReadLimit(-1)
	for _, m := range []map[string]any{
		{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}},
		{"type": "subscribe", "id": "1", "payload": map[string]any{"query": query}},
	} {
		b, _ := json.Marshal(m)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			return "", close, err
		}
		if m["type"] == "subscribe" {
			break
		}
		if _, ack, err := ws.Read(ctx); err != nil || !strings.Contains(string(ack), "connection_ack") {
			return "", close, fmt.Errorf("connection_init: %s %v", ack, err)
		}
	}
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return "", close, err
	}
	first := make([]byte, 16)
	if _, err := io.ReadFull(r, first); err != nil {
		return "", close, err
	}
	typ, _, _ = strings.Cut(strings.TrimPrefix(string(first), `{"type":"`), `"`)
	return typ, close, nil
}

// otherCaller sends, as key-c, a small read by POST, by GET and over a
// WebSocket, and fails the test unless each is served within a bound a
// loaded machine cannot miss (alone, each takes milliseconds).
func otherCaller(t *testing.T, base string) {
	t.Helper()
	const within = 5 * time.Second
	query := `{ listItems(entityType: "user", entityId: "n1", feature: "small", limit: 5) { items { value } } }`
	client := &http.Client{Timeout: 30 * time.Second}
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		var req *http.Request
		if method == http.MethodPost {
			body, _ := json.Marshal(map[string]string{"query": query})
			req, _ = http.NewRequest(method, base+"/graphql", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		} else {
			req, _ = http.NewRequest(method, base+"/graphql?query="+url.QueryEscape(query), nil)
		}
		req.Header.Set("Authorization", "Bearer key-c")
		began := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("key-c's %s: %v", method, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(began)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "hello") || took > within {
			t.Fatalf("key-c's %s: %d after %v: %.300s; want its list within %v", method, resp.StatusCode, took.Round(time.Millisecond), b, within)
		}
		t.Logf("key-c's %s: served in %v", method, took.Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, base, "key-c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	if err := c.Subscribe(ctx, "1", query, nil); err != nil {
		t.Fatal(err)
	}
	m, err := c.Read(ctx)
	if took := time.Since(began); err != nil || m.Type != "next" || !strings.Contains(string(m.Payload), "hello") || took > within {
		t.Fatalf("key-c's query over a WebSocket: %+v %v after %v; want its list within %v", m, err, took.Round(time.Millisecond), within)
	}
	t.Logf("key-c's WebSocket query: served in %v", time.Since(began).Round(time.Millisecond))
}

// seedUnread writes user/u1 of "big" (items of size bytes) and user/n1 of
// "small" (one item, "hello") into the embedded store in dir.
func seedUnread(t *testing.T, dir string, items, size int) {
	t.Helper()
	seedLargeList(t, dir, items, size)
	seedStore(t, dir, func(ctx context.Context, s *embedded.Store) {
		f := seedFeature(t, ctx, s, "small", store.String)
		if _, err := s.AddItems(ctx, store.List{Feature: f, EntityID: "n1"}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("hello")}}); err != nil {
			t.Fatal(err)
		}
	})
}

// Issue 38: a client that does not read its answer held a slot of
// --max-in-flight until the write timed out (20 s), so two keys holding
// half the slots each took them all, and every other caller was refused
// 503. Keys a (16 requests, by POST and GET) and b (16 WebSockets) ask
// for answers of 6 MB and read none of them, on a gateway of 32 slots:
// the answers are built and their writes block, holding their bytes of
// --max-in-flight-response-bytes (the gauge shows them) but no slot, and
// key c's reads by POST, GET and WebSocket are served at once; once the
// clients go, the bytes are given back.
func TestUnreadAnswersHoldNoSlot(t *testing.T) {
	dir := t.TempDir()
	const items, size = 200, 30_000
	seedUnread(t, dir, items, size)
	g := startGateway(t, "LISTGATE_DATA_DIR="+dir, "LISTGATE_MAX_IN_FLIGHT=32", keysEnv("lists:read", "key-a", "key-b", "key-c"))
	query := fmt.Sprintf(`{ listItems(entityType: "user", entityId: "u1", feature: "big", limit: %d) { items { value } } }`, items)
	us := sendUnreadMany(t, g, "key-a", query, 16)
	if st := statuses(us); st[http.StatusOK] != 16 {
		t.Fatalf("key-a's 16 unread requests: statuses %v, want 16 × 200", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var closes []func()
	for i := range 16 {
		typ, close, err := sendUnreadWS(t, ctx, g.base, "key-b", query)
		if err != nil || typ != "next" {
			t.Fatalf("key-b's unread WebSocket %d: %q %v, want a next message", i, typ, err)
		}
		closes = append(closes, close)
	}
	held := metric(t, g.base, "listgate_inflight_response_bytes")
	t.Logf("32 answers of %d MB unread: %.0f MB of answers held", items*size/1_000_000, held/1e6)
	if held < 32*items*size {
		t.Errorf("listgate_inflight_response_bytes = %.0f while 32 answers of %d bytes are written, want at least %d", held, items*size, 32*items*size)
	}
	otherCaller(t, g.base)
	for _, u := range us {
		u.conn.Close()
	}
	for _, close := range closes {
		close()
	}
	for deadline := time.Now().Add(30 * time.Second); metric(t, g.base, "listgate_inflight_response_bytes") != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listgate_inflight_response_bytes = %v 30 s after the clients went, want 0", metric(t, g.base, "listgate_inflight_response_bytes"))
		}
	}
}

// Issue 38: 100 requests of one key for answers of 29 MB, half by POST and
// half by GET, whose clients read none of them, took 2,900 MB: each
// answer was held until its write timed out, and their complexity (1,001
// points each) said nothing of their bytes. Now the key's answers hold at
// most its share of --max-in-flight-response-bytes (a page reserves its
// bytes before it is read; the rest wait for room until their deadline,
// then are refused THROTTLED), with 8 more over WebSockets; the gateway's
// resident memory stays under the bound of the attack tests, and key c
// is served meanwhile.
func TestUnreadAnswersStayWithinTheirBytes(t *testing.T) {
	dir := t.TempDir()
	const items, size = 1000, 29_000
	seedUnread(t, dir, items, size)
	g := startGateway(t, "LISTGATE_DATA_DIR="+dir, "LISTGATE_MEMORY_LIMIT="+attackMemoryLimit, keysEnv("lists:read", "key-a", "key-c"))
	query := fmt.Sprintf(`{ listItems(entityType: "user", entityId: "u1", feature: "big", limit: %d) { items { value } } }`, items)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ws sync.WaitGroup
	wsTypes := make([]string, 8)
	for i := range wsTypes {
		ws.Go(func() {
			typ, _, err := sendUnreadWS(t, ctx, g.base, "key-a", query)
			if err != nil {
				typ = err.Error()
			}
			wsTypes[i] = typ
		})
	}
	us := sendUnreadMany(t, g, "key-a", query, 100)
	ws.Wait()
	t.Logf("key-a's 100 unread requests: statuses %v; its 8 WebSockets: %v; after %v, %.0f MB of answers held",
		statuses(us), wsTypes, time.Since(began).Round(time.Millisecond), metric(t, g.base, "listgate_inflight_response_bytes")/1e6)
	otherCaller(t, g.base)
	g.checkMemory("108 unread answers of 29 MB")
}
