package graph_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
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
