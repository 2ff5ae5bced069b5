package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/endpoint"
)

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A caller's cost budget holds on POST, GET and WebSocket alike: every
// answer says what is left (RateLimit-Policy and RateLimit headers, and
// extensions.cost when asked); past it an operation is refused before it
// runs, 429 with Retry-After and THROTTLED over HTTP, THROTTLED over a
// WebSocket; another caller is not; the budget refills with time. An API
// key's own budget (cost=rate/burst) wins over the gateway's.
func TestCallerBudgetsOnEveryPath(t *testing.T) {
	authn, err := auth.New(auth.Config{APIKeys: []string{
		keyLine("small", "s", "lists:read,lists:write,features:admin") + " cost=10/100",
		keyLine("other", "o", "lists:read"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	g, srv := subscriptionGateway(t, embeddedStore(t), func(c *endpoint.Config) {
		c.Auth = authn
		c.Now = clk.now
	})
	g.token = "s"
	g.createFeature("f", "STRING", 3600) // costs 2 of small's 100
	query := `{ listItems(entityType: "` + g.entityType + `", entityId: "u1", feature: "f", limit: 10) { items { value } } }`

	post := func(token string, ext map[string]any) *httptest.ResponseRecorder {
		return g.post(token, map[string]any{"query": query, "extensions": ext})
	}
	w := post("s", map[string]any{"cost": true})
	var resp struct {
		Extensions struct {
			Cost struct{ Requested, Limit, Remaining, ResetSeconds int64 }
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	cost := resp.Extensions.Cost
	if cost.Requested < 10 || cost.Limit != 100 || cost.Remaining != 100-2-cost.Requested || cost.ResetSeconds < 1 {
		t.Fatalf("extensions.cost: %+v (%s)", cost, w.Body)
	}
	if p, l := w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"); p != `"cost";q=100;w=10` || !strings.HasPrefix(l, `"cost";r=`) {
		t.Fatalf("headers: RateLimit-Policy %q, RateLimit %q", p, l)
	}
	if w := post("s", nil); strings.Contains(w.Body.String(), "extensions") {
		t.Fatalf("extensions.cost unasked: %s", w.Body)
	}
	// Spend the rest, then be refused.
	for range 100 / int(cost.Requested) {
		if w = post("s", nil); w.Code != 200 {
			break
		}
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), `"THROTTLED"`) || !strings.Contains(w.Body.String(), "--caller-cost-rate") {
		t.Fatalf("past the budget: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	req := httptest.NewRequest(http.MethodGet, "http://localhost/graphql?query="+url.QueryEscape(query), nil)
	req.Header.Set("Authorization", "Bearer s")
	get := httptest.NewRecorder()
	g.h.ServeHTTP(get, req)
	if get.Code != http.StatusTooManyRequests || !strings.Contains(get.Body.String(), `"THROTTLED"`) {
		t.Fatalf("a GET past the budget: %d %s", get.Code, get.Body)
	}
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init("s"); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	if _, errs := c.query("1", query); !strings.Contains(errs, "THROTTLED") {
		t.Fatalf("over a WebSocket past the budget: %s", errs)
	}
	if w := post("o", nil); w.Code != 200 {
		t.Fatalf("another caller: %d %s", w.Code, w.Body)
	}
	clk.add(10 * time.Second)
	if w := post("s", nil); w.Code != 200 || w.Header().Get("RateLimit") == "" {
		t.Fatalf("after the budget refilled: %d %s", w.Code, w.Body)
	}
	if _, errs := c.query("2", query); errs != "" {
		t.Fatalf("over a WebSocket after the budget refilled: %s", errs)
	}
}

// A caller holding its share of the in-flight slots is refused THROTTLED
// (429) at once, while another caller is served.
func TestCallerShareOfInFlight(t *testing.T) {
	authn, err := auth.New(auth.Config{APIKeys: []string{keyLine("a", "a", "lists:read,features:admin"), keyLine("b", "b", "lists:read")}})
	if err != nil {
		t.Fatal(err)
	}
	s := contextStore{Store: embeddedStore(t), started: make(chan struct{}, 10)}
	g, _ := subscriptionGateway(t, s, func(c *endpoint.Config) {
		c.Auth = authn
		c.Limits.MaxInFlight = 4
		c.Limits.RequestTimeout = 5 * time.Second
	})
	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	query := `{ listItems(entityType: "` + g.entityType + `", entityId: "u1", feature: "f", limit: 10) { items { value } } }`
	post := func(token string) *httptest.ResponseRecorder {
		return g.post(token, map[string]any{"query": query})
	}
	var held sync.WaitGroup
	for range 2 { // a's share: half of 4
		held.Go(func() { post("a") })
		<-s.started
	}
	if w := post("a"); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), `"THROTTLED"`) || !strings.Contains(w.Body.String(), "--caller-max-in-flight-share") {
		t.Fatalf("a third from a: %d %s", w.Code, w.Body)
	}
	held.Go(func() { post("b") })
	select {
	case <-s.started: // b's read runs
	case <-time.After(10 * time.Second):
		t.Fatal("b's read did not start")
	}
	held.Wait()
}

// A request that asks for extensions.cost gets it in every answer, a 429
// included: once a caller's last operation was refused, its requests are
// refused before their documents are parsed, and each still says where
// the caller stands, over POST, GET and a WebSocket (whose error message
// carries errors alone: there, in the error's extensions).
func TestCostOnEveryRefusal(t *testing.T) {
	authn, err := auth.New(auth.Config{APIKeys: []string{keyLine("small", "s", "lists:read,features:admin") + " cost=10/100"}})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	g, srv := subscriptionGateway(t, embeddedStore(t), func(c *endpoint.Config) {
		c.Auth = authn
		c.Now = clk.now
	})
	g.token = "s"
	g.createFeature("f", "STRING", 3600)
	query := `{ listItems(entityType: "` + g.entityType + `", entityId: "u1", feature: "f", limit: 30) { items { value } } }`
	asked := map[string]any{"cost": true}
	type cost struct{ Requested, Limit, Remaining, ResetSeconds int64 }
	costOf := func(what string, body []byte) cost {
		t.Helper()
		var resp struct {
			Errors     []struct{ Extensions struct{ Code string } }
			Extensions struct{ Cost *cost }
		}
		if err := json.Unmarshal(body, &resp); err != nil || len(resp.Errors) != 1 || resp.Errors[0].Extensions.Code != "THROTTLED" || resp.Extensions.Cost == nil {
			t.Fatalf("%s: %s; want THROTTLED and extensions.cost", what, body)
		}
		return *resp.Extensions.Cost
	}
	var w *httptest.ResponseRecorder
	for range 10 { // 30 points each, of 100
		if w = g.post("s", map[string]any{"query": query, "extensions": asked}); w.Code != 200 {
			break
		}
	}
	if c := costOf("refused for its cost", w.Body.Bytes()); w.Code != http.StatusTooManyRequests || c.Requested < 30 || c.Limit != 100 || c.Remaining >= c.Requested {
		t.Fatalf("refused for its cost: %d %+v", w.Code, c)
	}
	want := costOf("", w.Body.Bytes())
	// From now on, refused before the document is parsed.
	w = g.post("s", map[string]any{"query": query, "extensions": asked})
	if c := costOf("a POST of a blocked caller", w.Body.Bytes()); w.Code != http.StatusTooManyRequests || c != want || w.Header().Get("Retry-After") == "" {
		t.Fatalf("a POST of a blocked caller: %d %+v, want %+v", w.Code, c, want)
	}
	if w := g.post("s", map[string]any{"query": query}); w.Code != http.StatusTooManyRequests || strings.Contains(w.Body.String(), `"cost"`) {
		t.Fatalf("a POST that does not ask: %d %s", w.Code, w.Body)
	}
	req := httptest.NewRequest(http.MethodGet, "http://localhost/graphql?query="+url.QueryEscape(query)+"&extensions="+url.QueryEscape(`{"cost":true}`), nil)
	req.Header.Set("Authorization", "Bearer s")
	get := httptest.NewRecorder()
	g.h.ServeHTTP(get, req)
	if c := costOf("a GET of a blocked caller", get.Body.Bytes()); get.Code != http.StatusTooManyRequests || c != want {
		t.Fatalf("a GET of a blocked caller: %d %+v, want %+v", get.Code, c, want)
	}
	c, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.init("s"); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	payload, _ := json.Marshal(map[string]any{"query": query, "extensions": asked})
	c.send(wsMessage{ID: "1", Type: "subscribe", Payload: payload})
	m, err := c.next()
	var errs []struct {
		Extensions struct {
			Code string
			Cost *cost
		}
	}
	if err != nil || m.Type != "error" || json.Unmarshal(m.Payload, &errs) != nil || len(errs) != 1 || errs[0].Extensions.Code != "THROTTLED" ||
		errs[0].Extensions.Cost == nil || *errs[0].Extensions.Cost != want {
		t.Fatalf("over a WebSocket, a blocked caller: %+v %v; want THROTTLED with extensions.cost %+v", m, err, want)
	}
}

// An answer is charged what it writes past its cost, a point a KiB: a page
// of 10 KiB values costs about its bytes in KiB, a page of short ones its
// items alone, on POST, GET and a WebSocket alike. A caller whose answer
// cost more than its bucket held is in debt, and waits it out.
func TestAnswersCostTheirBytes(t *testing.T) {
	authn, err := auth.New(auth.Config{APIKeys: []string{
		keyLine("admin", "a", "lists:read,lists:write,features:admin"),
		keyLine("reader", "r", "lists:read") + " cost=10/100000",
		keyLine("tiny", "t", "lists:read") + " cost=1/100",
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()} // still: what a caller has left moves by what it spends
	g, srv := subscriptionGateway(t, embeddedStore(t), func(c *endpoint.Config) {
		c.Auth = authn
		c.Now = clk.now
	})
	g.token = "a"
	g.createFeature("f", "STRING", 3600)
	large, short := make([]item, 20), make([]item, 20)
	for i := range large {
		large[i] = item{fmt.Sprint(i, strings.Repeat("x", 10<<10)), ""}
		short[i] = item{fmt.Sprint(i), ""}
	}
	g.add("large", "f", large...)
	g.add("short", "f", short...)
	read := func(entityID string) string {
		return `{ listItems(entityType: "` + g.entityType + `", entityId: "` + entityID + `", feature: "f", limit: 20) { items { value } } }`
	}
	type cost struct{ Requested, Remaining int64 }
	costOf := func(what string, body []byte) cost {
		t.Helper()
		var resp struct {
			Errors     json.RawMessage
			Extensions struct{ Cost *cost }
		}
		if err := json.Unmarshal(body, &resp); err != nil || resp.Errors != nil || resp.Extensions.Cost == nil {
			t.Fatalf("%s: %.300s", what, body)
		}
		return *resp.Extensions.Cost
	}
	asked := map[string]any{"cost": true}
	shortCost := costOf("short values", g.post("r", map[string]any{"query": read("short"), "extensions": asked}).Body.Bytes())
	if shortCost.Requested > 50 {
		t.Fatalf("20 short values cost %d points: more than their items", shortCost.Requested)
	}
	remaining := shortCost.Remaining
	bytesCost := func(c cost) bool { return c.Requested >= 200 && c.Requested <= 210 } // 20 × 10 KiB and their keys
	c1 := costOf("large values by POST", g.post("r", map[string]any{"query": read("large"), "extensions": asked}).Body.Bytes())
	if !bytesCost(c1) || c1.Remaining != remaining-c1.Requested {
		t.Fatalf("20 values of 10 KiB by POST: %+v, %d left before", c1, remaining)
	}
	req := httptest.NewRequest(http.MethodGet, "http://localhost/graphql?query="+url.QueryEscape(read("large"))+"&extensions="+url.QueryEscape(`{"cost":true}`), nil)
	req.Header.Set("Authorization", "Bearer r")
	get := httptest.NewRecorder()
	g.h.ServeHTTP(get, req)
	if c := costOf("large values by GET", get.Body.Bytes()); c != (cost{c1.Requested, c1.Remaining - c1.Requested}) {
		t.Fatalf("by GET: %+v, by POST %+v", c, c1)
	}
	ws, _, err := dial(t, srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ws.conn.SetReadLimit(1 << 20)
	if m, err := ws.init("r"); err != nil || m.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", m, err)
	}
	payload, _ := json.Marshal(map[string]any{"query": read("large"), "extensions": asked})
	ws.send(wsMessage{ID: "1", Type: "subscribe", Payload: payload})
	if m, err := ws.next(); err != nil || m.Type != "next" {
		t.Fatalf("over a WebSocket: %+v %v", m, err)
	} else if c := costOf("large values over a WebSocket", m.Payload); c != (cost{c1.Requested, c1.Remaining - 2*c1.Requested}) {
		t.Fatalf("over a WebSocket: %+v, by POST %+v", c, c1)
	}

	// tiny's 100 points pay for the read's items, not for its 200 KiB: it
	// is then 100 in debt (at most one burst), and its next read waits for
	// the debt, at a point a second, then for what it costs.
	if w := g.post("t", map[string]any{"query": read("large")}); w.Code != http.StatusOK || strings.Contains(w.Body.String(), "errors") {
		t.Fatalf("tiny's first read: %d %.300s", w.Code, w.Body)
	}
	w := g.post("t", map[string]any{"query": read("short")})
	if retry, _ := strconv.Atoi(w.Header().Get("Retry-After")); w.Code != http.StatusTooManyRequests || retry != 100 || !strings.Contains(w.Body.String(), "owes 100 points") {
		t.Fatalf("tiny after an answer past its budget: %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	clk.add(100 * time.Second)
	if w := g.post("t", map[string]any{"query": read("short")}); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "costs") {
		t.Fatalf("tiny with its debt paid and nothing left: %d %s", w.Code, w.Body)
	}
	clk.add(time.Duration(shortCost.Requested) * time.Second)
	if w := g.post("t", map[string]any{"query": read("short")}); w.Code != http.StatusOK {
		t.Fatalf("tiny once its debt is paid: %d %s", w.Code, w.Body)
	}
}
