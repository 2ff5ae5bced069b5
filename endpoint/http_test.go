package endpoint

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/listgate/listgate/auth"
	"github.com/listgate/listgate/graph"
	"github.com/listgate/listgate/guards"
	"github.com/listgate/listgate/operation"

	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph/exec"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// Our POST answers exactly as gqlgen's transport: status, content type and
// body, byte for byte.
func TestPostTransportMatchesGqlgen(t *testing.T) {
	s, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.JSON, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: "u1"}, []store.NewItem{{Timestamp: now, Value: []byte(`{"a":[1,"x"]}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: "u2"}, []store.NewItem{{Timestamp: now, Value: []byte(`{"a":[1,"x\u2028<>&é"]}`)}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(ctx, s, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: DefaultLimits, Introspection: true, Log: log}
	ours, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Shutdown(ctx)
	// gqlgen's own server, with its POST transport and the same extensions,
	// given each request an operation as ours gives it.
	gqlgen := handler.New(exec.NewExecutableSchema(exec.Config{Resolvers: graph.NewResolver(ours.lists)}))
	gqlgen.SetValidationRulesFn(guards.ValidationRules)
	budget, err := guards.NewBudget(1<<40, 1, noop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	callers, err := guards.NewCallers(0, 0, time.Now, noop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	extensions{cfg: cfg, lists: ours.lists, budget: budget, callers: callers, tracer: tracenoop.NewTracerProvider().Tracer(""),
		present: errorPresenter(log, func(context.Context, error) {}, ours.lists), recover: graphql.DefaultRecover}.install(gqlgen)
	gqlgen.AddTransport(transport.POST{})
	theirs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := operation.New(operation.POST, time.Now())
		op.Principal = auth.Anyone
		gqlgen.ServeHTTP(w, r.WithContext(operation.With(r.Context(), op)))
	})
	for _, tc := range []struct{ name, accept, body string }{
		{"data", "", `{"query":"{ listItems(entityType: \"user\", entityId: \"u1\", feature: \"f\") { items { value timestamp } hasMore } }"}`},
		{"data encoding/json escapes", "", `{"query":"{ listItems(entityType: \"user\", entityId: \"u2\", feature: \"f\") { items { value cursor } } }"}`},
		{"variables and operation name", "application/json", `{"query":"query A($id: ID!) { entity(type: \"user\", entityId: $id) { id list(feature: \"f\") { items { value } } } } query B { listFeatures { key } }","operationName":"A","variables":{"id":"u1"}}`},
		{"graphql-response+json", "application/graphql-response+json", `{"query":"{ listFeatures { key ttlSeconds } }"}`},
		{"resolver error", "", `{"query":"{ listItems(entityType: \"user\", entityId: \"u1\", feature: \"nope\") { hasMore } }"}`},
		{"partial error", "", `{"query":"{ a: listFeature(entityType: \"user\", name: \"f\") { key } b: listItems(entityType: \"Bad\", entityId: \"u1\", feature: \"f\") { hasMore } }"}`},
		{"validation error", "", `{"query":"{ nope }"}`},
		{"validation error, graphql-response+json", "application/graphql-response+json", `{"query":"{ nope }"}`},
		{"parse error", "", `{"query":"{"}`},
		{"variable error", "", `{"query":"query($t: Time) { listItems(entityType: \"user\", entityId: \"u1\", feature: \"f\", minTimestamp: $t) { hasMore } }","variables":{"t":"yesterday"}}`},
		{"persisted query not found", "", `{"extensions":{"persistedQuery":{"version":1,"sha256Hash":"0000000000000000000000000000000000000000000000000000000000000000"}}}`},
		{"unknown accept", "text/html", `{"query":"{ listFeatures { key } }"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do := func(h http.Handler) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "http://localhost/graphql", strings.NewReader(tc.body))
				req.Header.Set("Content-Type", "application/json")
				if tc.accept != "" {
					req.Header.Set("Accept", tc.accept)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w
			}
			a, b := do(ours), do(theirs)
			if a.Code != b.Code || a.Header().Get("Content-Type") != b.Header().Get("Content-Type") || a.Body.String() != b.Body.String() {
				t.Fatalf("ours: %d %s %s\ngqlgen: %d %s %s", a.Code, a.Header().Get("Content-Type"), a.Body, b.Code, b.Header().Get("Content-Type"), b.Body)
			}
		})
	}
}

// gqlgen gives no response when the request's context ended first: past
// the deadline the client reads a TIMEOUT error, never a bare null; a client
// that went away gets nothing.
func TestWriteResultWithoutResponse(t *testing.T) {
	ex := executor.New(exec.NewExecutableSchema(exec.Config{Resolvers: &graph.Resolver{}}))
	ex.SetErrorPresenter(errorPresenter(slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context, error) {}, nil)) // no operation: nothing to charge

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	w := httptest.NewRecorder()
	writeResult(w, ctx, nil, "application/json", ex, nil, nil)
	if w.Code != http.StatusGatewayTimeout || !strings.Contains(w.Body.String(), `"code":"TIMEOUT"`) || !strings.Contains(w.Body.String(), "--request-timeout") {
		t.Fatalf("past the deadline: %d %s", w.Code, w.Body)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	w = httptest.NewRecorder()
	writeResult(w, ctx, nil, "application/json", ex, nil, nil)
	if w.Body.Len() != 0 {
		t.Fatalf("client gone: wrote %q", w.Body)
	}
}

// An answer UNAVAILABLE as a whole, with no data, is 503 with
// Retry-After, as a starting gateway's; one with data served besides, or
// with another error among its errors, is 200. With
// application/graphql-response+json, any data but null is 2xx.
func TestUnavailableAnswerStatus(t *testing.T) {
	unavailable := &gqlerror.Error{Message: "the list store did not answer in time; retry later", Extensions: map[string]any{"code": CodeUnavailable}}
	other := &gqlerror.Error{Message: "x", Extensions: map[string]any{"code": CodeBadUserInput}}
	for _, tc := range []struct {
		name, contentType, data string
		errs                    gqlerror.List
		want                    int
	}{
		{"data null", "application/json", "null", gqlerror.List{unavailable}, http.StatusServiceUnavailable},
		{"no data", "application/json", "", gqlerror.List{unavailable, unavailable}, http.StatusServiceUnavailable},
		{"every root field null", "application/json", `{"addListItems":null,"b":null}`, gqlerror.List{unavailable}, http.StatusServiceUnavailable},
		{"every root field null, graphql-response+json", graphQLResponseJSON, `{"addListItems":null}`, gqlerror.List{unavailable}, http.StatusOK},
		{"data null, graphql-response+json", graphQLResponseJSON, "null", gqlerror.List{unavailable}, http.StatusServiceUnavailable},
		{"data served besides", "application/json", `{"a":null,"b":{"key":"k"}}`, gqlerror.List{unavailable}, http.StatusOK},
		{"another code too", "application/json", "null", gqlerror.List{unavailable, other}, http.StatusOK},
		{"no error", "application/json", `{"a":null}`, nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			writeResult(w, context.Background(), &graphql.Response{Data: []byte(tc.data), Errors: tc.errs}, tc.contentType, nil, nil, nil)
			retry := w.Header().Get("Retry-After")
			if w.Code != tc.want || (retry == "1") != (tc.want == http.StatusServiceUnavailable) {
				t.Fatalf("status %d, Retry-After %q; want %d", w.Code, retry, tc.want)
			}
		})
	}
}

// Data that encoding/json would refuse to re-encode (nesting past 10,000)
// is written all the same, escaped as encoding/json escapes.
func TestWriteResponseNeverParsesData(t *testing.T) {
	deep := strings.Repeat("[", 20000) + `"<&> "` + strings.Repeat("]", 20000)
	var b strings.Builder
	writeResponse(&b, &graphql.Response{Data: []byte(`{"a":` + deep + `}`), Errors: gqlerror.List{{Message: "x"}}})
	want := `{"errors":[{"message":"x"}],"data":{"a":` + strings.Replace(deep, `"<&> "`, `"\u003c\u0026\u003e\u2028"`, 1) + `}}`
	if b.String() != want {
		t.Fatalf("wrote %.200q…", b.String())
	}
}
