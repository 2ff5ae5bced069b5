package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/internal/testenv"
)

// The dashboard and the alert rules that deploy/ ships, relative to e2e/.
var (
	dashboardFile = filepath.Join("..", "deploy", "grafana", "listgate.json")
	alertsFile    = filepath.Join("..", "deploy", "prometheus", "listgate-alerts.yml")
)

// dashboardVars are what the test puts in place of the dashboard's
// variables: Grafana's rate interval (four scrapes at least; a minute
// holds the whole run), the job of the test's scrape configuration, and
// every instance.
var dashboardVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"${job}", "listgate", "$job", "listgate",
	"${instance}", ".+", "$instance", ".+",
)

// The dashboard and the alerts work on a real Prometheus: promtool accepts
// the rules; a gateway on Cassandra gets a short load that touches every
// metric they read (queries, mutations, errors of several codes, an
// unknown feature, a subscription, one refused and one ended, a request refused at
// --max-in-flight, one past its deadline, CQL statements cut short by it);
// Prometheus scrapes it every second and evaluates the rules. Then every
// panel's query and every alert's expression, without its threshold, must
// return a series, and so must every selector in them: a misspelt metric
// or label, or a metric the gateway no longer exports, fails the test.
func TestDashboardAndAlertsOnPrometheus(t *testing.T) {
	prometheus := testenv.Program(t, "prometheus", "Prometheus: install Debian's prometheus package, as .ci/run does")
	promtool := testenv.Program(t, "promtool", "Prometheus's promtool: install Debian's prometheus package, as .ci/run does")
	hosts := strings.Join(cqltest.Hosts(t), ",")
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	dash := readDashboard(t)
	began := time.Now()

	const requestTimeout = 2 * time.Second
	g := startGateway(t, "LISTGATE_CQL_HOSTS="+hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_MIGRATE=true",
		"LISTGATE_REQUEST_TIMEOUT="+requestTimeout.String(),
		"LISTGATE_MAX_IN_FLIGHT=1",     // one request held open makes the next refused
		"LISTGATE_MAX_WATCHED_LISTS=1", // a second list watched is refused
		// A budget the load fits in, and two reads of 49 lists do not.
		"LISTGATE_CALLER_COST_RATE=20000", "LISTGATE_CALLER_COST_BURST=100000",
		"LISTGATE_FEATURE_REFRESH=1s")
	prom := startPrometheus(t, prometheus, rules, strings.TrimPrefix(g.base, "http://"))

	entityType := fmt.Sprintf("dash%d", time.Now().UnixNano()%1e9)
	load := dashboardLoad{t: t, g: g, entityType: entityType, timeout: requestTimeout}
	load.run()
	loaded := time.Now()
	t.Logf("load sent in %v", loaded.Sub(began).Round(time.Millisecond))

	// Two scrapes and a rule evaluation after the load.
	prom.waitFor(t, "two scrapes after the load", func() bool {
		v, ok := prom.scalar(t, `timestamp(up{job="listgate"})`)
		return ok && v > float64(loaded.Add(2*time.Second).UnixMilli())/1000
	})
	var loadedRules []promRule
	prom.waitFor(t, "a rule evaluation after the load", func() bool {
		loadedRules = prom.rules(t)
		for _, r := range loadedRules {
			if !r.LastEvaluation.After(loaded) {
				return false
			}
		}
		return len(loadedRules) > 0
	})

	t.Run("alerts", func(t *testing.T) {
		b, err := os.ReadFile(alertsFile)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(regexp.MustCompile(`(?m)^\s*- alert:`).FindAll(b, -1)); len(loadedRules) != want {
			t.Errorf("Prometheus loaded %d rules; %s has %d", len(loadedRules), alertsFile, want)
		}
		for _, r := range loadedRules {
			switch {
			case r.Type != "alerting":
				t.Errorf("%s: a %s rule; want alerting rules only", r.Name, r.Type)
			case r.Health != "ok":
				t.Errorf("%s: health %q: %s", r.Name, r.Health, r.LastError)
			case r.Duration <= 0:
				t.Errorf("%s: no for:", r.Name)
			case r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical":
				t.Errorf("%s: severity %q; want warning or critical", r.Name, r.Labels["severity"])
			case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
				t.Errorf("%s: a summary and a description (what to check) are wanted", r.Name)
			}
			parts := withoutThresholds(r.Query)
			if len(parts) == 0 {
				t.Errorf("%s: %s: no comparison with a threshold", r.Name, r.Query)
			}
			for _, p := range parts {
				prom.mustReturnSeries(t, r.Name, p)
			}
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		for _, v := range dash.Templating.List {
			if v.Type != "query" {
				continue
			}
			m := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`).FindStringSubmatch(v.queryText())
			if m == nil {
				t.Errorf("variable %s: %q; want label_values(selector, label)", v.Name, v.queryText())
				continue
			}
			prom.mustReturnSeries(t, "variable "+v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], dashboardVars.Replace(m[1])))
		}
		for _, p := range dash.panels() {
			for _, target := range p.Targets {
				prom.mustReturnSeries(t, fmt.Sprintf("panel %q, query %s", p.Title, target.RefID), dashboardVars.Replace(target.Expr))
			}
		}
	})
	t.Logf("the test took %v", time.Since(began).Round(time.Millisecond))
}

// The test's reading of PromQL finds every selector and strips thresholds.
func TestPromQLSelectorsAndThresholds(t *testing.T) {
	for _, c := range []struct {
		expr      string
		parts     []string // nil: refused, no threshold
		selectors []string // of the whole expression
	}{
		{`up{job="listgate"} == 0`, []string{`up{job="listgate"}`}, []string{`up{job="listgate"}`}},
		{`sum by (job) (rate(a_total{outcome=~"A|B"}[5m])) / sum by (job) (rate(a_total[5m])) > 0.05`,
			[]string{`sum by (job) (rate(a_total{outcome=~"A|B"}[5m])) / sum by (job) (rate(a_total[5m]))`},
			[]string{`a_total{outcome=~"A|B"}`, `a_total`}},
		{`histogram_quantile(0.99, sum(rate(x_bucket{a!="b"}[5m])) by (le)) > 1e+3`,
			[]string{`histogram_quantile(0.99, sum(rate(x_bucket{a!="b"}[5m])) by (le))`}, []string{`x_bucket{a!="b"}`}},
		{`a - (b or sum by (i) (c{j="x or y"}) * 0) > 0`, []string{`a - (b or sum by (i) (c{j="x or y"}) * 0)`}, []string{"a", "b", `c{j="x or y"}`}},
		{`rate(x[5m] offset 1h) > 2 unless on (instance) y == 1`, []string{"rate(x[5m] offset 1h)", "y"}, []string{"x", "y"}},
		{`a > 1 and b < bool 2`, []string{"a", "b"}, []string{"a", "b"}},
		{`sum(x)`, nil, []string{"x"}},
		{`x > y`, nil, []string{"x", "y"}},
	} {
		if got := withoutThresholds(c.expr); !slices.Equal(got, c.parts) {
			t.Errorf("withoutThresholds(%s) = %q; want %q", c.expr, got, c.parts)
		}
		if got := selectors(c.expr); !slices.Equal(got, c.selectors) {
			t.Errorf("selectors(%s) = %q; want %q", c.expr, got, c.selectors)
		}
	}
}

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	SchemaVersion int            `json:"schemaVersion"`
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []grafanaVariable `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *grafanaSource `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *grafanaSource `json:"datasource"`
	} `json:"targets"`
	Panels  []grafanaPanel `json:"panels"` // of a collapsed row
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
}

type grafanaSource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaVariable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": …}
	Datasource *grafanaSource  `json:"datasource"`
}

func (v grafanaVariable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var q struct{ Query string }
	json.Unmarshal(v.Query, &q)
	return q.Query
}

// panels lists every panel that shows data, rows' panels included.
func (d dashboard) panels() []grafanaPanel {
	var out []grafanaPanel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// readDashboard reads the dashboard and checks what Prometheus cannot: it
// imports anywhere (every query goes to the ${DS_PROMETHEUS} data source
// variable), its panel ids are distinct, and every panel has a query.
func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.SchemaVersion < 39 || d.UID == "" || d.Title == "" {
		t.Errorf("%s: schemaVersion %d, uid %q, title %q", dashboardFile, d.SchemaVersion, d.UID, d.Title)
	}
	source := false
	for _, v := range d.Templating.List {
		source = source || (v.Name == "DS_PROMETHEUS" && v.Type == "datasource" && v.queryText() == "prometheus")
	}
	if !source {
		t.Errorf("%s: no data source variable DS_PROMETHEUS of type prometheus", dashboardFile)
	}
	isVariable := func(s *grafanaSource) bool { return s != nil && s.Type == "prometheus" && s.UID == "${DS_PROMETHEUS}" }
	for _, v := range d.Templating.List {
		if v.Type == "query" && !isVariable(v.Datasource) {
			t.Errorf("variable %s: data source %+v; want ${DS_PROMETHEUS}", v.Name, v.Datasource)
		}
	}
	ids := map[int]bool{}
	all := d.panels()
	for _, p := range d.Panels {
		if p.Type == "row" {
			all = append(all, p)
		}
	}
	for _, p := range all {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d is missing or not unique", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: no gridPos", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if !isVariable(p.Datasource) {
			t.Errorf("panel %q: data source %+v; want ${DS_PROMETHEUS}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" || !isVariable(q.Datasource) {
				t.Errorf("panel %q: query %q (refId %q, data source %+v)", p.Title, q.Expr, q.RefID, q.Datasource)
			}
		}
	}
	return d
}

// dashboardLoad is the short load that makes the gateway export every
// series the dashboard and the alerts read.
type dashboardLoad struct {
	t          *testing.T
	g          *gateway
	entityType string
	timeout    time.Duration // the gateway's --request-timeout
}

func (l *dashboardLoad) list(id string) string {
	return fmt.Sprintf(`{entityType: %q, entityId: %q, feature: "reads"}`, l.entityType, id)
}

// want sends a request and fails the test unless its first error has code
// ("" for none).
func (l *dashboardLoad) want(code, query string) gatewaytest.Answer {
	l.t.Helper()
	r := l.g.do(query, nil)
	got := ""
	if cs := r.Codes(); len(cs) > 0 {
		got = cs[0]
	}
	if r.Err != nil || got != code {
		l.t.Fatalf("%.120s\nanswered %s; want code %q", query, r, code)
	}
	return r
}

func (l *dashboardLoad) run() {
	t, g := l.t, l.g
	l.want("", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "reads", valueType: STRING, ttlSeconds: 3600}) { key } }`, l.entityType))
	l.want("CONFLICT", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "reads", valueType: STRING, ttlSeconds: 3600}) { key } }`, l.entityType))
	old := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	l.want("", fmt.Sprintf(`mutation Add { addListItems(list: %s, items: [{value: "a"}, {value: "b"}, {value: "old", timestamp: %q}]) { added expired } }`, l.list("u1"), old))
	l.want("", fmt.Sprintf(`query Read { listItems(entityType: %q, entityId: "u1", feature: "reads", limit: 10) { items { value } } }`, l.entityType))
	l.want("", fmt.Sprintf(`query Entities { entities(type: %q, entityIds: ["u1", "u2", "u3"]) { list(feature: "reads", limit: 5) { items { value } } listCount(feature: "reads") listContains(feature: "reads", values: ["a"]) { value } } }`, l.entityType))
	l.want("", fmt.Sprintf(`mutation Remove { removeListItemsWithValues(list: %s, values: ["a"]) { removed } }`, l.list("u1")))
	l.want("NOT_FOUND", fmt.Sprintf(`{ listItems(entityType: %q, entityId: "u1", feature: "nosuch") { items { value } } }`, l.entityType))
	l.want("BAD_USER_INPUT", `{ listItems(entityType: "user" entityId: "u1", feature: "reads", limit: -1) { items { value } } }`)
	resp, err := http.Post(g.base+"/graphql", "text/plain", strings.NewReader(`{ __typename }`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	l.subscriptions()
	l.refusedAndLate()
	l.cutShort()
	l.throttled()
}

// throttled reads 49 lists of 1,000 items (complexity about 98,000) until
// the caller's budget refuses it THROTTLED: at most twice.
func (l *dashboardLoad) throttled() {
	var ids []string
	for i := range 49 {
		ids = append(ids, fmt.Sprintf("%q", fmt.Sprint("t", i)))
	}
	q := fmt.Sprintf(`query Heavy { entities(type: %q, entityIds: [%s]) { list(feature: "reads", limit: 1000) { items { value } } } }`, l.entityType, strings.Join(ids, ", "))
	for range 2 {
		r := l.g.do(q, nil)
		if slices.Contains(r.Codes(), "THROTTLED") {
			if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
				l.t.Fatalf("a THROTTLED answer: %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
			}
			return
		}
	}
	l.t.Fatal("two reads of 49 lists of 1,000 items in a row were not throttled by a budget of 100,000")
}

// subscriptions has one subscription on a list, delivers it an item, and
// has a second one, on another list, refused at --max-watched-lists 1 on a
// connection then closed (a WebSocket is counted as a request when it
// closes); then it deletes the first one's feature, which ends it.
func (l *dashboardLoad) subscriptions() {
	t := l.t
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l.want("", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "live", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, l.entityType))
	watching := l.subscribe(ctx, "live", "u-sub")
	t.Cleanup(func() { watching.CloseNow() })
	waitMetric(t, l.g.base, "listgate_subscription_lists_watched", 1, 10*time.Second)
	l.want("", fmt.Sprintf(`mutation { addListItems(list: {entityType: %q, entityId: "u-sub", feature: "live"}, items: [{value: "live"}]) { added } }`, l.entityType))
	if m := readUntil(ctx, t, watching, "next"); !strings.Contains(m, `"live"`) {
		t.Fatalf("the subscription got %s; want the item live", m)
	}

	refused := l.subscribe(ctx, "live", "u-other")
	if m := readUntil(ctx, t, refused, "next", "error"); !strings.Contains(m, `"UNAVAILABLE"`) {
		t.Fatalf("a second list watched at --max-watched-lists 1: %s; want UNAVAILABLE", m)
	}
	refused.Close(websocket.StatusNormalClosure, "")

	l.want("", fmt.Sprintf(`mutation { deleteListFeature(entityType: %q, name: "live") }`, l.entityType))
	if m := readUntil(ctx, t, watching, "next", "error"); !strings.Contains(m, `"NOT_FOUND"`) {
		t.Fatalf("the subscription to a deleted feature: %s; want NOT_FOUND", m)
	}
}

// subscribe opens a graphql-transport-ws connection and subscribes to the
// list of entity id of feature.
func (l *dashboardLoad) subscribe(ctx context.Context, feature, id string) *websocket.Conn {
	t := l.t
	t.Helper()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(l.g.base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	write := func(m any) {
		b, _ := json.Marshal(m)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]any{"type": "connection_init", "payload": map[string]any{}})
	readUntil(ctx, t, conn, "connection_ack")
	write(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query": listItemsAdded, "variables": map[string]any{"t": l.entityType, "id": id, "f": feature}}})
	return conn
}

// readUntil reads messages until one of the types, and returns it; pings
// are answered.
func readUntil(ctx context.Context, t *testing.T, conn *websocket.Conn, types ...string) string {
	t.Helper()
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for a %v message: %v", types, err)
		}
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		switch {
		case slices.Contains(types, m.Type):
			return string(b)
		case m.Type == "ping":
			conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
		case m.Type != "pong":
			t.Fatalf("waiting for a %v message: %s", types, b)
		}
	}
}

// heldRequest sends a request's headers and keeps its body: the gateway
// starts its deadline, then waits for the body, which send writes.
type heldRequest struct {
	conn net.Conn
	body []byte
}

func (l *dashboardLoad) hold(query string) *heldRequest {
	l.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.g.base, "http://"))
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", conn.RemoteAddr(), len(body))
	return &heldRequest{conn: conn, body: body}
}

// send writes the body and returns the answer's status line and body.
func (h *heldRequest) send(t *testing.T, within time.Duration) string {
	t.Helper()
	h.conn.SetDeadline(time.Now().Add(within))
	// The gateway may have answered and closed already: its answer is read
	// all the same.
	h.conn.Write(h.body)
	b, err := io.ReadAll(h.conn)
	if err != nil {
		t.Fatalf("the held request's answer: %v (%q)", err, b)
	}
	status, _, _ := strings.Cut(string(b), "\r\n")
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return status + " " + body
}

// refusedAndLate has a request hold the one slot of --max-in-flight 1
// while another comes (refused, UNAVAILABLE): a read of 1,000 values of
// 30 KB whose client does not read the answer, which stays in flight
// while the gateway writes it. Then a request whose body comes past its
// deadline is answered 408, BAD_REQUEST.
func (l *dashboardLoad) refusedAndLate() {
	t := l.t
	value := strings.Repeat("x", 30_000)
	for add := range 34 {
		var items strings.Builder
		for i := range 30 {
			if i > 0 {
				items.WriteString(", ")
			}
			fmt.Fprintf(&items, `{value: "%s%d"}`, value, 30*add+i)
		}
		l.want("", fmt.Sprintf(`mutation { addListItems(list: %s, items: [%s]) { added } }`, l.list("u-big"), items.String()))
	}
	body, _ := json.Marshal(map[string]any{"query": fmt.Sprintf(`query Big { listItems(entityType: %q, entityId: "u-big", feature: "reads", limit: 1000) { items { value } } }`, l.entityType)})
	conn, err := net.Dial("tcp", strings.TrimPrefix(l.g.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", conn.RemoteAddr(), len(body), body)
	for try := 1; ; try++ {
		time.Sleep(100 * time.Millisecond) // for the gateway to read it and write what the sockets hold
		r := l.g.do(`{ __typename }`, nil)
		if codes := r.Codes(); len(codes) > 0 && codes[0] == "UNAVAILABLE" {
			break
		}
		if try == 50 {
			t.Fatalf("a request while another held --max-in-flight 1 answered %s; want UNAVAILABLE", r)
		}
	}
	conn.Close()
	// The held request's body never comes: it is answered at its deadline.
	h := l.hold(fmt.Sprintf(`query Late { listItems(entityType: %q, entityId: "u1", feature: "reads") { items { value } } }`, l.entityType))
	h.conn.SetDeadline(time.Now().Add(l.timeout + 10*time.Second))
	b, err := io.ReadAll(h.conn)
	if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 408 ") || !strings.Contains(string(b), `"BAD_REQUEST"`) {
		t.Fatalf("a request whose body did not come by its deadline answered %q, %v; want 408, BAD_REQUEST", b, err)
	}
}

// cutShort makes CQL statements fail for the request's deadline: a
// mutation of 200 adds, which run one after another, gets its body 100 ms
// before its deadline, so that the deadline passes while its statements
// run. The deadline could fall between two statements (then none fails):
// it is tried up to three times.
func (l *dashboardLoad) cutShort() {
	t := l.t
	var adds strings.Builder
	for i := range 200 {
		fmt.Fprintf(&adds, " a%d: addListItems(list: %s, items: [{value: \"v%d\"}]) { added }", i, l.list("u-cut"), i)
	}
	for try := 1; ; try++ {
		h := l.hold("mutation CutShort {" + adds.String() + " }")
		time.Sleep(l.timeout - 100*time.Millisecond)
		got := h.send(t, 20*time.Second)
		// What the alert counts: statements canceled (a subscription's
		// reads as it ended, say) are not failures.
		all := metric(t, l.g.base, "listgate_cql_statement_errors_total")
		if all-metric(t, l.g.base, "listgate_cql_statement_errors_total", `error_type="canceled"`) > 0 {
			return
		}
		if try == 3 {
			t.Fatalf("no CQL statement failed in 3 tries of a mutation cut short by its deadline; the last answered %.300s", got)
		}
	}
}

// promServer is a Prometheus the test started.
type promServer struct {
	base string
}

// startPrometheus runs Prometheus on a free loopback port, with the rules
// and a scrape of target every second, and stops it when the test ends.
func startPrometheus(t *testing.T, bin, rules, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	err := os.WriteFile(config, fmt.Appendf(nil, `global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: listgate
    static_configs: [{targets: [%q]}]
`, rules, target), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("Prometheus's log:\n%s", log)
		}
	})
	p := &promServer{base: "http://" + addr}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("Prometheus exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus was not ready within 30 s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get calls Prometheus's HTTP API and decodes its data.
func (p *promServer) get(t *testing.T, path string, data any) {
	t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Status != "success" {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(out.Data, data); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, out.Data)
	}
}

// promSeries is one series of an instant query's answer.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p *promServer) query(t *testing.T, q string) []promSeries {
	t.Helper()
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSeries `json:"result"`
	}
	p.get(t, "/api/v1/query?query="+url.QueryEscape(q), &data)
	if data.ResultType != "vector" {
		t.Fatalf("%s: a %s; want an instant vector", q, data.ResultType)
	}
	return data.Result
}

// scalar is the value of a query of one series.
func (p *promServer) scalar(t *testing.T, q string) (float64, bool) {
	t.Helper()
	r := p.query(t, q)
	if len(r) != 1 {
		return 0, false
	}
	var v float64
	s, _ := r[0].Value[1].(string)
	_, err := fmt.Sscan(s, &v)
	return v, err == nil
}

func (p *promServer) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus: no %s within 20 s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promRule is an alerting rule as Prometheus loaded it.
type promRule struct {
	Name           string            `json:"name"`
	Query          string            `json:"query"`
	Duration       float64           `json:"duration"`
	Labels         map[string]string `json:"labels"`
	Annotations    map[string]string `json:"annotations"`
	Health         string            `json:"health"`
	LastError      string            `json:"lastError"`
	LastEvaluation time.Time         `json:"lastEvaluation"`
	Type           string            `json:"type"`
}

func (p *promServer) rules(t *testing.T) []promRule {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	p.get(t, "/api/v1/rules", &data)
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// matcherLabel finds the label names of a selector's matchers, once its
// strings are emptied.
var (
	matcherLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// mustReturnSeries fails the test unless expr, and every selector in it,
// returns at least one series, and every label a selector matches on is a
// label of its metric: `error_typ!="canceled"` matches every series.
func (p *promServer) mustReturnSeries(t *testing.T, what, expr string) {
	t.Helper()
	if r := p.query(t, expr); len(r) == 0 {
		t.Errorf("%s: %s returns no series", what, expr)
		return
	}
	for _, sel := range selectors(expr) {
		if r := p.query(t, sel); len(r) == 0 {
			t.Errorf("%s: its selector %s matches no series", what, sel)
			continue
		}
		name, matchers, ok := strings.Cut(sel, "{")
		if !ok {
			continue
		}
		labels := map[string]bool{}
		for _, s := range p.query(t, name) {
			for l := range s.Metric {
				labels[l] = true
			}
		}
		for _, m := range matcherLabel.FindAllStringSubmatch(promString.ReplaceAllString(matchers, `""`), -1) {
			if !labels[m[1]] {
				t.Errorf("%s: its selector %s matches on %s, which no series of %s has", what, sel, m[1], name)
			}
		}
	}
}

// PromQL words that are not metric names: keywords, and aggregations,
// which a by or without clause may separate from their parenthesis.
var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
}

// promText walks PromQL text: strings are skipped whole, brackets nest.
type promText string

// skipString returns the index past the quoted string at i.
func (e promText) skipString(i int) int {
	q := e[i]
	for i++; i < len(e) && e[i] != q; i++ {
		if e[i] == '\\' && q != '`' {
			i++
		}
	}
	return i + 1
}

// closing returns the index past the bracket that closes the one at i.
func (e promText) closing(i int) int {
	depth := 0
	for i < len(e) {
		switch e[i] {
		case '"', '\'', '`':
			i = e.skipString(i)
			continue
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(e)
}

func isWordStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isWordByte(c byte) bool { return isWordStart(c) || c >= '0' && c <= '9' }

// selectors returns the vector selectors of a PromQL expression (a metric
// name and its label matchers), without their range, so that each can be
// queried alone: in `a or vector(0)` a misspelt a would otherwise pass
// unseen. It reads the PromQL the dashboard and the alerts use; it is not
// a parser.
func selectors(expr string) []string {
	e := promText(expr)
	var out []string
	for i := 0; i < len(e); {
		c := e[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = e.skipString(i)
		case c == '[' || c == '{':
			i = e.closing(i) // a range; a selector without a name (none here)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(e) && (isWordByte(e[i]) || e[i] == '.' || e[i] == '+' && (e[i-1] == 'e' || e[i-1] == 'E')) {
				i++ // a number or a duration
			}
		case isWordStart(c):
			start := i
			for i < len(e) && isWordByte(e[i]) {
				i++
			}
			word := string(e[start:i])
			next := i
			for next < len(e) && strings.ContainsRune(" \t\n", rune(e[next])) {
				next++
			}
			opens := next < len(e) && e[next] == '('
			switch {
			case promKeywords[word]:
				if opens && (word == "by" || word == "without" || word == "on" || word == "ignoring" || word == "group_left" || word == "group_right") {
					i = e.closing(next) // a list of labels
				}
			case opens:
				i = next // a function or an aggregation
			case next < len(e) && e[next] == '{':
				i = e.closing(next)
				out = append(out, word+string(e[next:i]))
			default:
				out = append(out, word)
			}
		default:
			i++
		}
	}
	return out
}

// threshold is a comparison with a number that ends an expression.
var threshold = regexp.MustCompile(`^(?s)(.+?)\s*(?:>=|<=|==|!=|>|<)\s*(?:bool\s+)?[-+]?[0-9.]+(?:e[-+]?[0-9]+)?$`)

// withoutThresholds splits an alert's expression at its top-level and, or
// and unless, and returns each part without its comparison with a number:
// what an alert compares with its threshold returns a series whether or
// not the alert fires. None when a part has no such comparison.
func withoutThresholds(expr string) []string {
	e := promText(expr)
	var parts []string
	start := 0
	for i := 0; i < len(e); {
		switch c := e[i]; {
		case c == '"' || c == '\'' || c == '`':
			i = e.skipString(i)
			continue
		case c == '(' || c == '{' || c == '[':
			i = e.closing(i)
			continue
		case c == ' ':
			for _, op := range []string{" and ", " or ", " unless "} {
				if strings.HasPrefix(string(e[i:]), op) {
					parts = append(parts, string(e[start:i]))
					start = i + len(op) - 1
				}
			}
		}
		i++
	}
	parts = append(parts, string(e[start:]))
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		for _, matching := range []string{"on", "ignoring"} { // of the and, or, unless before
			if rest, ok := strings.CutPrefix(p, matching); ok && strings.HasPrefix(strings.TrimLeft(rest, " "), "(") {
				rest = strings.TrimLeft(rest, " ")
				p = strings.TrimSpace(rest[promText(rest).closing(0):])
			}
		}
		m := threshold.FindStringSubmatch(p)
		if m == nil {
			return nil
		}
		out = append(out, m[1])
	}
	return out
}
