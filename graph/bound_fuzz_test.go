package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/graph/exec"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
)

// An argument slot is where a fuzzed value goes: an argument of a field of
// Query, Mutation, Subscription or Entity, or a field of an input object
// within it (path, from the argument down).
type argumentSlot struct {
	parent string
	field  *ast.FieldDefinition
	arg    *ast.ArgumentDefinition
	path   []string
}

func (s argumentSlot) String() string {
	return fmt.Sprintf("%s.%s(%s)", s.parent, s.field.Name, strings.Join(append([]string{s.arg.Name}, s.path...), "."))
}

// argumentSlots are every argument of the schema, and every field of the
// input objects they take.
func argumentSlots(schema *ast.Schema) []argumentSlot {
	var slots []argumentSlot
	var inputs func(s argumentSlot, t *ast.Type)
	inputs = func(s argumentSlot, t *ast.Type) {
		for t.Elem != nil {
			t = t.Elem
		}
		def := schema.Types[t.NamedType]
		if def.Kind != ast.InputObject {
			return
		}
		for _, f := range def.Fields {
			in := s
			in.path = append(slices.Clip(s.path), f.Name)
			slots = append(slots, in)
			inputs(in, f.Type)
		}
	}
	for _, parent := range []string{"Query", "Mutation", "Subscription", "Entity"} {
		for _, f := range schema.Types[parent].Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			for _, a := range f.Arguments {
				s := argumentSlot{parent: parent, field: f, arg: a}
				slots = append(slots, s)
				inputs(s, a.Type)
			}
		}
	}
	return slots
}

// validValue is a value of type t that the gateway takes, for an argument
// or input field of that name: the entity type "user", its entity "u1",
// the feature "f", and so on; an input object's required fields alone.
func validValue(schema *ast.Schema, t *ast.Type, name string) any {
	if t.Elem != nil {
		return []any{validValue(schema, t.Elem, name)}
	}
	def := schema.Types[t.NamedType]
	switch def.Kind {
	case ast.Enum:
		return def.EnumValues[0].Name
	case ast.InputObject:
		m := map[string]any{}
		for _, f := range def.Fields {
			if f.Type.NonNull && f.DefaultValue == nil {
				m[f.Name] = validValue(schema, f.Type, f.Name)
			}
		}
		return m
	}
	switch t.NamedType {
	case "Int":
		return 60
	case "Boolean":
		return false
	case "Time":
		return "2024-01-01T00:00:00Z"
	}
	switch name {
	case "entityType", "type":
		return "user"
	case "entityId", "entityIds":
		return "u1"
	case "version":
		return ""
	}
	return "f"
}

// withValue is base with v at path: in the first element of a list on the
// way, and in a new object where base has none.
func withValue(base any, path []string, v any) any {
	if len(path) == 0 {
		return v
	}
	switch b := base.(type) {
	case []any:
		return []any{withValue(b[0], path, v)}
	case map[string]any:
		out := maps(b)
		out[path[0]] = withValue(b[path[0]], path[1:], v)
		return out
	}
	return map[string]any{path[0]: withValue(nil, path[1:], v)}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// request is an operation that gives v to the slot, in each of n aliases
// of its field (a subscription has one), with every other required
// argument valid.
func (s argumentSlot) request(schema *ast.Schema, v any, n int) map[string]any {
	var decls, args []string
	vars := map[string]any{}
	for i, a := range s.field.Arguments {
		if a != s.arg && (!a.Type.NonNull || a.DefaultValue != nil) {
			continue
		}
		name := fmt.Sprintf("v%d", i)
		decls = append(decls, "$"+name+": "+a.Type.String())
		args = append(args, a.Name+": $"+name)
		vars[name] = validValue(schema, a.Type, a.Name)
		if a == s.arg {
			vars[name] = withValue(vars[name], s.path, v)
		}
	}
	call := s.field.Name
	if len(args) > 0 {
		call += "(" + strings.Join(args, ", ") + ")"
	}
	if schema.Types[s.field.Type.Name()].Kind == ast.Object {
		call += " { __typename }"
	}
	op := map[string]string{"Query": "query", "Mutation": "mutation", "Subscription": "subscription", "Entity": "query"}[s.parent]
	if s.parent == "Subscription" {
		n = 1
	}
	var body strings.Builder
	for i := range n {
		fmt.Fprintf(&body, " a%d: %s", i, call)
	}
	sel := body.String()
	if s.parent == "Entity" {
		sel = ` entity(type: "user", entityId: "u1") {` + sel + " }"
	}
	doc := op + " {" + sel + " }"
	if len(decls) > 0 {
		doc = op + "(" + strings.Join(decls, ", ") + ") {" + sel + " }"
	}
	return map[string]any{"query": doc, "variables": vars}
}

// fuzzedValue makes what the fuzzer gives a value: the text repeated,
// up to 64 KiB (kind 0); the text as JSON, when it is (1); an object with
// the repeated text as a name (2); a list of the text (3).
func fuzzedValue(text string, kind uint8, repeat uint16) any {
	long := strings.Repeat(text, 1+int(repeat)%(64<<10/max(1, len(text))))
	switch kind % 4 {
	case 1:
		if json.Valid([]byte(text)) {
			return json.RawMessage(text)
		}
	case 2:
		return map[string]any{long: 1}
	case 3:
		return slices.Repeat([]any{text}, 1+int(repeat)%200)
	}
	return long
}

// Any value, oversized or malformed, for any argument of the schema or any
// field of an input object in it, used by up to 32 fields at once, gets an
// answer within --max-response-bytes (8 KiB here) and a fixed envelope:
// queries by POST, GET and WebSocket, mutations by POST and WebSocket,
// subscriptions (their first message) by WebSocket.
func FuzzVariables(f *testing.F) {
	const maxResponse = 8 << 10
	schema := exec.NewExecutableSchema(exec.Config{}).Schema()
	slots := argumentSlots(schema)
	for i := range slots {
		f.Add(uint16(i), "<", uint8(0), uint16(10_000), uint8(31), uint8(i))
		f.Add(uint16(i), "<", uint8(0), uint16(10_000), uint8(3), uint8(i+1))
		f.Add(uint16(i), `{"a":[1,"<"]}`, uint8(1), uint16(0), uint8(7), uint8(i))
	}
	f.Add(uint16(0), "1e999", uint8(1), uint16(0), uint8(3), uint8(0))
	f.Add(uint16(0), "\x00\u2028é", uint8(2), uint16(3000), uint8(3), uint8(1))

	s := embeddedStore(f)
	ctx := context.Background()
	for _, ft := range []store.Feature{{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour}, {EntityType: "user", Name: "n", ValueType: store.Int, TTL: time.Hour}} {
		if _, err := s.CreateFeature(ctx, ft); err != nil {
			f.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	catalog, err := features.New(ctx, s, log, nil)
	if err != nil {
		f.Fatal(err)
	}
	limits := unthrottled()
	limits.MaxResponseBytes = maxResponse
	reader := sdkmetric.NewManualReader()
	h, err := endpoint.New(endpoint.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Limits: limits, Log: log,
		Subscriptions: endpoint.DefaultSubscriptions, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		f.Fatal(err)
	}
	srv := httptest.NewServer(h)
	f.Cleanup(func() {
		srv.Close()
		h.Shutdown(context.Background())
	})

	f.Fuzz(func(t *testing.T, slot uint16, text string, kind uint8, repeat uint16, aliases uint8, transport uint8) {
		sl := slots[int(slot)%len(slots)]
		params := sl.request(schema, fuzzedValue(text, kind, repeat), 1+int(aliases)%32)
		g := &gateway{t: t, h: h}
		var b []byte
		switch sl.parent {
		case "Subscription":
			b = firstMessage(t, srv.URL, params, maxResponse+envelope, &meters{t: t, reader: reader})
		case "Mutation":
			b = g.answer(srv.URL, []string{"post", "websocket"}[transport%2], params, maxResponse+envelope)
		default:
			b = g.answer(srv.URL, []string{"post", "get", "websocket"}[transport%3], params, maxResponse+envelope)
		}
		if len(b) > maxResponse+envelope {
			t.Fatalf("%s: an answer of %d bytes, more than --max-response-bytes %d and %d more: %.300s", sl, len(b), maxResponse, envelope, b)
		}
		if b != nil && !json.Valid(b) {
			t.Fatalf("%s: not JSON: %.300s", sl, b)
		}
	})
}

// firstMessage subscribes and returns the subscription's first message (an
// item, or its error), reading at most limit bytes of it; nil once it is
// running with nothing to send yet, which is then ended. The gateway's
// active subscriptions tell that it runs.
func firstMessage(t *testing.T, base string, params map[string]any, limit int, m *meters) []byte {
	t.Helper()
	c, _, err := dial(t, base, "")
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := c.init(""); err != nil || msg.Type != "connection_ack" {
		t.Fatalf("init: %+v %v", msg, err)
	}
	c.conn.SetReadLimit(int64(limit))
	msg := append([]byte(`{"type":"subscribe","id":"1","payload":`), unescapedJSON(params)...)
	if err := c.conn.Write(c.ctx, websocket.MessageText, append(msg, '}')); err != nil {
		t.Fatal(err)
	}
	type read struct {
		b   []byte
		err error
	}
	reads := make(chan read, 1)
	go func() {
		for {
			_, b, err := c.conn.Read(c.ctx)
			var m wsMessage
			if err == nil && json.Unmarshal(b, &m) == nil && (m.Type == "ping" || m.Type == "pong") {
				continue
			}
			reads <- read{b, err}
			return
		}
	}()
	defer func() {
		// Ended, the subscription is counted no more once the next input
		// subscribes.
		c.conn.CloseNow()
		for deadline := time.Now().Add(30 * time.Second); m.value("listgate.subscriptions.active") != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the subscription still runs 30 s after its connection closed")
			}
		}
	}()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case r := <-reads:
			if r.err != nil {
				t.Fatalf("reading the first message (at most %d bytes): %v", limit, r.err)
			}
			return r.b
		case <-tick.C:
			if m.value("listgate.subscriptions.active") > 0 {
				return nil
			}
			if time.Now().After(deadline) {
				t.Fatal("no message, and no subscription running, after 30 s")
			}
		}
	}
}
