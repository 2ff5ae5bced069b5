package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A GET whose URL is past --max-header-bytes (2 MB, past the default of
// 1 MiB) is answered 431 in the endpoint's JSON shape, naming the flag, on
// the public listener and on an operator's.
func TestHugeURLAnswersJSON(t *testing.T) {
	base, line := startupLine(t, "--data-dir", t.TempDir(), "--metrics-listen", "127.0.0.1:0")
	metrics, _ := line["metrics_listen"].(string)
	for name, addr := range map[string]string{"public": strings.TrimPrefix(base, "http://"), "metrics": metrics} {
		t.Run(name, func(t *testing.T) {
			resp := hugeGET(t, addr, 2<<20)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Errors []struct {
					Message    string
					Extensions struct{ Code string }
				}
			}
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(body, &out) != nil || len(out.Errors) != 1 || out.Errors[0].Extensions.Code != "BAD_REQUEST" ||
				!strings.Contains(out.Errors[0].Message, "past 1048576 bytes (--max-header-bytes)") {
				t.Fatalf("%d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
		})
	}
}

// hugeGET sends a GET of a URL of n bytes to addr and reads the answer
// while it is still sending: the server answers, then stops reading.
func hugeGET(t *testing.T, addr string, n int) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(time.Minute))
	go fmt.Fprintf(conn, "GET /graphql?query=%s HTTP/1.1\r\nHost: %s\r\n\r\n", strings.Repeat("x", n), addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
