package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/telemetry"
)

// A gateway whose cluster stops answering (here its session to the
// cluster closed under it, as a driver whose every connection is lost
// fails) answers UNAVAILABLE with the status it answers it while it opens
// its store: 503 and Retry-After, on POST and on GET, for a query and for
// a mutation, whose payload is null.
func TestUnavailableHasOneStatus(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	ks := fmt.Sprintf("unavailable_%d", os.Getpid())
	freshKeyspace(t, cqltest.Hosts(t), ks)
	var opened atomic.Pointer[cql.Store]
	open := func(ctx context.Context, cfg config, tel *telemetry.Telemetry, log *slog.Logger) (store.Store, error) {
		s, err := openStore(ctx, cfg, tel, log)
		if c, ok := s.(*cql.Store); ok {
			opened.Store(c)
		}
		return s, err
	}
	g := launch(t, telemetry.Options{}, telemetry.NewLogger(gatewaytest.Log{T: t}, "text", slog.LevelError), open,
		"--cql-hosts", hosts, "--cql-keyspace", ks, "--migrate", "--cql-timeout", "10s", "--request-timeout", "5s")
	t.Cleanup(func() { g.stop() })
	if _, out := gatewaytest.Post(t, g.base, "", `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`); out["errors"] != nil {
		t.Fatal(out)
	}
	query := `{ listItems(entityType: "user", entityId: "u1", feature: "f") { items { value } } }`
	if a, out := gatewaytest.Post(t, g.base, "", query); a.Status != http.StatusOK || out["errors"] != nil {
		t.Fatalf("a read while the cluster answers: %d %v", a.Status, out)
	}

	opened.Load().Close() // the cluster is gone, as far as the gateway can tell
	for name, send := range map[string]func() (int, http.Header, string){
		"POST query": func() (int, http.Header, string) {
			a, out := gatewaytest.Post(t, g.base, "", query)
			return a.Status, a.Header, fmt.Sprint(out)
		},
		"POST mutation": func() (int, http.Header, string) {
			a, out := gatewaytest.Post(t, g.base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "f"}, items: [{value: "a"}]) { added } }`)
			return a.Status, a.Header, fmt.Sprint(out)
		},
		"GET query": func() (int, http.Header, string) {
			resp, err := http.Get(g.base + "/graphql?query=" + url.QueryEscape(query))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, string(b)
		},
	} {
		status, header, body := send()
		if status != http.StatusServiceUnavailable || header.Get("Retry-After") != "1" {
			t.Errorf("%s once the cluster is gone: %d, Retry-After %q, %s; want 503 and Retry-After 1, as while the store opens", name, status, header.Get("Retry-After"), body)
		}
		if body != "" && !strings.Contains(body, "UNAVAILABLE") {
			t.Errorf("%s: %s, want UNAVAILABLE", name, body)
		}
	}
}
