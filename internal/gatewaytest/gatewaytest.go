// Package gatewaytest is how tests and the nemesis talk to a running
// gateway over HTTP, whether run in the test's process (package main) or
// as the listgate command (package e2e, internal/nemesis): the one
// function that POSTs a GraphQL request, the writers that take the
// gateway's address and its log lines, and the listgate command built and
// started as a process (process.go). It never decides what an answer
// should be.
package gatewaytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// BodyCap bounds what Send reads of one response.
const BodyCap = 64 << 20

// Answer is one GraphQL answer as a test saw it.
type Answer struct {
	Status    int
	Header    http.Header
	Body      []byte // at most BodyCap
	Truncated bool
	Took      time.Duration
	Err       error // a transport error, the client's timeout, or a body that is not JSON
	Data      json.RawMessage
	Errors    []Error
}

// Error is one entry of an answer's errors.
type Error struct {
	Message    string `json:"message"`
	Path       []any  `json:"path"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

// Send POSTs a GraphQL request body to base's /graphql with client and
// reads the answer. It never fails the test, so any goroutine may call it.
func Send(client *http.Client, base, accept string, body []byte) (a Answer) {
	began := time.Now()
	defer func() { a.Took = time.Since(began) }()
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		a.Err = err
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Err = err
		return a
	}
	defer resp.Body.Close()
	a.Status, a.Header = resp.StatusCode, resp.Header
	a.Body, a.Err = io.ReadAll(io.LimitReader(resp.Body, BodyCap+1))
	if len(a.Body) > BodyCap {
		a.Body, a.Truncated = a.Body[:BodyCap], true
		return a
	}
	if a.Err == nil {
		var out struct {
			Data   json.RawMessage `json:"data"`
			Errors []Error         `json:"errors"`
		}
		if err := json.Unmarshal(a.Body, &out); err != nil {
			a.Err = fmt.Errorf("response is not JSON: %v", err)
		}
		a.Data, a.Errors = out.Data, out.Errors
	}
	return a
}

// Post sends {"query": query} with Send and http.DefaultClient, and decodes
// the answer into a map too; a transport error or a body that is not JSON
// fails the test.
func Post(t testing.TB, base, accept, query string) (Answer, map[string]any) {
	t.Helper()
	return PostRequest(t, base, accept, map[string]any{"query": query})
}

// PostRequest is Post of a whole request body (with variables, say).
func PostRequest(t testing.TB, base, accept string, request map[string]any) (Answer, map[string]any) {
	t.Helper()
	body, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	a := Send(http.DefaultClient, base, accept, body)
	if a.Err != nil || a.Truncated {
		t.Fatalf("POST %s/graphql: %s", base, a)
	}
	var out map[string]any
	if err := json.Unmarshal(a.Body, &out); err != nil {
		t.Fatal(err)
	}
	return a, out
}

// HasData reports whether the answer carries data (not absent, not null).
func (a Answer) HasData() bool { return len(a.Data) > 0 && string(a.Data) != "null" }

// String shows the answer for a failure message: its first 400 bytes.
func (a Answer) String() string {
	body := a.Body
	if len(body) > 400 {
		body = append(body[:400:400], "…"...)
	}
	return fmt.Sprintf("after %v: status %d, %d bytes (truncated %v), err %v: %s", a.Took.Round(time.Millisecond), a.Status, len(a.Body), a.Truncated, a.Err, body)
}

// Codes lists the answer's error codes, "" for an error without one.
func (a Answer) Codes() []string {
	var c []string
	for _, e := range a.Errors {
		c = append(c, e.Extensions.Code)
	}
	return c
}

// Problem says what is wrong with an answer that should be a normal
// success, or "".
func (a Answer) Problem() string {
	switch {
	case a.Err != nil || a.Truncated:
		return a.String()
	case strings.TrimSpace(string(a.Body)) == "null":
		return "a bare null body " + a.String()
	case a.Status != http.StatusOK || len(a.Errors) > 0 || !a.HasData():
		return a.String()
	}
	return ""
}

// Log sends a gateway's log lines to the test's log (shown when it fails,
// or with -v).
type Log struct{ T testing.TB }

func (l Log) Write(p []byte) (int, error) {
	l.T.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var servingRE = regexp.MustCompile(`serving (http://\S+)`)

// AddrWriter takes a gateway's standard output and hands the address of
// its "listgate serving http://…" line to Addr. The gateway prints that
// line only with text logs (--log-format text).
type AddrWriter struct {
	once sync.Once
	addr chan string
}

func NewAddrWriter() *AddrWriter { return &AddrWriter{addr: make(chan string, 1)} }

// Addr delivers the base URL the gateway serves, once it says so.
func (w *AddrWriter) Addr() <-chan string { return w.addr }

func (w *AddrWriter) Write(p []byte) (int, error) {
	if m := servingRE.FindSubmatch(p); m != nil {
		w.once.Do(func() { w.addr <- string(m[1]) })
	}
	return len(p), nil
}
