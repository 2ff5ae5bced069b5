package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/internal/testenv"
)

// browser starts a headless Chromium (Debian's, installed by .ci/run, or
// LISTGATE_CHROMIUM) with a fresh profile (a temporary folder chromedp
// makes and removes). Every request to anything but loopback goes to a
// proxy that does not exist, so the page sees a closed network.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("LISTGATE_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	path = testenv.Program(t, path, "Chromium: install Debian's chromium, as .ci/run does, or set LISTGATE_CHROMIUM")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.WindowSize(1400, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx
}

// pageLog records every request the page makes, every WebSocket it opens
// with the messages it sends there, and every error it logs.
type pageLog struct {
	mu       sync.Mutex
	requests []*network.Request
	sockets  []*socketLog
	errors   []string
}

// socketLog is one WebSocket the page opened.
type socketLog struct {
	id   network.RequestID
	url  string
	sent []string // text messages, in order
}

func (l *pageLog) socket(id network.RequestID) *socketLog {
	for _, s := range l.sockets {
		if s.id == id {
			return s
		}
	}
	return nil
}

func watch(ctx context.Context) *pageLog {
	l := &pageLog{}
	chromedp.ListenTarget(ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			l.requests = append(l.requests, ev.Request)
		case *network.EventWebSocketCreated:
			l.sockets = append(l.sockets, &socketLog{id: ev.RequestID, url: ev.URL})
		case *network.EventWebSocketFrameSent:
			if s := l.socket(ev.RequestID); s != nil && ev.Response.Opcode == 1 {
				s.sent = append(s.sent, ev.Response.PayloadData)
			}
		case *network.EventWebSocketFrameError:
			l.errors = append(l.errors, "WebSocket: "+ev.ErrorMessage)
		case *network.EventResponseReceived:
			if ev.Response.Status >= 400 {
				l.errors = append(l.errors, fmt.Sprintf("HTTP %d from %s", ev.Response.Status, ev.Response.URL))
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				l.errors = append(l.errors, ev.Entry.Text)
			}
		case *runtime.EventExceptionThrown:
			l.errors = append(l.errors, ev.ExceptionDetails.Error())
		}
	})
	return l
}

// artifact writes a file for a person to look at: into LISTGATE_ARTIFACTS,
// or the repository's .run/artifacts.
func artifact(t *testing.T, name string, data []byte) string {
	dir := os.Getenv("LISTGATE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", ".run", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The playground's editors.
const (
	queryEditor  = `.graphiql-query-editor .CodeMirror`
	headerEditor = `.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror`
)

// paste replaces the text of the CodeMirror editor sel as a paste does:
// through the editor's input, without the keystrokes that would open
// completions and close brackets.
func paste(sel, text string) chromedp.Action {
	return chromedp.Tasks{
		chromedp.Click(sel, chromedp.ByQuery),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(input.ModifierCtrl)),
		chromedp.ActionFunc(func(ctx context.Context) error { return input.InsertText(text).Do(ctx) }),
	}
}

// stored is a script that lists the keys of the page's local storage
// whose values hold text.
func stored(text string) string {
	return fmt.Sprintf(`Object.keys(localStorage).filter(k => (localStorage.getItem(k) || '').includes(%q))`, text)
}

// The playground loads from the gateway alone, shows the schema, and runs
// its example query through the UI, with the header editor's Authorization.
func TestPlaygroundInBrowser(t *testing.T) {
	began := time.Now()
	ctx := browser(t)
	base := startGateway(t).base
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 2592000, live: true}) { key } }`)
	hour := time.Now().UTC().Truncate(time.Hour)
	gatewaytest.Post(t, base, "", fmt.Sprintf(`mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"},
		items: [{value: "story1", timestamp: %q}, {value: "story2", timestamp: %q}]) { added } }`,
		hour.Add(-2*time.Hour).Format(time.RFC3339), hour.Add(-time.Hour).Format(time.RFC3339)))

	log := watch(ctx)
	var result, docs string
	var shot []byte
	var leftBehind, keptBefore, keptOn, keptOff []string
	err := chromedp.Run(ctx,
		network.Enable(),
		cdplog.Enable(),
		runtime.Enable(),
		// What an earlier page, which kept headers, left behind.
		chromedp.Navigate(base+"/playground/favicon.svg"),
		chromedp.Evaluate(`localStorage.setItem('graphiql:headers', '{"Authorization": "Bearer left-behind"}');
			localStorage.setItem('graphiql:queries', '{"queries":[{"query":"{ __typename }","headers":"{\\"Authorization\\": \\"Bearer left-behind\\"}"}]}')`, nil),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`.graphiql-execute-button`, chromedp.ByQuery),
		chromedp.Evaluate(stored("left-behind"), &leftBehind),
		chromedp.Click(`button[data-name="headers"]`, chromedp.ByQuery),
		paste(headerEditor, `{"Authorization": "Bearer playground-test-token"}`),
		chromedp.Click(`.graphiql-execute-button`, chromedp.ByQuery),
		chromedp.Poll(`(document.querySelector('.result-window') || {}).innerText.includes('story2')`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text(`.result-window`, &result, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100), // 100: PNG,
		chromedp.Click(`button[aria-label="Show Documentation Explorer"]`, chromedp.ByQuery),
		chromedp.Poll(`(document.querySelector('.graphiql-doc-explorer') || {}).innerText.includes('Mutation')`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text(`.graphiql-doc-explorer`, &docs, chromedp.ByQuery),
		// The token stays in the page: GraphiQL writes headers to local
		// storage only once "Persist headers" is turned on in its settings.
		chromedp.Evaluate(stored("playground-test-token"), &keptBefore),
		chromedp.Click(`button[aria-label="Open settings dialog"]`, chromedp.ByQuery),
		chromedp.Click(`#enable-persist-headers`, chromedp.ByQuery),
		chromedp.Evaluate(stored("playground-test-token"), &keptOn),
		chromedp.Click(`#disable-persist-headers`, chromedp.ByQuery),
		chromedp.Evaluate(stored("playground-test-token"), &keptOff),
	)
	if err != nil {
		var sent []string
		for _, r := range log.requests {
			for _, e := range r.PostDataEntries {
				b, _ := base64.StdEncoding.DecodeString(e.Bytes)
				if len(b) > 300 {
					b = b[len(b)-300:]
				}
				sent = append(sent, string(b))
			}
		}
		t.Fatalf("driving the playground: %v (page errors: %v; bodies sent: %q)", err, log.errors, sent)
	}
	path := artifact(t, "playground.png", shot)
	if !strings.Contains(result, `"story2"`) || !strings.Contains(result, `"story1"`) || strings.Index(result, "story2") > strings.Index(result, "story1") {
		t.Fatalf("response pane does not show the list newest first:\n%s", result)
	}
	if !strings.Contains(docs, "Query") || !strings.Contains(docs, "Mutation") {
		t.Fatalf("documentation explorer:\n%s", docs)
	}
	if len(leftBehind) > 0 {
		t.Errorf("the playground kept the Authorization an earlier page left in local storage (%q)", leftBehind)
	}
	if len(keptBefore) > 0 {
		t.Errorf("the playground kept the Authorization typed under Headers in local storage (%q) without being asked to", keptBefore)
	}
	if !slices.Contains(keptOn, "graphiql:headers") {
		t.Errorf("with Persist headers on, local storage holds the Authorization under %q, not graphiql:headers", keptOn)
	}
	if len(keptOff) > 0 {
		t.Errorf("with Persist headers turned off again, local storage still holds the Authorization (%q)", keptOff)
	}

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.errors) > 0 {
		t.Fatalf("the page logged errors (a blocked asset or a Content-Security-Policy violation?): %q", log.errors)
	}
	sentToken := false
	for _, r := range log.requests {
		if !strings.HasPrefix(r.URL, base+"/") && !strings.HasPrefix(r.URL, "data:") {
			t.Errorf("the page requested %s, outside %s", r.URL, base)
		}
		if strings.HasSuffix(r.URL, "/graphql") && r.Headers["Authorization"] == "Bearer playground-test-token" {
			sentToken = true
		}
	}
	if !sentToken {
		t.Error("no request to /graphql carried the header editor's Authorization")
	}
	t.Logf("playground loaded, ran a query and showed the docs in %v (%d requests, all to %s); screenshot: %s",
		time.Since(began).Round(time.Millisecond), len(log.requests), base, path)
}

// The playground runs a subscription typed into its editor over a
// WebSocket to its own origin, authenticated by the header editor's
// Authorization in connection_init, and shows an item another client adds.
// After the headers change, the next subscription connects with the new
// ones: a refused token shows as the gateway's 4403 close.
func TestPlaygroundSubscriptionInBrowser(t *testing.T) {
	began := time.Now()
	ctx := browser(t)
	const key = "playground-subscription-key"
	sum := sha256.Sum256([]byte(key))
	base := startGateway(t,
		"LISTGATE_API_KEYS=playground "+hex.EncodeToString(sum[:])+" lists:read,lists:write,features:admin",
	).base
	requestAs(t, base, key, `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 2592000, live: true}) { key } }`, nil)

	log := watch(ctx)
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			log.mu.Lock()
			defer log.mu.Unlock()
			t.Fatalf("%s: %v (page errors: %q)", what, err, log.errors)
		}
	}
	const (
		execute = `.graphiql-execute-button`
		stop    = `.graphiql-execute-button[aria-label^="Stop"]`
		pane    = `.result-window`
	)
	paneShows := func(text string) chromedp.Action {
		return chromedp.Poll(fmt.Sprintf(`(document.querySelector(%q) || {}).innerText.includes(%q)`, pane, text), nil,
			chromedp.WithPollingTimeout(30*time.Second))
	}
	subscription := strings.Join([]string{
		`subscription StoriesRead {`,
		`  listItemsAdded(entityType: "user", entityId: "u1",`,
		`                 feature: "reading_history") {`,
		`    value`,
		`    timestamp`,
		`    expiresAt`,
		`  }`,
		`}`,
	}, "\n")

	// A user who turned on Persist headers and typed the token under
	// Headers before: GraphiQL keeps it in local storage, and needs it to
	// load the schema.
	run("loading the playground",
		network.Enable(),
		cdplog.Enable(),
		runtime.Enable(),
		chromedp.Navigate(base+"/playground/favicon.svg"),
		chromedp.Evaluate(`localStorage.setItem('graphiql:shouldPersistHeaders', 'true')`, nil),
		chromedp.Evaluate(`localStorage.setItem('graphiql:headers', '{"Authorization": "Bearer `+key+`"}')`, nil),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(execute, chromedp.ByQuery),
	)
	// In a new tab (+), as the example runs its mutations: GraphiQL starts
	// a tab with empty headers, so the token is typed again.
	run("starting the subscription in a new tab",
		chromedp.Click(`button[aria-label="Add tab"]`, chromedp.ByQuery),
		chromedp.Click(`button[data-name="headers"]`, chromedp.ByQuery),
		paste(headerEditor, `{"Authorization": "Bearer `+key+`"}`),
		paste(queryEditor, subscription),
		// GraphiQL learns the operation's name a moment after an edit.
		chromedp.Poll(`document.querySelector('.graphiql-tab[aria-selected="true"]').innerText.trim() === 'StoriesRead'`, nil,
			chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Click(execute, chromedp.ByQuery),
		chromedp.WaitVisible(stop, chromedp.ByQuery))
	waitForSubscriptions(t, base, 1)
	requestAs(t, base, key, `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"},
		items: [{value: "story-from-another-client"}]) { added } }`, nil)
	var result string
	var shot []byte
	run("waiting for the item in the response pane",
		paneShows("story-from-another-client"),
		chromedp.Text(pane, &result, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100), // 100: PNG
	)
	path := artifact(t, "playground-subscription.png", shot)
	if !strings.Contains(result, `"listItemsAdded"`) || !strings.Contains(result, `"value": "story-from-another-client"`) {
		t.Fatalf("response pane:\n%s", result)
	}

	// Stop, change the token under Headers, and run again: the new
	// connection carries the new token, which the gateway refuses.
	run("running again with other headers",
		chromedp.Click(stop, chromedp.ByQuery),
		chromedp.WaitNotPresent(stop, chromedp.ByQuery),
		paste(headerEditor, `{"Authorization": "Bearer not-a-key"}`),
		chromedp.Click(execute, chromedp.ByQuery),
		paneShows("4403"),
		chromedp.Text(pane, &result, chromedp.ByQuery),
	)
	if !strings.Contains(result, "refused the Authorization under Headers (WebSocket closed: 4403") {
		t.Errorf("response pane after the token changed:\n%s", result)
	}

	log.mu.Lock()
	errs, requests := slices.Clone(log.errors), slices.Clone(log.requests)
	var sockets []socketLog
	for _, s := range log.sockets {
		sockets = append(sockets, socketLog{url: s.url, sent: slices.Clone(s.sent)})
	}
	log.mu.Unlock()

	// The page's policy governs its WebSockets, so the ones above passed
	// it: the same gateway under another name is another origin, refused.
	other := "ws://localhost:" + base[strings.LastIndex(base, ":")+1:] + "/graphql"
	var refused string
	run("opening a WebSocket to another origin", chromedp.Evaluate(fmt.Sprintf(`new Promise(done => {
		document.addEventListener('securitypolicyviolation', e => done(e.violatedDirective + ' ' + e.blockedURI));
		new WebSocket(%q).onopen = () => done('open');
	})`, other), &refused, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if refused != "connect-src "+other {
		t.Errorf("a WebSocket to %s from the playground: %s, not refused by its Content-Security-Policy", other, refused)
	}

	if len(errs) > 0 {
		t.Fatalf("the page logged errors (a blocked asset or a Content-Security-Policy violation?): %q", errs)
	}
	for _, r := range requests {
		if !strings.HasPrefix(r.URL, base+"/") && !strings.HasPrefix(r.URL, "data:") {
			t.Errorf("the page requested %s, outside %s", r.URL, base)
		}
	}
	socketURL := "ws" + strings.TrimPrefix(base, "http") + "/graphql"
	var inits []string
	for _, s := range sockets {
		if s.url != socketURL {
			t.Errorf("the page opened a WebSocket to %s, not %s", s.url, socketURL)
		}
		if len(s.sent) == 0 {
			t.Errorf("the page sent nothing on its WebSocket to %s", s.url)
			continue
		}
		var init struct {
			Type    string            `json:"type"`
			Payload map[string]string `json:"payload"`
		}
		if err := json.Unmarshal([]byte(s.sent[0]), &init); err != nil || init.Type != "connection_init" {
			t.Errorf("the first message on a WebSocket is %s, not connection_init", s.sent[0])
		}
		inits = append(inits, init.Payload["Authorization"])
	}
	if want := []string{"Bearer " + key, "Bearer not-a-key"}; !slices.Equal(inits, want) {
		t.Errorf("the WebSockets' connection_init carried Authorization %q, want %q, one connection each", inits, want)
	}
	t.Logf("the playground showed an item added by another client over a WebSocket, then connected with the changed headers, in %v (%d requests and %d WebSockets, all to %s); screenshot: %s",
		time.Since(began).Round(time.Millisecond), len(requests), len(sockets), base, path)
}

// waitForSubscriptions waits until the gateway holds n subscriptions
// (listgate_subscriptions_active): an item added before a subscription
// starts watching its list is not new to it.
func waitForSubscriptions(t *testing.T, base string, n int) {
	t.Helper()
	want := fmt.Sprintf("listgate_subscriptions_active %d", n)
	var metrics []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(metrics)) {
			if strings.TrimSpace(line) == want {
				return
			}
		}
	}
	t.Fatalf("the gateway did not hold %d subscriptions within 30 s; its metrics:\n%s", n, metrics)
}

// A page on another origin may call /graphql only when that origin is
// listed.
func TestCORSInBrowser(t *testing.T) {
	ctx := browser(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>another origin</title>")
	}))
	defer other.Close()
	allowed := startGateway(t, "LISTGATE_CORS_ORIGINS="+other.URL).base
	notListed := startGateway(t, "LISTGATE_CORS_ORIGINS=https://app.example.com").base

	call := func(base string) string {
		var out string
		js := fmt.Sprintf(`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/json', 'Authorization': 'Bearer x'},
			body: JSON.stringify({query: '{ listFeatures { key } }'})})
			.then(r => r.text().then(b => r.status + ' ' + b), e => 'blocked: ' + e)`, base+"/graphql")
		if err := chromedp.Run(ctx, chromedp.Evaluate(js, &out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
			return p.WithAwaitPromise(true)
		})); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := chromedp.Run(ctx, chromedp.Navigate(other.URL)); err != nil {
		t.Fatal(err)
	}
	if got := call(allowed); got != `200 {"data":{"listFeatures":[]}}` {
		t.Errorf("from a listed origin: %s", got)
	}
	if got := call(notListed); !strings.HasPrefix(got, "blocked: TypeError") {
		t.Errorf("from an origin not listed: %s", got)
	}

	// The preflight the browser sent, as a client sees it.
	req, _ := http.NewRequest(http.MethodOptions, allowed+"/graphql", nil)
	req.Header.Set("Origin", other.URL)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization,content-type") // sorted, as browsers send it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != other.URL ||
		h.Get("Access-Control-Max-Age") != "600" || !strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") ||
		h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight: %d %v", resp.StatusCode, h)
	}
}

// A page on a listed origin reads what each answer says of its budget:
// the RateLimit and RateLimit-Policy headers, X-Request-Id, and, once the
// budget is spent, Retry-After and the 429's extensions.cost, refused for
// its cost or, after that, before its document is parsed.
func TestBudgetHeadersInBrowser(t *testing.T) {
	ctx := browser(t)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>another origin</title>")
	}))
	defer other.Close()
	g := startGateway(t, "LISTGATE_CORS_ORIGINS="+other.URL,
		"LISTGATE_MAX_COMPLEXITY=5000", "LISTGATE_CALLER_COST_BURST=5000", "LISTGATE_CALLER_COST_RATE=1")
	if err := chromedp.Run(ctx, chromedp.Navigate(other.URL)); err != nil {
		t.Fatal(err)
	}
	// About 4,000 points: the second does not fit.
	js := fmt.Sprintf(`(() => {
		const call = () => fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/json'},
			body: JSON.stringify({query: '{ entities(type: "user", entityIds: ["1", "2"]) { list(feature: "f", limit: 1000) { items { value } } } }', extensions: {cost: true}})})
			.then(r => r.json().then(b => ({status: r.status, rateLimit: r.headers.get('RateLimit'), policy: r.headers.get('RateLimit-Policy'),
				retryAfter: r.headers.get('Retry-After'), requestId: r.headers.get('X-Request-Id'), cost: (b.extensions || {}).cost || null})));
		return call().then(a => call().then(b => call().then(c => JSON.stringify([a, b, c]))));
	})()`, g.base+"/graphql")
	var out string
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	})); err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Status                                   int
		RateLimit, Policy, RetryAfter, RequestID *string
		Cost                                     *struct{ Requested, Limit, Remaining int64 }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 3 {
		t.Fatalf("%s: %v", out, err)
	}
	if first := got[0]; first.Status != 200 || first.RateLimit == nil || first.Policy == nil || first.RequestID == nil || first.Cost == nil || first.Cost.Limit != 5000 {
		t.Errorf("what the page read of the first answer: %s", out)
	}
	for _, refused := range got[1:] {
		if refused.Status != 429 || refused.RetryAfter == nil || refused.RateLimit == nil || refused.Cost == nil || refused.Cost.Remaining >= refused.Cost.Requested {
			t.Errorf("what the page read of the 429s: %s", out)
		}
	}
	t.Logf("what the page read: %s", out)
}
