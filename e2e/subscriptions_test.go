package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
)

// nodeClientDir is the Node project of the WebSocket client
// (e2e/node/subscriber.mjs); scripts/test installs its dependencies with
// `npm ci`.
const nodeClientDir = "node"

const listItemsAdded = `subscription($t: String!, $id: ID!, $f: String!, $since: Time) {
  listItemsAdded(entityType: $t, entityId: $id, feature: $f, since: $since) { value timestamp }
}`

// jsClient is the graphql-ws client (e2e/node/subscriber.mjs) in its own
// Node process, which may hold several connections.
type jsClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan jsEvent
	stderr *lockedBuffer
	items  map[string][]jsItem // by subscription, as received
	seen   map[string]bool     // "conn event" of the connections' events
}

// jsEvent is one line the client printed.
type jsEvent struct {
	Ev      string              `json:"ev"`
	Conn    string              `json:"conn"`
	ID      string              `json:"id"`
	At      float64             `json:"at"` // ms since the Unix epoch
	Data    json.RawMessage     `json:"data"`
	Errors  []gatewaytest.Error `json:"errors"`
	Code    int                 `json:"code"`
	Reason  string              `json:"reason"`
	Message string              `json:"message"`
}

// String shows an event in a log line or a failure message.
func (e jsEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", e.Conn, e.Ev)
	if e.ID != "" {
		fmt.Fprintf(&b, " of %s", e.ID)
	}
	if e.Code != 0 {
		fmt.Fprintf(&b, ", code %d %q", e.Code, e.Reason)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if len(e.Data) > 0 {
		fmt.Fprintf(&b, ", data %s", e.Data)
	}
	for _, err := range e.Errors {
		fmt.Fprintf(&b, ", error %s %q", err.Extensions.Code, err.Message)
	}
	return b.String()
}

// jsItem is an item a subscription received.
type jsItem struct {
	value     string
	timestamp string
	ts        time.Time
	at        time.Time // when the client received it
}

// startJSClient starts the Node client, or ends the test through
// testenv.Missing when Node or the client's dependencies are missing.
func startJSClient(t *testing.T) *jsClient {
	t.Helper()
	node := nodeForGraphQLWS(t)
	c := &jsClient{t: t, events: make(chan jsEvent, 10_000), stderr: &lockedBuffer{}, items: map[string][]jsItem{}, seen: map[string]bool{}}
	c.cmd = exec.Command(node, "subscriber.mjs")
	c.cmd.Dir = nodeClientDir
	c.cmd.Stderr = c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20) // a heavy query's result is one line
		for sc.Scan() {
			var e jsEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				e = jsEvent{Ev: "unparsed", Message: sc.Text()}
			}
			c.events <- e
		}
	}()
	go func() { c.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		c.stdin.Close() // the client disposes its connections and exits
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Errorf("the Node client still ran 5 s after its input closed: killing it")
			c.cmd.Process.Kill()
			<-exited
		}
		if s := c.stderr.String(); s != "" {
			t.Logf("Node client's stderr:\n%s", s)
		}
	})
	return c
}

// send writes one command.
func (c *jsClient) send(cmd map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("to the Node client: %v\n%s", err, c.stderr)
	}
}

// next returns the next event, failing the test when none comes in time.
func (c *jsClient) next(within time.Duration) jsEvent {
	c.t.Helper()
	select {
	case e, ok := <-c.events:
		if !ok {
			c.t.Fatalf("the Node client exited\n%s", c.stderr)
		}
		if e.Ev == "failed" || e.Ev == "unparsed" {
			c.t.Fatalf("the Node client: %v", e)
		}
		return e
	case <-time.After(within):
		c.t.Fatalf("no event from the Node client within %v", within)
	}
	panic("unreachable")
}

// nextOf returns the next event of connection conn, passing over the
// last notices of connections before it (closed, a socket error, the
// completion of a subscription disposed of).
func (c *jsClient) nextOf(conn string, within time.Duration) jsEvent {
	c.t.Helper()
	for {
		e := c.next(within)
		switch {
		case e.Conn == conn:
			return e
		case e.Ev != "closed" && e.Ev != "socketError" && e.Ev != "complete":
			c.t.Fatalf("an event of %s while waiting for one of %s: %v", e.Conn, conn, e)
		}
	}
}

// record keeps an event: an item of a subscription, or a connection's
// event; an error of a subscription fails the test.
func (c *jsClient) record(e jsEvent) {
	c.t.Helper()
	switch e.Ev {
	case "next":
		c.items[e.ID] = append(c.items[e.ID], e.item(c.t))
	case "error":
		c.t.Fatalf("subscription %s on %s failed: %v", e.ID, e.Conn, e)
	default:
		c.seen[e.Conn+" "+e.Ev] = true
	}
}

// await reads events until subscription sub has received every value.
func (c *jsClient) await(sub string, values ...string) {
	c.t.Helper()
	for {
		have := map[string]bool{}
		for _, it := range c.items[sub] {
			have[it.value] = true
		}
		if !slices.ContainsFunc(values, func(v string) bool { return !have[v] }) {
			return
		}
		c.record(c.next(10 * time.Second))
	}
}

// awaitEvent reads events until connection conn has had event ev.
func (c *jsClient) awaitEvent(conn, ev string) {
	c.t.Helper()
	for !c.seen[conn+" "+ev] {
		c.record(c.next(10 * time.Second))
	}
}

// quiet checks that no item comes for d.
func (c *jsClient) quiet(d time.Duration) {
	c.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-c.events:
			if e.Ev == "next" || e.Ev == "error" {
				c.t.Errorf("after every item arrived: %v", e)
			}
		case <-deadline:
			return
		}
	}
}

// checkOnceOldestFirst checks that subscription sub received each item
// once, oldest first. Items of had (an earlier subscription's) may come
// again only when stamped since (the since it subscribed with); it
// returns how many did.
func (c *jsClient) checkOnceOldestFirst(sub, since string, had []jsItem) (again int) {
	c.t.Helper()
	old := map[string]bool{}
	for _, it := range had {
		old[it.value] = true
	}
	var sinceTime time.Time
	if since != "" {
		var err error
		if sinceTime, err = time.Parse(time.RFC3339Nano, since); err != nil {
			c.t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	items := c.items[sub]
	for i, it := range items {
		if seen[it.value] {
			c.t.Errorf("%s received %s twice", sub, it.value)
		}
		seen[it.value] = true
		if old[it.value] {
			again++
			if it.timestamp != since {
				c.t.Errorf("%s received %s (%s) again, which the subscription before it had, and it is not at since (%s)", sub, it.value, it.timestamp, since)
			}
		}
		if since != "" && it.ts.Before(sinceTime) {
			c.t.Errorf("%s received %s (%s), older than since (%s)", sub, it.value, it.timestamp, since)
		}
		if i > 0 && it.ts.Before(items[i-1].ts) {
			c.t.Errorf("%s received %s (%s) after %s (%s): not oldest first", sub, it.value, it.timestamp, items[i-1].value, items[i-1].timestamp)
		}
	}
	return again
}

// connect opens a client connection to base's /graphql; the WebSocket
// opens with the first subscription (graphql-ws is lazy).
func (c *jsClient) connect(conn, base, token, origin string) {
	c.send(map[string]any{"op": "connect", "conn": conn, "url": "ws" + strings.TrimPrefix(base, "http") + "/graphql", "token": token, "origin": origin})
}

func (c *jsClient) subscribe(conn, id string, vars map[string]any) {
	c.send(map[string]any{"op": "subscribe", "conn": conn, "id": id, "query": listItemsAdded, "variables": vars})
}

// item reads the item of a next event.
func (e jsEvent) item(t *testing.T) jsItem {
	t.Helper()
	var d struct {
		ListItemsAdded struct {
			Value     string `json:"value"`
			Timestamp string `json:"timestamp"`
		} `json:"listItemsAdded"`
	}
	if e.Ev != "next" || len(e.Errors) > 0 || json.Unmarshal(e.Data, &d) != nil || d.ListItemsAdded.Timestamp == "" {
		t.Fatalf("want an item, got %v (data %s)", e, e.Data)
	}
	ts, err := time.Parse(time.RFC3339Nano, d.ListItemsAdded.Timestamp)
	if err != nil {
		t.Fatal(err)
	}
	ms := math.Floor(e.At)
	return jsItem{value: d.ListItemsAdded.Value, timestamp: d.ListItemsAdded.Timestamp, ts: ts,
		at: time.UnixMilli(int64(ms)).Add(time.Duration((e.At - ms) * 1e6))}
}

// metric sums the series of a metric on a gateway's /metrics whose
// labels include every one of labels (`name="value"`); a metric not yet
// recorded is 0.
func metric(t *testing.T, base, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
lines:
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		series, value := rest[:strings.LastIndexByte(rest, ' ')], rest[strings.LastIndexByte(rest, ' ')+1:]
		for _, l := range labels {
			if !strings.Contains(series, l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// waitMetric waits until a gateway's metric is want.
func waitMetric(t *testing.T, base, name string, want float64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for got := metric(t, base, name); got != want; got = metric(t, base, name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v after %v, want %v", name, got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// added is an add the test made and when.
type added struct {
	sent, acked time.Time
}

// addItems adds items (value, and timestamp or "" for now) to a list in
// one request, with token when not "".
func addItems(t *testing.T, base, token, entityType, entityID, feature string, items ...[2]string) added {
	t.Helper()
	var in []map[string]any
	for _, it := range items {
		m := map[string]any{"value": it[0]}
		if it[1] != "" {
			m["timestamp"] = it[1]
		}
		in = append(in, m)
	}
	a := added{sent: time.Now()}
	out := requestAs(t, base, token, `mutation($list: ListRefInput!, $items: [ListItemInput!]!) { addListItems(list: $list, items: $items) { added } }`,
		map[string]any{"list": map[string]any{"entityType": entityType, "entityId": entityID, "feature": feature}, "items": in})
	a.acked = time.Now()
	if got, want := string(out), fmt.Sprintf(`{"addListItems":{"added":%d}}`, len(items)); got != want {
		t.Fatalf("add: %s, want %s", got, want)
	}
	return a
}

// requestAs posts a GraphQL request with a bearer token ("" for none) and
// returns its data, failing the test on any error.
func requestAs(t *testing.T, base, token, query string, vars map[string]any) json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Data   json.RawMessage
		Errors []any
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK || len(out.Errors) > 0 {
		t.Fatalf("%.80s: status %d: %s", query, resp.StatusCode, b)
	}
	return out.Data
}

// latencies shows durations as min, median and max.
func latencies(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	s := slices.Sorted(slices.Values(d))
	return fmt.Sprintf("min %v, median %v, max %v (%d items)", s[0].Round(time.Millisecond), s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

// String shows an item in a failure message.
func (it jsItem) String() string { return it.value + "@" + it.timestamp }

// A real graphql-ws client subscribed through gateway A gets every item
// added through gateway B once, oldest first;
// items sharing one timestamp all come; after a reconnect with since = the
// last timestamp received it misses nothing, whether A stopped watching
// the list meanwhile or another subscription kept it watched.
func TestGraphQLWSClientAcrossGateways(t *testing.T) {
	js := startJSClient(t)
	hosts := strings.Join(cqltest.Hosts(t), ",")
	const poll = 200 * time.Millisecond
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_CHANGE_FEED_POLL=" + poll.String()}
	a := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...).base
	b := startGateway(t, env...).base
	entityType := fmt.Sprintf("subs%d", time.Now().UnixNano()%1e9)
	requestAs(t, b, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, entityType), nil)
	adds := map[string]added{}
	add := func(items ...[2]string) {
		t.Helper()
		a := addItems(t, b, "", entityType, "u1", "f", items...)
		for _, it := range items {
			adds[it[0]] = a
		}
	}
	addEach := func(prefix string, n int, gap func(i int) time.Duration) (values []string) {
		t.Helper()
		for i := range n {
			v := fmt.Sprint(prefix, i)
			add([2]string{v, ""})
			values = append(values, v)
			time.Sleep(gap(i))
		}
		return values
	}
	none := func(int) time.Duration { return 0 }
	// The latency of an item is from its add's acknowledgement (when it is
	// surely in the list) to its receipt; from the add's request is logged
	// too.
	var fromAck, fromSend []time.Duration
	recordLatency := func(sub string, values []string) {
		t.Helper()
		for _, it := range js.items[sub] {
			if !slices.Contains(values, it.value) {
				continue
			}
			a := adds[it.value]
			fromAck, fromSend = append(fromAck, it.at.Sub(a.acked)), append(fromSend, it.at.Sub(a.sent))
		}
	}
	subscribe := func(conn, sub, since string) {
		t.Helper()
		vars := map[string]any{"t": entityType, "id": "u1", "f": "f"}
		if since != "" {
			vars["since"] = since
		}
		js.connect(conn, a, "", "")
		js.subscribe(conn, sub, vars)
		js.awaitEvent(conn, "connected")
	}
	disconnect := func(conn string) {
		t.Helper()
		js.send(map[string]any{"op": "dispose", "conn": conn})
		js.awaitEvent(conn, "disposed")
	}

	subscribe("c1", "s1", "")
	waitMetric(t, a, "listgate_subscriptions_active", 1, 10*time.Second)
	// Ten items, one add each, some within one poll interval of another.
	one := addEach("one-", 10, func(i int) time.Duration { return time.Duration(i%4) * 50 * time.Millisecond })
	js.await("s1", one...)
	recordLatency("s1", one)
	// Five items at one timestamp in one add, then a sixth at the same
	// timestamp in an add of its own after the five arrived.
	same := time.Now().Truncate(time.Microsecond).UTC().Format(time.RFC3339Nano)
	var batch [][2]string
	for i := range 5 {
		batch = append(batch, [2]string{fmt.Sprint("same-", i), same})
	}
	add(batch...)
	js.await("s1", "same-0", "same-1", "same-2", "same-3", "same-4")
	add([2]string{"same-5", same})
	js.await("s1", "same-5")
	recordLatency("s1", []string{"same-0", "same-1", "same-2", "same-3", "same-4", "same-5"})
	js.checkOnceOldestFirst("s1", "", nil)
	for i, it := range js.items["s1"][:10] {
		if it.value != one[i] {
			t.Errorf("s1's item %d is %s, want %s: not in the order added", i, it.value, one[i])
		}
	}

	// resume disconnects conn, adds items while it is away (one at exactly
	// the timestamp of the last item it received, four at now), subscribes
	// again with since = that timestamp, and adds more.
	resume := func(conn, sub, newConn, newSub, prefix string, active float64) {
		t.Helper()
		had := js.items[sub]
		since := had[len(had)-1].timestamp
		disconnect(conn)
		waitMetric(t, a, "listgate_subscriptions_active", active-1, 10*time.Second)
		add([2]string{prefix + "at-since", since})
		away := append([]string{prefix + "at-since"}, addEach(prefix+"away-", 4, none)...)
		subscribe(newConn, newSub, since)
		waitMetric(t, a, "listgate_subscriptions_active", active, 10*time.Second)
		js.await(newSub, away...)
		back := addEach(prefix+"back-", 3, func(i int) time.Duration { return time.Duration(i+1) * 70 * time.Millisecond })
		js.await(newSub, back...)
		recordLatency(newSub, back)
		again := js.checkOnceOldestFirst(newSub, since, had)
		if got, want := len(js.items[newSub])-again, len(away)+len(back); got != want {
			t.Errorf("%s received %d new items, want %d: %v", newSub, got, want, js.items[newSub])
		}
		t.Logf("%s: after a reconnect with since = %s, %d items at since came again (allowed), %d new", newSub, since, again, len(js.items[newSub])-again)
	}
	// Alone: A stops watching the list while the client is away.
	resume("c1", "s1", "c2", "s2", "r1-", 1)
	if w := metric(t, a, "listgate_subscription_lists_watched"); w != 1 {
		t.Errorf("A watches %v lists, want 1", w)
	}
	// With another subscription to the list on A all along.
	subscribe("c3", "s3", "")
	waitMetric(t, a, "listgate_subscriptions_active", 2, 10*time.Second)
	resume("c2", "s2", "c4", "s4", "r2-", 2)
	js.await("s3", "r2-at-since", "r2-away-0", "r2-away-1", "r2-away-2", "r2-away-3", "r2-back-0", "r2-back-1", "r2-back-2")
	js.checkOnceOldestFirst("s3", "", nil)
	if got, want := len(js.items["s3"]), 8; got != want {
		t.Errorf("s3, subscribed all along, received %d items, want %d: %v", got, want, js.items["s3"])
	}
	// Anything more (a repeat) would come within a poll or two.
	js.quiet(3 * poll)
	t.Logf("latency from an add's acknowledgement through B to receipt through A: %s", latencies(fromAck))
	t.Logf("latency from an add's request through B to receipt through A: %s", latencies(fromSend))
}

// With API keys: the graphql-ws client without a token, or with one that
// is not a key, is closed with 4403 at connection_init; with a key lacking
// lists:read its subscribe fails with FORBIDDEN; from an Origin not in
// --cors-origins its WebSocket is refused at the upgrade with HTTP 403.
// A reader's subscription, with no Origin or a listed one, gets items.
func TestGraphQLWSClientRefusals(t *testing.T) {
	js := startJSClient(t)
	keys := map[string]string{"reader": "reader-key-ws", "writer": "writer-key-ws"}
	hash := func(k string) string { h := sha256.Sum256([]byte(k)); return hex.EncodeToString(h[:]) }
	g := startGateway(t, "LISTGATE_CORS_ORIGINS=https://app.example.com",
		fmt.Sprintf("LISTGATE_API_KEYS=reader %s lists:read;writer %s lists:write,features:admin", hash(keys["reader"]), hash(keys["writer"])))
	requestAs(t, g.base, keys["writer"], `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`, nil)
	vars := map[string]any{"t": "user", "id": "u1", "f": "f"}

	// events reads the events of one connection until its subscription
	// ends (error or complete).
	events := func(conn string) []jsEvent {
		t.Helper()
		var got []jsEvent
		for {
			e := js.nextOf(conn, 10*time.Second)
			got = append(got, e)
			if e.Ev == "error" || e.Ev == "complete" {
				return got
			}
		}
	}
	for _, c := range []struct{ conn, token string }{{"none", ""}, {"notakey", "no-such-key"}} {
		js.connect(c.conn, g.base, c.token, "")
		js.subscribe(c.conn, "s", vars)
		got := events(c.conn)
		if e := got[len(got)-1]; e.Code != 4403 || slices.ContainsFunc(got, func(e jsEvent) bool { return e.Ev == "next" }) {
			t.Errorf("token %q: want the connection closed with 4403, got %v", c.token, got)
		}
		t.Logf("token %q: %v", c.token, got)
	}

	js.connect("writer", g.base, keys["writer"], "")
	js.subscribe("writer", "s", vars)
	got := events("writer")
	// graphql-ws hands the refusal to the sink's error either as an error
	// message or as a result with errors (the gateway sends the latter,
	// then complete); either way no item, and the code is FORBIDDEN.
	forbidden := slices.ContainsFunc(got, func(e jsEvent) bool {
		return len(e.Errors) == 1 && e.Errors[0].Extensions.Code == "FORBIDDEN" && (e.Ev == "error" || string(e.Data) == "null")
	})
	if !forbidden || got[0].Ev != "connected" || slices.ContainsFunc(got, func(e jsEvent) bool { return e.Ev == "next" && string(e.Data) != "null" }) {
		t.Errorf("a key without lists:read: want connected, then the subscribe refused with FORBIDDEN, got %v", got)
	}
	t.Logf("a key without lists:read: %v", got)

	js.connect("evil", g.base, keys["reader"], "https://evil.example.com")
	js.subscribe("evil", "s", vars)
	got = events("evil")
	if !slices.ContainsFunc(got, func(e jsEvent) bool {
		return e.Ev == "socketError" && strings.Contains(e.Message, "Unexpected server response: 403")
	}) || slices.ContainsFunc(got, func(e jsEvent) bool { return e.Ev == "connected" }) {
		t.Errorf("an Origin not in --cors-origins: want the upgrade refused with 403, got %v", got)
	}
	t.Logf("an Origin not in --cors-origins: %v", got)

	for _, origin := range []string{"", "https://app.example.com"} {
		conn := "reader" + origin
		js.connect(conn, g.base, keys["reader"], origin)
		js.subscribe(conn, "s", vars)
		if e := js.nextOf(conn, 10*time.Second); e.Ev != "connected" {
			t.Fatalf("a reader from origin %q: %v", origin, e)
		}
		waitMetric(t, g.base, "listgate_subscriptions_active", 1, 10*time.Second)
		v := "for-" + conn
		addItems(t, g.base, keys["writer"], "user", "u1", "f", [2]string{v, ""})
		if it := js.nextOf(conn, 10*time.Second).item(t); it.value != v {
			t.Errorf("a reader from origin %q received %s, want %s", origin, it.value, v)
		}
		js.send(map[string]any{"op": "dispose", "conn": conn})
		for e := js.nextOf(conn, 10*time.Second); e.Ev != "disposed"; e = js.nextOf(conn, 10*time.Second) {
		}
		waitMetric(t, g.base, "listgate_subscriptions_active", 0, 10*time.Second)
	}
}
