package documents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/listgate/listgate/errkind"
)

const (
	read  = "query Read($id: ID!) { listItems(entityType: \"user\", entityId: $id, feature: \"f\") { items { value } } }"
	count = "query Count { listCount(entityType: \"user\", entityId: \"u1\", feature: \"f\") }"
	add   = "mutation Add { addListItems(list: {entityType: \"user\", entityId: \"u1\", feature: \"f\"}, items: [{value: \"a\"}]) { added } }"
)

func sum(body string) string {
	s := sha256.Sum256([]byte(body))
	return hex.EncodeToString(s[:])
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The three manifest formats, alone or in a folder; a body is found by
// its manifest id, "sha256:<hex>" and the bare hex; bad manifests say why.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	apollo := write(t, dir, "apollo.json", `{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"`+sum(read)+`","body":"`+jsonEscape(read)+`","name":"Read","type":"query"}]}`)
	write(t, dir, "genqlient.json", `{"operations":[{"operationName":"Count","query":"`+jsonEscape(count)+`","sourceLocation":"operations.graphql"}]}`)
	write(t, dir, "relay.json", `{"add-1":"`+jsonEscape(add)+`"}`)
	s, err := Load(apollo)
	if err != nil || s.Len() != 1 || s.byID[sum(read)] != read || s.byID["sha256:"+sum(read)] != read {
		t.Fatalf("Apollo manifest: %v %+v", err, s)
	}
	all, err := Load(dir)
	if err != nil || all.Len() != 3 || all.byID["add-1"] != add || all.byID["sha256:"+sum(count)] != count {
		t.Fatalf("a folder: %v %+v", err, all)
	}
	for name, content := range map[string]string{
		"not JSON":           `{`,
		"unknown format":     `{"format":"something-else","version":1}`,
		"future version":     `{"format":"apollo-persisted-query-manifest","version":2,"operations":[]}`,
		"no body":            `{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"x","body":""}]}`,
		"not GraphQL":        `{"a":"{ unclosed \""}`,
		"empty":              `{}`,
		"one id, two bodies": `{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"x","body":"{ a }"},{"id":"x","body":"{ b }"}]}`,
	} {
		bad := write(t, t.TempDir(), "m.json", content)
		if _, err := Load(bad); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func jsonEscape(s string) string {
	out := ""
	for _, r := range s {
		if r == '"' || r == '\\' {
			out += `\`
		}
		out += string(r)
	}
	return out
}

// What each mode does with a document named by id or hash, a trusted text
// (in other white space too), and a text that is not trusted; a caller
// with documents:any runs anything; a bad manifest read again keeps the
// set in use.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "m.json", `{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"read-1","body":"`+jsonEscape(read)+`","name":"Read","type":"query"}]}`)
	ctx := context.Background()
	open := func(mode Mode) *Trusted {
		tr, err := New(path, mode, slog.New(slog.DiscardHandler), metricnoop.NewMeterProvider().Meter(""))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	enforce, audit := open(Enforce), open(Audit)
	for _, tc := range []struct {
		name  string
		tr    *Trusted
		r     Request
		query string
		found bool
		err   error
	}{
		{"by manifest id", enforce, Request{DocumentID: "read-1"}, read, true, nil},
		{"by sha256:", enforce, Request{DocumentID: "sha256:" + sum(read)}, read, true, nil},
		{"by APQ hash", enforce, Request{APQHash: sum(read)}, read, true, nil},
		{"its text", enforce, Request{Query: read}, read, true, nil},
		{"its text, spaced otherwise", enforce, Request{Query: "query Read($id: ID!) {\n  listItems(entityType: \"user\", entityId: $id, feature: \"f\") {\n    items { value }\n  }\n}\n"}, "", true, nil},
		{"an unknown id", enforce, Request{DocumentID: "nope"}, "", false, ErrNotInList},
		{"an unknown hash", enforce, Request{APQHash: sum(count)}, "", false, ErrNotInList},
		{"an unknown text", enforce, Request{Query: count}, "", false, ErrNotSafelisted},
		{"an unknown text, documents:any", enforce, Request{Query: count, AnyAllowed: true}, count, true, nil},
		{"an unknown hash, documents:any", enforce, Request{APQHash: sum(count)}, "", false, nil},
		{"an unknown text, audit", audit, Request{Query: count}, count, true, nil},
		{"an unknown hash alone, audit", audit, Request{APQHash: sum(count)}, "", false, nil},
		{"an unknown id, audit", audit, Request{DocumentID: "nope"}, "", false, ErrNotInList},
		{"an id and another text", enforce, Request{DocumentID: "read-1", Query: count}, "", false, errkind.Malformed},
	} {
		if tc.name == "an unknown hash, documents:any" {
			tc.r.AnyAllowed = true
		}
		q, found, err := tc.tr.Resolve(ctx, tc.r)
		switch {
		case tc.err == nil && err != nil, tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.err)
		case found != tc.found || (tc.query != "" && q != tc.query):
			t.Errorf("%s: %q %v, want %q %v", tc.name, q, found, tc.query, tc.found)
		}
	}
	write(t, dir, "m.json", `{"format":"apollo-persisted-query-manifest","version":1,"operations":[`)
	if err := enforce.Reload(ctx); err == nil {
		t.Fatal("a bad manifest was read")
	}
	if q, _, err := enforce.Resolve(ctx, Request{DocumentID: "read-1"}); err != nil || q != read {
		t.Fatalf("after a bad manifest: %q %v", q, err)
	}
	write(t, dir, "m.json", `{"c":"`+jsonEscape(count)+`"}`)
	if err := enforce.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := enforce.Resolve(ctx, Request{DocumentID: "read-1"}); !errors.Is(err, ErrNotInList) {
		t.Fatalf("after a new manifest, the old document: %v", err)
	}
	if _, off := New("", "", slog.New(slog.DiscardHandler), metricnoop.NewMeterProvider().Meter("")); off != nil {
		t.Fatal(off)
	}
}

// Audit mode counts exactly the requests enforce mode refuses: a text
// not in the set, an APQ hash not in the set (alone, with a text, with
// the text it hashes), a trusted hash with another text, an unknown id;
// and none that enforce runs, nor any from a caller with documents:any.
func TestAuditCountsWhatEnforceRefuses(t *testing.T) {
	path := write(t, t.TempDir(), "m.json", `{"format":"apollo-persisted-query-manifest","version":1,"operations":[{"id":"read-1","body":"`+jsonEscape(read)+`","name":"Read","type":"query"}]}`)
	ctx := context.Background()
	open := func(mode Mode) (*Trusted, func() int64) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { mp.Shutdown(ctx) })
		tr, err := New(path, mode, slog.New(slog.DiscardHandler), mp.Meter(""))
		if err != nil {
			t.Fatal(err)
		}
		counted := func() int64 {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(ctx, &rm); err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "listgate.untrusted_operations" {
						for _, dp := range sum.DataPoints {
							n += dp.Value
						}
					}
				}
			}
			return n
		}
		return tr, counted
	}
	enforce, enforced := open(Enforce)
	audit, audited := open(Audit)
	for _, tc := range []struct {
		name    string
		r       Request
		refused bool
	}{
		{"a trusted text", Request{Query: read}, false},
		{"a trusted text, spaced otherwise", Request{Query: "query Read($id: ID!) {\n listItems(entityType: \"user\", entityId: $id, feature: \"f\") { items { value } } }"}, false},
		{"a trusted hash alone", Request{APQHash: sum(read)}, false},
		{"a trusted hash with its text", Request{APQHash: sum(read), Query: read}, false},
		{"a trusted id", Request{DocumentID: "read-1"}, false},
		{"a text not in the set", Request{Query: count}, true},
		{"a hash not in the set, alone", Request{APQHash: sum(count)}, true},
		{"a hash not in the set, with its text (an APQ registration)", Request{APQHash: sum(count), Query: count}, true},
		{"a hash not in the set, with a trusted text", Request{APQHash: sum(count), Query: read}, true},
		{"a trusted hash with another text", Request{APQHash: sum(read), Query: count}, true},
		{"an id not in the set", Request{DocumentID: "nope"}, true},
		{"a text not in the set, documents:any", Request{Query: count, AnyAllowed: true}, false},
		{"a hash not in the set alone, documents:any", Request{APQHash: sum(count), AnyAllowed: true}, false},
	} {
		before, beforeAudit := enforced(), audited()
		_, _, err := enforce.Resolve(ctx, tc.r)
		refused := errors.Is(err, ErrNotInList) || errors.Is(err, ErrNotSafelisted)
		if refused != tc.refused {
			t.Errorf("%s: enforce refused %v (%v), want %v", tc.name, refused, err, tc.refused)
		}
		if n := enforced() - before; n != map[bool]int64{true: 1}[refused] {
			t.Errorf("%s: enforce counted %d, refused %v", tc.name, n, refused)
		}
		audit.Resolve(ctx, tc.r)
		if n := audited() - beforeAudit; n != map[bool]int64{true: 1}[refused] {
			t.Errorf("%s: audit counted %d; enforce refused it: %v", tc.name, n, refused)
		}
	}
}
