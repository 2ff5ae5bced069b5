package e2e

// Issue 38, finding 6, on a gateway process: a list of features costs the
// features it may return, as the catalog counts them, and its answer is
// charged to --max-response-bytes as its field resolves, so that an
// oversized one is refused before it is written.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// catalogFeatures is the catalog: 209 features of one entity type.
const catalogFeatures = 209

// seedCatalog creates n features of the entity type user in the store in
// dir, each with a description of descBytes.
func seedCatalog(t *testing.T, dir string, n, descBytes int) {
	t.Helper()
	seedStore(t, dir, func(ctx context.Context, s *embedded.Store) {
		for i := range n {
			desc := fmt.Sprintf("feature %d ", i)
			desc += strings.Repeat("d", max(0, descBytes-len(desc)))
			if _, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: fmt.Sprintf("f%03d", i), ValueType: store.String,
				TTL: 24 * time.Hour, Description: desc, MaxItems: 100}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// descriptionAliases is one listFeatures whose selection writes each
// feature's description n times.
func descriptionAliases(n int) string {
	var b strings.Builder
	b.WriteString("{ listFeatures {")
	for i := range n {
		fmt.Fprintf(&b, " d%d: description", i)
	}
	return b.String() + " } }"
}

// featureFields are the nine fields of a feature the attack
// selected.
const featureFields = "key entityType name version valueType ttlSeconds description createdAt maxItems"

// featureListAliases is n aliases of listFeatures, each with the nine
// fields.
func featureListAliases(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: listFeatures { %s }", i, featureFields)
	}
	return b.String() + " }"
}

// sendBy sends a query by POST, GET or over a WebSocket (its first next or
// error message), with token when not "", and reads the answer as a POST's.
func (g *gateway) sendBy(transport, token, query string) gatewaytest.Answer {
	switch transport {
	case "GET":
		began := time.Now()
		req, _ := http.NewRequest(http.MethodGet, g.base+"/graphql?query="+url.QueryEscape(query), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		a := readAnswer(g.client.Do(req))
		a.Took = time.Since(began)
		return a
	case "WebSocket":
		return g.wsAnswer(token, query)
	}
	body, _ := json.Marshal(map[string]any{"query": query})
	if token == "" {
		return g.post(body)
	}
	req, _ := http.NewRequest(http.MethodPost, g.base+"/graphql", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	began := time.Now()
	a := readAnswer(g.client.Do(req))
	a.Took = time.Since(began)
	return a
}

// readAnswer reads an HTTP answer as gatewaytest.Send does.
func readAnswer(resp *http.Response, err error) gatewaytest.Answer {
	if err != nil {
		return gatewaytest.Answer{Err: err}
	}
	defer resp.Body.Close()
	a := gatewaytest.Answer{Status: resp.StatusCode, Header: resp.Header}
	if a.Body, a.Err = io.ReadAll(io.LimitReader(resp.Body, gatewaytest.BodyCap)); a.Err != nil {
		return a
	}
	var out struct {
		Data   json.RawMessage     `json:"data"`
		Errors []gatewaytest.Error `json:"errors"`
	}
	a.Err = json.Unmarshal(a.Body, &out)
	a.Data, a.Errors = out.Data, out.Errors
	return a
}

// wsAnswer sends a query in a subscribe message of a graphql-transport-ws
// connection of its own and reads its first next or error message as an
// answer: its payload's data and errors, or its errors.
func (g *gateway) wsAnswer(token, query string) gatewaytest.Answer {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout+answerMargin)
	defer cancel()
	began := time.Now()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return gatewaytest.Answer{Err: err}
	}
	defer conn.CloseNow()
	conn.SetReadLimit(gatewaytest.BodyCap)
	init := map[string]any{}
	if token != "" {
		init["Authorization"] = "Bearer " + token
	}
	for _, m := range []map[string]any{
		{"type": "connection_init", "payload": init},
		{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query}},
	} {
		b, _ := json.Marshal(m)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			return gatewaytest.Answer{Err: err}
		}
	}
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return gatewaytest.Answer{Err: err, Took: time.Since(began)}
		}
		var m struct {
			Type    string
			Payload json.RawMessage
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return gatewaytest.Answer{Err: err, Body: b}
		}
		a := gatewaytest.Answer{Status: http.StatusOK, Body: b, Took: time.Since(began)}
		switch m.Type {
		case "next":
			var p struct {
				Data   json.RawMessage     `json:"data"`
				Errors []gatewaytest.Error `json:"errors"`
			}
			a.Err = json.Unmarshal(m.Payload, &p)
			a.Data, a.Errors = p.Data, p.Errors
			return a
		case "error":
			a.Err = json.Unmarshal(m.Payload, &a.Errors)
			return a
		}
	}
}

// The reproduction: 209 features of 1 KB descriptions, and one
// listFeatures writing each description 490 times (a complexity of 491):
// one request took the gateway's memory up by 441 MB, eight at once to
// 1,752 MB, answered past their deadline. Now that selection costs 490
// points a feature (102,901 here, more than --max-complexity) and is
// refused before it runs; 200 descriptions a feature (42,001 points, an
// answer of 43 MB) are refused by --max-response-bytes as the field
// resolves, before anything is written: over POST, GET and a WebSocket,
// and eight at once. The gateway's memory grows by less than twice the
// response bound meanwhile, and 20 descriptions a feature (4.3 MB) are
// still served.
func TestFeatureListIsPricedByItsFeatures(t *testing.T) {
	dir := t.TempDir()
	seedCatalog(t, dir, catalogFeatures, 1024)
	g := startAttackGateway(t, dir)
	const responseBound = 32 << 20 // --max-response-bytes, the default
	served := g.mustOK(descriptionAliases(20), nil)
	if n := strings.Count(string(served.Data), `"d19":`); n != catalogFeatures+1 { // and the feature "small"
		t.Fatalf("20 descriptions of each feature: %d features in the answer, want %d", n, catalogFeatures+1)
	}
	t.Logf("20 descriptions of each feature: served, %d bytes in %v", len(served.Body), served.Took.Round(time.Millisecond))
	baseline, err := procStatus(g.Cmd.Process.Pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	tr := g.normalTraffic()
	for _, transport := range []string{"POST", "GET", "WebSocket"} {
		for _, c := range []struct {
			aliases int
			flags   []string
		}{
			{490, []string{"--max-complexity"}},
			{200, []string{"--max-response-bytes"}},
		} {
			r := g.sendBy(transport, "", descriptionAliases(c.aliases))
			g.wantRefused(fmt.Sprintf("%s: %d descriptions of each feature", transport, c.aliases), r, g.timeout, "BAD_USER_INPUT", c.flags...)
			if len(r.Body) > 64<<10 {
				t.Errorf("%s: %d descriptions of each feature: a refusal of %d bytes", transport, c.aliases, len(r.Body))
			}
			g.alive()
		}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r := g.do(descriptionAliases(200), nil)
			g.wantRefused(fmt.Sprintf("client %d of 8: 200 descriptions of each feature", i), r, g.timeout, "BAD_USER_INPUT", "--max-response-bytes")
		})
	}
	wg.Wait()
	g.alive()
	tr.finish(t)
	peak, _ := g.mem.peak()
	t.Logf("VmRSS %d MiB before the attack, %d MiB at its peak", baseline>>20, peak>>20)
	if grew := peak - baseline; grew > 2*responseBound {
		t.Errorf("the gateway's memory grew by %d MiB, more than twice --max-response-bytes (%d MiB)%s", grew>>20, 2*responseBound>>20, g.mem.note())
	}
	g.checkMemory("lists of features of large descriptions")
}

// The second reproduction: with 209 features, a read-only key
// sending 110 aliases of listFeatures with nine fields each (990 points,
// answers of 3.4 MB) from two threads used 10.1 s of CPU in 9.6 s and
// took another key's p99 from 1.6 ms to 155 ms, having spent 1% of its
// budget. Here key A, with a budget of its own (cost=100000/200000), sends
// the most such aliases one operation may hold once each feature is priced
// (52, about 98,000 points), from two threads for 10 s, while key B reads
// a list of 10 items. A is served no more than its budget pays for, and
// B's 99th percentile stays within 20 times what it is alone.
func TestFeatureListsCannotStarveAnotherCaller(t *testing.T) {
	dir := t.TempDir()
	seedCatalog(t, dir, catalogFeatures, 60)
	seedStore(t, dir, func(ctx context.Context, s *embedded.Store) {
		f := seedFeature(t, ctx, s, "small", store.String)
		items := make([]store.NewItem, 10)
		for i := range items {
			items[i] = store.NewItem{Timestamp: time.Now().Add(-time.Duration(i) * time.Second).UnixNano(), Value: fmt.Appendf(nil, "story%d", i)}
		}
		if _, err := s.AddItems(ctx, store.List{Feature: f, EntityID: "small0"}, items); err != nil {
			t.Fatal(err)
		}
	})
	const rate, burst = 100_000, 200_000
	keys := map[string]string{"a": "catalog-a-key", "b": "catalog-b-key"}
	budgets := map[string]string{"a": fmt.Sprintf(" cost=%d/%d", rate, burst), "b": ""}
	var lines []string
	for name, key := range keys {
		sum := sha256.Sum256([]byte(key))
		lines = append(lines, name+" "+hex.EncodeToString(sum[:])+" lists:read"+budgets[name])
	}
	g := startGateway(t, "LISTGATE_MODE=prod", "LISTGATE_DATA_DIR="+dir, "LISTGATE_API_KEYS="+strings.Join(lines, ";"))

	const features = catalogFeatures + 1 // and "small"
	perAlias := 1 + 9*features           // one listFeatures of nine fields, priced by its features
	aliases := 100_000 / perAlias        // as many as --max-complexity holds
	heavy := featureListAliases(aliases)
	if r := g.sendBy("POST", keys["a"], heavy); r.Problem() != "" {
		t.Fatalf("A's operation: %s", r.Problem())
	} else if n := strings.Count(string(r.Data), `"maxItems":`); n != aliases*features {
		t.Fatalf("A's operation: %d features in its answer, want %d", n, aliases*features)
	}
	small := `{ listItems(entityType: "user", entityId: "small0", feature: "small", limit: 10) { items { value } } }`
	measureB := func(d time.Duration) []time.Duration {
		var took []time.Duration
		for end := time.Now().Add(d); time.Now().Before(end); {
			r := g.sendBy("POST", keys["b"], small)
			if p := r.Problem(); p != "" {
				t.Fatalf("B: %s", p)
			}
			took = append(took, r.Took)
		}
		return took
	}
	measureB(time.Second) // connections open, documents parsed
	alone := measureB(3 * time.Second)

	var served, throttled atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch r := g.sendBy("POST", keys["a"], heavy); {
				case r.Problem() == "":
					served.Add(1)
				case r.Status == http.StatusTooManyRequests:
					throttled.Add(1)
					select { // as Retry-After says
					case <-stop:
					case <-time.After(time.Second):
					}
				default:
					t.Errorf("A: %s", r)
					return
				}
			}
		})
	}
	cpuBefore, err := cpuTime(g.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	beside := measureB(10 * time.Second)
	close(stop)
	wg.Wait()
	ran := time.Since(began)
	cpuAfter, err := cpuTime(g.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("A: %d aliases of %d points each; %d operations served, %d throttled in %v; the gateway used %v of CPU",
		aliases, perAlias, served.Load(), throttled.Load(), ran.Round(time.Millisecond), (cpuAfter - cpuBefore).Round(10*time.Millisecond))
	t.Logf("B's p99: %v alone (%d reads), %v beside A (%d reads)", p99(alone), len(alone), p99(beside), len(beside))
	// What A's budget pays for, the first operation's included.
	if most := 1 + (burst+rate*ran.Seconds())/float64(aliases*perAlias); float64(served.Load()) > most {
		t.Errorf("A was served %d operations of %d points in %v; its budget pays for %.0f at most", served.Load(), aliases*perAlias, ran, most)
	}
	if p99(beside) > 20*p99(alone) {
		t.Errorf("B's p99 went from %v alone to %v beside A, more than 20 times", p99(alone), p99(beside))
	}
}
