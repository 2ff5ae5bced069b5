package graph_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/introspection"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/store"
)

// Documents whose parsing, validation or introspection would cost without
// bound are refused before they run, each naming the limit, fast.
func TestDocumentLimits(t *testing.T) {
	g := newGateway(t, embeddedStore(t))
	aliases := func(n int, distinct bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if distinct {
				fmt.Fprintf(&b, " a%d: __typename", i)
			} else {
				b.WriteString(" a: __typename")
			}
		}
		return b.String() + " }"
	}
	// Each fragment spreads the next twice: 2^30 fields once expanded.
	var chain strings.Builder
	chain.WriteString("{ ...F0 }")
	for i := range 30 {
		fmt.Fprintf(&chain, " fragment F%d on Query { ...F%d ...F%d }", i, i+1, i+1)
	}
	chain.WriteString(" fragment F30 on Query { __typename }")
	nested := strings.Repeat("{ ... on Query ", 2000) + "{ __typename }" + strings.Repeat("}", 2000)
	// The introspection bomb: every field of every type, with its type's
	// fields, k times over at two levels.
	bomb := func(k int) string {
		var f, g strings.Builder
		for i := range k {
			fmt.Fprintf(&f, " f%d: fields(includeDeprecated: true) { name type { ...G } }", i)
			fmt.Fprintf(&g, " g%d: fields(includeDeprecated: true) { name }", i)
		}
		return "{ __schema { types { ...F } } } fragment F on __Type {" + f.String() + " } fragment G on __Type {" + g.String() + " }"
	}
	// Few fields, each resolved for every argument of every field of
	// every type.
	wide := func(k int) string {
		var b strings.Builder
		for i := range k {
			fmt.Fprintf(&b, " a%d: args { name }", i)
		}
		return "{ __schema { types { fields {" + b.String() + " } } } }"
	}
	for _, c := range []struct{ name, query, says string }{
		{"repeated alias", aliases(endpoint.DefaultLimits.MaxFields+1, false), "--max-fields"},
		{"distinct aliases", aliases(endpoint.DefaultLimits.MaxFields+1, true), "--max-fields"},
		{"fragment chain", chain.String(), "--max-fields"},
		{"nested inline fragments", nested, "--max-fields"},
		{"tokens", "{" + strings.Repeat(" __typename", endpoint.DefaultLimits.MaxTokens) + " }", "--max-tokens"},
		{"introspection bomb", bomb(50), "--max-fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			g.fails(c.query, nil, "BAD_USER_INPUT", c.says)
			if took := time.Since(began); took > time.Second {
				t.Errorf("refused after %v", took)
			}
		})
	}
	// GraphiQL's own introspection query fits, and costs what it resolves:
	// with a limit that it fits, a wider one does not.
	data, errs := g.do(introspection.Query, nil)
	if len(errs) > 0 || data["__schema"] == nil {
		t.Fatalf("the standard introspection query: %+v", errs)
	}
	small := newGateway(t, embeddedStore(t), func(c *endpoint.Config) { c.Limits.MaxComplexity = 5000 })
	small.ok(introspection.Query, nil, nil)
	small.fails(wide(100), nil, "BAD_USER_INPUT", "--max-complexity")
}

// pageStore answers every list read with the same page of large values.
type pageStore struct {
	store.Store
	page store.Page
}

func (s pageStore) Items(context.Context, store.List, store.Range) (store.Page, error) {
	return s.page, nil
}

// A response may carry at most --max-response-bytes of list items and
// errors: past it, fields fail, and the response shows one error naming
// the flag; the fields before stand.
func TestResponseBytesAreBounded(t *testing.T) {
	page := store.Page{}
	for i := range 100 {
		page.Items = append(page.Items, store.Item{Key: fmt.Sprintf("%019d#AAAAAAAAAAAAAAAAAAAAAA==", i), Timestamp: int64(i), Value: bytes.Repeat([]byte("x"), 30_000)})
	}
	g := newGateway(t, pageStore{Store: embeddedStore(t), page: page}, func(c *endpoint.Config) { c.Limits.MaxResponseBytes = 8 << 20 })
	g.createFeature("f", "STRING", 3600)
	var q strings.Builder
	q.WriteString("{")
	for i := range 5 {
		fmt.Fprintf(&q, ` a%d: listItems(entityType: "$type", entityId: "u1", feature: "f") { items { value } }`, i)
	}
	data, errs := g.do(q.String()+" }", nil)
	// Each page is about 3 MB: two fit in 8 MiB; the three that do not
	// fail, and their errors are one.
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "--max-response-bytes") || errs[0].Extensions.Code != "BAD_USER_INPUT" {
		t.Fatalf("errors %+v; want one naming --max-response-bytes", errs)
	}
	if data != nil {
		t.Fatalf("data %v: listItems is non-null, so its failure nulls the data", len(data))
	}
}

// blockingStore holds list reads until released.
type blockingStore struct {
	store.Store
	started chan struct{}
	release chan struct{}
}

func (s blockingStore) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	s.started <- struct{}{}
	<-s.release
	return s.Store.Items(ctx, l, r)
}

// Past --max-in-flight, requests are refused at once with 503, UNAVAILABLE
// and Retry-After, and served again once a slot frees.
func TestInFlightRequestsAreBounded(t *testing.T) {
	s := blockingStore{Store: embeddedStore(t), started: make(chan struct{}, 1), release: make(chan struct{})}
	g := newGateway(t, s, func(c *endpoint.Config) { c.Limits.MaxInFlight = 1 })
	g.createFeature("f", "STRING", 3600)
	read := `{ listItems(entityType: "$type", entityId: "u1", feature: "f") { hasMore } }`
	var wg sync.WaitGroup
	wg.Go(func() { g.ok(read, nil, nil) })
	<-s.started
	req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", strings.NewReader(`{"query": "{ __typename }"}`))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "UNAVAILABLE") || !strings.Contains(w.Body.String(), "--max-in-flight") {
		t.Fatalf("second request: %d %v %s", w.Code, w.Header(), w.Body)
	}
	close(s.release)
	wg.Wait()
	g.ok(`{ __typename }`, nil, nil)
}

// Operations run only while their complexity fits in what the running ones
// leave of --max-in-flight-complexity; one that does not fit waits, and
// past its deadline answers TIMEOUT.
func TestInFlightComplexityIsBounded(t *testing.T) {
	s := blockingStore{Store: embeddedStore(t), started: make(chan struct{}, 1), release: make(chan struct{})}
	g := newGateway(t, s, func(c *endpoint.Config) {
		c.Limits.MaxComplexity = 1500
		c.Limits.MaxInFlightComplexity = 1500
		c.Limits.RequestTimeout = 300 * time.Millisecond
		c.Limits.CallerInFlightShare = 1 // the process's budget, for one caller
	})
	g.createFeature("f", "STRING", 3600)
	big := `{ listItems(entityType: "$type", entityId: "u1", feature: "f", limit: 500) { items { value } } }` // 1 + 500 × 2
	done := make(chan []gqlError, 1)
	first := *g
	go func() { _, errs := first.do(big, nil); done <- errs }()
	select {
	case <-s.started:
	case errs := <-done:
		t.Fatalf("the first request ended without reading: %+v", errs)
	}
	began := time.Now()
	waiting := make(chan time.Duration, 1)
	other := *g // a client of its own: do records its last status
	go func() {
		other.fails(big, nil, "TIMEOUT", "--request-timeout")
		waiting <- time.Since(began)
	}()
	time.Sleep(50 * time.Millisecond)
	small := time.Now()
	g.ok(`{ __typename }`, nil, nil) // a waiting large one holds up no small one
	if took := time.Since(small); took > 100*time.Millisecond {
		t.Fatalf("a small query waited %v behind a large one", took)
	}
	if waited := <-waiting; waited < 250*time.Millisecond {
		t.Fatalf("refused after %v, before its deadline", waited)
	}
	close(s.release)
	<-done
	go func() { <-s.started }()
	g.ok(big, nil, nil)
}

// The response bound counts the bytes written, escapes included: a page of
// 1,000 values of 32 KB of "<", each written as \u003c, is refused, where
// the stored bytes alone would fit.
func TestResponseBytesCountEscapes(t *testing.T) {
	page := store.Page{}
	for i := range 1000 {
		page.Items = append(page.Items, store.Item{Key: fmt.Sprintf("%019d#AAAAAAAAAAAAAAAAAAAAAA==", i), Timestamp: int64(i), Value: bytes.Repeat([]byte("<"), 32<<10)})
	}
	g := newGateway(t, pageStore{Store: embeddedStore(t), page: page})
	g.createFeature("f", "STRING", 3600)
	e := g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "f", limit: 1000) { items { value } } }`, nil, "BAD_USER_INPUT", "--max-response-bytes")
	if fmt.Sprint(e.Path) != "[listItems]" {
		t.Fatalf("path %v", e.Path)
	}
	// 200 of them, 6.4 MB stored and 39 MB written, are refused too.
	page.Items = page.Items[:200]
	g = newGateway(t, pageStore{Store: embeddedStore(t), page: page})
	g.createFeature("f", "STRING", 3600)
	g.fails(`{ listItems(entityType: "$type", entityId: "u1", feature: "f", limit: 1000) { items { value } } }`, nil, "BAD_USER_INPUT", "--max-response-bytes")
}
