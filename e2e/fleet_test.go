package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/gatewaytest"
)

// Two gateway processes on one Cassandra agree: a feature created through
// one is usable through the other as soon as the create returns, and a
// feature deleted through one stops taking writes through the other within
// its refresh interval.
func TestGatewayReplicasAgree(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	const refresh = time.Second
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_FEATURE_REFRESH=" + refresh.String()}
	a := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...).base
	b := startGateway(t, env...).base
	entityType := fmt.Sprintf("fleet%d", time.Now().UnixNano()%1e9)

	for i := range 10 {
		name := fmt.Sprint("f", i)
		_, out := gatewaytest.Post(t, a, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: %q, valueType: STRING, ttlSeconds: 3600}) { key } }`, entityType, name))
		if out["errors"] != nil {
			t.Fatalf("create on A: %v", out)
		}
		_, out = gatewaytest.Post(t, b, "", fmt.Sprintf(`mutation { addListItems(list: {entityType: %q, entityId: "u1", feature: %q}, items: [{value: "x"}]) { added } }`, entityType, name))
		if fmt.Sprint(out["data"]) != "map[addListItems:map[added:1]]" {
			t.Fatalf("add on B right after the create on A: %v", out)
		}
		_, out = gatewaytest.Post(t, b, "", fmt.Sprintf(`{ listItems(entityType: %q, entityId: "u1", feature: %q) { items { value } } }`, entityType, name))
		if fmt.Sprint(out["data"]) != "map[listItems:map[items:[map[value:x]]]]" {
			t.Fatalf("read on B: %v", out)
		}
	}

	_, out := gatewaytest.Post(t, a, "", fmt.Sprintf(`mutation { deleteListFeature(entityType: %q, name: "f0") }`, entityType))
	if fmt.Sprint(out["data"]) != "map[deleteListFeature:1]" {
		t.Fatalf("delete on A: %v", out)
	}
	deleted := time.Now()
	for {
		_, out := gatewaytest.Post(t, b, "", fmt.Sprintf(`mutation { addListItems(list: {entityType: %q, entityId: "u1", feature: "f0"}, items: [{value: "y"}]) { added } }`, entityType))
		if strings.Contains(fmt.Sprint(out["errors"]), "NOT_FOUND") {
			break
		}
		if out["errors"] != nil {
			t.Fatalf("add on B after the delete: %v", out)
		}
		if time.Since(deleted) > refresh+2*time.Second {
			t.Fatalf("B still takes writes to the deleted feature %v after the delete on A (refresh interval %v)", time.Since(deleted), refresh)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("B refused writes to the deleted feature %v after the delete on A", time.Since(deleted).Round(time.Millisecond))
}

// A feature deleted and created again through one gateway shows none of the
// deleted one's items through either: at once through that gateway, and
// through the other once it has reloaded its features (within its refresh
// interval); items written through either after the re-creation show
// through both.
func TestRecreatedFeatureAcrossReplicas(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	const refresh = time.Second
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_FEATURE_REFRESH=" + refresh.String()}
	a := startGateway(t, append(env, "LISTGATE_MIGRATE=true")...).base
	b := startGateway(t, env...).base
	entityType := fmt.Sprintf("fleet%d", time.Now().UnixNano()%1e9)
	post := func(base, query string) map[string]any {
		t.Helper()
		_, out := gatewaytest.Post(t, base, "", strings.ReplaceAll(query, "$type", entityType))
		if out["errors"] != nil {
			t.Fatalf("%s: %v", query, out)
		}
		return out
	}
	read := func(base string) string {
		t.Helper()
		return fmt.Sprint(post(base, `{ listItems(entityType: "$type", entityId: "u1", feature: "f") { items { value } } }`)["data"])
	}
	post(a, `mutation { createListFeature(input: {entityType: "$type", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	post(b, `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "old"}]) { added } }`)
	if got := read(b); got != "map[listItems:map[items:[map[value:old]]]]" {
		t.Fatalf("before: %s", got)
	}
	post(a, `mutation { deleteListFeature(entityType: "$type", name: "f")
		createListFeature(input: {entityType: "$type", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	recreated := time.Now()
	if got := read(a); got != "map[listItems:map[items:[]]]" {
		t.Fatalf("through A right after the re-creation: %s", got)
	}
	for read(b) != "map[listItems:map[items:[]]]" {
		if time.Since(recreated) > refresh+2*time.Second {
			t.Fatalf("B still shows the deleted feature's items %v after the re-creation (refresh interval %v)", time.Since(recreated), refresh)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("B shows none of the deleted feature's items %v after the re-creation", time.Since(recreated).Round(time.Millisecond))
	post(b, `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "new"}]) { added } }`)
	for _, base := range []string{a, b} {
		if got := read(base); got != "map[listItems:map[items:[map[value:new]]]]" {
			t.Fatalf("after an add through B: %s", got)
		}
	}
}

// A feature deleted through A and created again with another value type
// and cap: through A at once the re-creation is refused, naming the seconds
// left, while B, which has not reloaded, may still write the old type; no
// read through either fails or shows a value under another type than the
// one it was written as. Once every gateway has seen the deletion (the
// shared --feature-staleness, and the clock skew allowed), it is created
// again, and through both gateways shows neither the deleted feature's
// items nor B's late ones. Created again with its value type and cap, it
// is at once.
func TestRecreatedWithAnotherTypeAcrossReplicas(t *testing.T) {
	hosts := strings.Join(cqltest.Hosts(t), ",")
	env := []string{"LISTGATE_CQL_HOSTS=" + hosts, "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_FEATURE_STALENESS=6s"}
	ga := startGateway(t, append(env, "LISTGATE_MIGRATE=true", "LISTGATE_FEATURE_REFRESH=1s")...)
	a := ga.base
	b := startGateway(t, append(env, "LISTGATE_FEATURE_REFRESH=2s")...).base
	entityType := fmt.Sprintf("fleet%d", time.Now().UnixNano()%1e9)
	do := func(base, query string) map[string]any {
		t.Helper()
		_, out := gatewaytest.Post(t, base, "", strings.ReplaceAll(query, "$type", entityType))
		return out
	}
	ok := func(base, query string) map[string]any {
		t.Helper()
		out := do(base, query)
		if out["errors"] != nil {
			t.Fatalf("%s: %v", query, out)
		}
		return out
	}
	const read = `{ listItems(entityType: "$type", entityId: "u1", feature: "f") { items { value } } }`
	ok(a, `mutation { createListFeature(input: {entityType: "$type", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`)
	ok(b, `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "before"}]) { added } }`)
	ok(a, `mutation { deleteListFeature(entityType: "$type", name: "f") }`)
	const again = `mutation { createListFeature(input: {entityType: "$type", name: "f", valueType: INT, ttlSeconds: 3600, maxItems: 5}) { key } }`
	if out := do(a, again); !strings.Contains(fmt.Sprint(out["errors"]), "CONFLICT") || !strings.Contains(fmt.Sprint(out["errors"]), "retry in") {
		t.Fatalf("created again as INT at once: %v; want CONFLICT naming the seconds left", out)
	}
	// B has likely not reloaded yet: it takes a STRING value.
	late := do(b, `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: "abc"}]) { added } }`)
	t.Logf("an add through B right after the deletion: %v", late)
	if out := do(a, read); !strings.Contains(fmt.Sprint(out["errors"]), "NOT_FOUND") {
		t.Fatalf("a read through A of the deleted feature: %v; want NOT_FOUND", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := do(a, again)
		if out["errors"] == nil {
			break
		}
		if !strings.Contains(fmt.Sprint(out["errors"]), "CONFLICT") || time.Now().After(deadline) {
			t.Fatalf("creating it again as INT: %v", out)
		}
		time.Sleep(250 * time.Millisecond)
	}
	ok(a, `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: 7}]) { added } }`)
	for _, base := range []string{a, b} {
		if got := fmt.Sprint(ok(base, read)["data"]); got != "map[listItems:map[items:[map[value:7]]]]" {
			t.Fatalf("after the re-creation as INT: %s", got)
		}
	}
	ok(b, `mutation { addListItems(list: {entityType: "$type", entityId: "u1", feature: "f"}, items: [{value: 8}]) { added } }`)
	for _, base := range []string{a, b} {
		if got := fmt.Sprint(ok(base, read)["data"]); got != "map[listItems:map[items:[map[value:8] map[value:7]]]]" {
			t.Fatalf("after an add through B: %s", got)
		}
	}
	if n := metric(t, a, "listgate_list_items_skipped_total"); n != 0 {
		t.Fatalf("%v values left out of pages through A: none should be of another type", n)
	}
	// With its value type and cap, at once.
	ok(a, `mutation { deleteListFeature(entityType: "$type", name: "f") }`)
	ok(a, `mutation { createListFeature(input: {entityType: "$type", name: "f", valueType: INT, ttlSeconds: 60, maxItems: 5}) { key } }`)
	if got := fmt.Sprint(ok(a, read)["data"]); got != "map[listItems:map[items:[]]]" {
		t.Fatalf("after a re-creation with the same value type and cap: %s", got)
	}
}
