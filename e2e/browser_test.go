package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// pageLog records every request the page makes and every error it logs.
type pageLog struct {
	mu       sync.Mutex
	requests []*network.Request
	errors   []string
}

func watch(ctx context.Context) *pageLog {
	l := &pageLog{}
	chromedp.ListenTarget(ctx, func(ev any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			l.requests = append(l.requests, ev.Request)
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

// The playground loads from the gateway alone, shows the schema, and runs
// its example query through the UI, with the header editor's Authorization.
func TestPlaygroundInBrowser(t *testing.T) {
	began := time.Now()
	ctx := browser(t)
	base := startGateway(t).base
	gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 2592000}) { key } }`)
	hour := time.Now().UTC().Truncate(time.Hour)
	gatewaytest.Post(t, base, "", fmt.Sprintf(`mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"},
		items: [{value: "story1", timestamp: %q}, {value: "story2", timestamp: %q}]) { added } }`,
		hour.Add(-2*time.Hour).Format(time.RFC3339), hour.Add(-time.Hour).Format(time.RFC3339)))

	log := watch(ctx)
	var result, docs string
	var shot []byte
	err := chromedp.Run(ctx,
		network.Enable(),
		cdplog.Enable(),
		runtime.Enable(),
		// The header editor keeps its contents in local storage; set it, as a
		// user who typed a token there would have, before the page first loads.
		chromedp.Navigate(base+"/playground/favicon.svg"),
		chromedp.Evaluate(`localStorage.setItem('graphiql:headers', '{"Authorization": "Bearer playground-test-token"}')`, nil),
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`.graphiql-execute-button`, chromedp.ByQuery),
		chromedp.Click(`.graphiql-execute-button`, chromedp.ByQuery),
		chromedp.Poll(`(document.querySelector('.result-window') || {}).innerText.includes('story2')`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Text(`.result-window`, &result, chromedp.ByQuery),
		chromedp.FullScreenshot(&shot, 100), // 100: PNG,
		chromedp.Click(`button[aria-label="Show Documentation Explorer"]`, chromedp.ByQuery),
		chromedp.Poll(`(document.querySelector('.graphiql-doc-explorer') || {}).innerText.includes('Mutation')`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text(`.graphiql-doc-explorer`, &docs, chromedp.ByQuery),
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
