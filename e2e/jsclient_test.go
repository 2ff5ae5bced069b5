package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// readBackInJS reads each list through Node's fetch and JSON.parse (what
// every JavaScript client does), then adds every item it read again, with
// the value and timestamp as JavaScript holds them. If JavaScript saw any
// value or timestamp other than the stored one, the add makes a new item.
const readBackInJS = `
const [base, entityType, ...features] = process.argv.slice(1);
const gql = async (query, variables) => {
  const r = await fetch(base + "/graphql", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({query, variables})});
  const body = JSON.parse(await r.text());
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
};
const seen = {};
for (const feature of features) {
  const list = {entityType, entityId: "js", feature};
  const {listItems} = await gql("query($t: String!, $f: String!) { listItems(entityType: $t, entityId: \"js\", feature: $f) { items { value timestamp } } }", {t: entityType, f: feature});
  seen[feature] = listItems.items.map(it => it.value);
  const items = listItems.items.map(it => ({value: it.value, timestamp: it.timestamp}));
  await gql("mutation($list: ListRefInput!, $items: [ListItemInput!]!) { addListItems(list: $list, items: $items) { added } }", {list, items});
}
console.log(JSON.stringify(seen));
`

// Values travel exactly between the gateway and a real JavaScript client:
// what it reads is what was stored, and what it sends back is the same
// item. 64-bit integers beyond ±(2^53−1) travel as strings.
func TestJavaScriptClientReadsValuesExactly(t *testing.T) {
	node := nodeAtLeast(t, "Node.js on PATH: this test reads values back as a JavaScript client does", nodeProject)
	base := startGateway(t).base
	entityType := "user"
	cases := []struct {
		feature, valueType string
		in                 []any  // as sent, in JSON variables
		seen               string // what JavaScript's JSON.stringify shows of the list, newest first
	}{
		{"ints", "INT", []any{"9007199254740993", 9007199254740991, "-9223372036854775808", json.Number("-9007199254740991")},
			`[-9007199254740991,"-9223372036854775808",9007199254740991,"9007199254740993"]`},
		{"floats", "FLOAT", []any{0.1, 1e300, 5e-324, json.Number("9007199254740992")},
			`[9007199254740992,5e-324,1e+300,0.1]`},
		{"jsons", "JSON", []any{map[string]any{"id": 9007199254740991, "s": "😀\u2028", "n": 0.1}, []any{1e21, "x"}},
			`[[1e+21,"x"],{"id":9007199254740991,"n":0.1,"s":"😀\u2028"}]`},
		{"strings", "STRING", []any{"😀", "\u2028<&>", ""},
			`["","\u2028<&>","😀"]`},
	}
	var features []string
	now := time.Now().Truncate(time.Second)
	for _, c := range cases {
		_, out := gatewaytest.Post(t, base, "", fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: %q, valueType: %s, ttlSeconds: 3600}) { key } }`, entityType, c.feature, c.valueType))
		if out["errors"] != nil {
			t.Fatal(out)
		}
		var items []map[string]any
		for i, v := range c.in {
			items = append(items, map[string]any{"value": v, "timestamp": now.Add(time.Duration(i)*time.Second + 123456789).Format(time.RFC3339Nano)})
		}
		vars, _ := json.Marshal(map[string]any{"items": items})
		_, out = gatewaytest.PostRequest(t, base, "", map[string]any{"variables": json.RawMessage(vars), "query": fmt.Sprintf(`mutation($items: [ListItemInput!]!) { addListItems(list: {entityType: %q, entityId: "js", feature: %q}, items: $items) { added } }`, entityType, c.feature)})
		if fmt.Sprint(out["data"]) != fmt.Sprintf("map[addListItems:map[added:%d]]", len(c.in)) {
			t.Fatalf("%s: %v", c.feature, out)
		}
		features = append(features, c.feature)
	}
	cmd := exec.Command(node, append([]string{"--input-type=module", "-e", readBackInJS, base, entityType}, features...)...)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stdout)
	}
	var seen map[string]json.RawMessage
	if err := json.Unmarshal(stdout, &seen); err != nil {
		t.Fatalf("node printed %q: %v", stdout, err)
	}
	for _, c := range cases {
		if got, want := decode(t, seen[c.feature]), decode(t, []byte(c.seen)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: JavaScript read %s, want %s", c.feature, seen[c.feature], c.seen)
		}
		_, out := gatewaytest.Post(t, base, "", fmt.Sprintf(`{ listItems(entityType: %q, entityId: "js", feature: %q) { items { cursor } } }`, entityType, c.feature))
		if n := strings.Count(fmt.Sprint(out["data"]), "cursor:"); n != len(c.in) {
			t.Errorf("%s: %d items after JavaScript added back what it read, want %d: it changed a value or a timestamp", c.feature, n, len(c.in))
		}
	}
}

// decode parses JSON keeping numbers as their text.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}
