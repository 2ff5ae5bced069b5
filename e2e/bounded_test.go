package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// A page after a deep cursor on a list capped at 100,000 ranks its rows on
// keys and reads the values of its own item alone, on both stores
// (listgate_list_rows_read_total{values="true"}).
func TestCappedPageReadsItsValuesAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"embedded", nil},
		{"cassandra", []string{"LISTGATE_CQL_HOSTS=" + strings.Join(cqltest.Hosts(t), ","), "LISTGATE_CQL_KEYSPACE=fleet", "LISTGATE_MIGRATE=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, tc.env...)
			entityType := fmt.Sprintf("cap%d", time.Now().UnixNano()%1e9)
			g.mustOK(fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: "f", valueType: STRING, ttlSeconds: 86400, maxItems: 100000}) { key } }`, entityType), nil)
			value := strings.Repeat("v", 500)
			now := time.Now()
			for add := range 5 {
				items := make([]map[string]any, 1000)
				for i := range items {
					items[i] = map[string]any{"value": fmt.Sprint(value, add*1000+i), "timestamp": now.Add(-time.Duration(add*1000+i) * time.Millisecond).UTC().Format(time.RFC3339Nano)}
				}
				g.mustOK(`mutation($t: String!, $items: [ListItemInput!]!) { addListItems(list: {entityType: $t, entityId: "u1", feature: "f"}, items: $items) { added } }`,
					map[string]any{"t": entityType, "items": items})
			}
			page := `query($t: String!, $after: String) { listItems(entityType: $t, entityId: "u1", feature: "f", limit: 1, after: $after) { items { value } endCursor } }`
			cursor := fmt.Sprintf("%019d#++++++++++++++++++++++==", now.Add(-3999*time.Millisecond).UnixNano()) // 4,000 items above it
			values := metric(t, g.base, "listgate_list_rows_read_total", `values="true"`)
			keys := metric(t, g.base, "listgate_list_rows_read_total", `values="false"`)
			r := g.mustOK(page, map[string]any{"t": entityType, "after": cursor})
			if !strings.Contains(string(r.Data), fmt.Sprint(value, 4000)) {
				t.Fatalf("the page after the cursor: %.200s", r.Data)
			}
			if n := metric(t, g.base, "listgate_list_rows_read_total", `values="true"`) - values; n != 1 {
				t.Errorf("%v rows read with their values for a page of 1, want 1", n)
			}
			if n := metric(t, g.base, "listgate_list_rows_read_total", `values="false"`) - keys; n < 4000 {
				t.Errorf("%v keys read to rank a page below 4,000 items, want at least 4,000", n)
			}
		})
	}
}

// The embedded store ends its scans and writes with the request's
// deadline: searches that look at far more keys than a second allows
// answer TIMEOUT by the deadline, and so do removals. An answer comes once
// every field's resolver has returned: by the deadline, none runs on.
func TestEmbeddedStoreEndsWorkAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	seedStore(t, dir, func(ctx context.Context, s *embedded.Store) {
		f := seedFeature(t, ctx, s, "big", store.String)
		now := time.Now()
		for add := range 200 {
			items := make([]store.NewItem, 1000)
			for i := range items {
				items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(add*1000+i) * time.Millisecond).UnixNano(), Value: fmt.Appendf(nil, "v%d", i%3)}
			}
			if _, err := s.AddItems(ctx, store.List{Feature: f, EntityID: "u1"}, items); err != nil {
				t.Fatal(err)
			}
		}
	})
	g := startGateway(t, "LISTGATE_DATA_DIR="+dir, "LISTGATE_REQUEST_TIMEOUT=1s", "LISTGATE_MAX_COUNT=1000000",
		"LISTGATE_MAX_COMPLEXITY=100000000", "LISTGATE_MAX_IN_FLIGHT_COMPLEXITY=100000000", "LISTGATE_CALLER_COST_RATE=0")
	var search, remove strings.Builder
	for i := range 200 {
		fmt.Fprintf(&search, ` s%d: listContains(feature: "big", values: ["absent%d"]) { value }`, i, i)
		fmt.Fprintf(&remove, ` r%d: removeListItemsWithValue(list: {entityType: "user", entityId: "u1", feature: "big"}, value: "v%d") { removed }`, i, i%3)
	}
	for _, q := range []string{`{ entity(type: "user", entityId: "u1") {` + search.String() + ` } }`, `mutation {` + remove.String() + ` }`} {
		r := g.do(q, nil)
		if r.Err != nil || !strings.Contains(strings.Join(r.Codes(), " "), "TIMEOUT") || r.Took > g.timeout+answerMargin {
			t.Fatalf("%.60s…: %s after %v; want TIMEOUT by the deadline", q, r, r.Took)
		}
		t.Logf("%.40s…: TIMEOUT after %v", q, r.Took.Round(time.Millisecond))
	}
}
