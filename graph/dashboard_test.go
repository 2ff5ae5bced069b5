package graph_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/store"
)

type bucket struct {
	Start string
	Count int
}

// A dashboard's figures fit one operation at the default limits, on
// either store: ten users' counts, as ten listCount aliases or as one
// entities query, and a histogram of 24 buckets of a list of 10,000
// items, whose buckets hold what listCount counts in each bucket's
// window. Counts of lists without a cap share what --max-complexity
// leaves, each bounded by its share, and say so past it; a capped list's
// count is priced at its cap.
func TestDashboardCountsFitOneOperation(t *testing.T) {
	eachBackend(t, func(t *testing.T, s store.Store) {
		g := newGateway(t, s)
		g.createFeature("reads", "STRING", 3*86400)
		now := time.Now()
		for u := range 10 {
			var items []item
			for i := range u + 1 {
				items = append(items, item{fmt.Sprint("s", i), ts(now.Add(-time.Duration(i) * time.Minute))})
			}
			g.add(fmt.Sprint("u", u), "reads", items...)
		}
		// 10,000 items over the last day, one every 8.64 s.
		start := now.Add(-25 * time.Hour).Truncate(time.Hour)
		step := 24 * time.Hour / 10_000
		want := make([]int, 24)
		for add := range 10 {
			items := make([]item, 1000)
			for i := range items {
				at := start.Add(time.Duration(add*1000+i) * step)
				items[i] = item{fmt.Sprint("story", add*1000+i), ts(at)}
				want[at.Sub(start)/time.Hour]++
			}
			g.add("heavy", "reads", items...)
		}

		var tenCounts strings.Builder
		tenCounts.WriteString("{")
		for u := range 10 {
			fmt.Fprintf(&tenCounts, ` c%d: listCount(entityType: "$type", entityId: "u%d", feature: "reads", minTimestamp: %q)`, u, u, ts(now.Add(-24*time.Hour)))
		}
		tenCounts.WriteString(" }")
		if cost, answer := g.cost(tenCounts.String(), nil); strings.Contains(answer, `"errors"`) || cost > int64(endpoint.DefaultLimits.MaxComplexity) {
			t.Fatalf("ten counts: cost %d, %s", cost, answer)
		}
		var counts map[string]int
		began := time.Now()
		g.ok(tenCounts.String(), nil, &counts)
		t.Logf("ten counts in one operation: %v", time.Since(began))
		for u := range 10 {
			equal(t, fmt.Sprint("count of u", u), counts[fmt.Sprint("c", u)], u+1)
		}
		var ents struct{ Entities []struct{ ListCount int } }
		ids := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "heavy"}
		g.ok(`query($ids: [ID!]!) { entities(type: "$type", entityIds: $ids) { listCount(feature: "reads") } }`, map[string]any{"ids": ids}, &ents)
		equal(t, "the heavy list's count among ten", ents.Entities[9].ListCount, 10_000)

		histogram := fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "heavy", feature: "reads", minTimestamp: %q, maxTimestamp: %q, bucketSeconds: 3600) { start count } }`,
			ts(start), ts(start.Add(24*time.Hour-1)))
		if cost, answer := g.cost(histogram, nil); strings.Contains(answer, `"errors"`) || cost > 10_100 {
			t.Fatalf("a histogram of 24 buckets: cost %d, %s; want it priced once, as a count and its buckets", cost, answer)
		}
		var h struct{ ListHistogram []bucket }
		began = time.Now()
		g.ok(histogram, nil, &h)
		t.Logf("a histogram of 24 buckets of 10,000 items: %v", time.Since(began))
		equal(t, "buckets", len(h.ListHistogram), 24)
		total := 0
		for i, b := range h.ListHistogram {
			equal(t, fmt.Sprint("bucket ", i, "'s start"), b.Start, ts(start.Add(time.Duration(i)*time.Hour)))
			equal(t, fmt.Sprint("bucket ", i), b.Count, want[i])
			total += b.Count
		}
		equal(t, "items in the buckets", total, 10_000)
		// A bucket holds what listCount counts in its window, through
		// Entity too.
		var e struct {
			Entity struct {
				ListHistogram []bucket
				ListCount     int
			}
		}
		g.ok(fmt.Sprintf(`{ entity(type: "$type", entityId: "heavy") { listHistogram(feature: "reads", minTimestamp: %q, maxTimestamp: %q, bucketSeconds: 3600) { start count }
			listCount(feature: "reads", minTimestamp: %q, maxTimestamp: %q) } }`,
			ts(start.Add(5*time.Hour)), ts(start.Add(7*time.Hour-1)), ts(start.Add(6*time.Hour)), ts(start.Add(7*time.Hour-1))), nil, &e)
		equal(t, "Entity.listHistogram", len(e.Entity.ListHistogram), 2)
		equal(t, "a bucket against listCount of its window", e.Entity.ListHistogram[1].Count, e.Entity.ListCount)
		// maxTimestamp left out: to now, 25 to 26 hours after start, the
		// last bucket the hour under way.
		g.ok(fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "heavy", feature: "reads", minTimestamp: %q, bucketSeconds: 3600) { start count } }`, ts(start)), nil, &h)
		if n := len(h.ListHistogram); n != 26 {
			t.Fatalf("a histogram to now from %v: %d buckets", start, n)
		}

		// Bad buckets say which bound, and read nothing.
		g.fails(fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "heavy", feature: "reads", minTimestamp: %q, maxTimestamp: %q, bucketSeconds: 60) { count } }`,
			ts(start), ts(start.Add(48*time.Hour))), nil, "BAD_USER_INPUT", "--max-buckets")
		g.fails(fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "heavy", feature: "reads", minTimestamp: %q, bucketSeconds: 0) { count } }`,
			ts(start)), nil, "BAD_USER_INPUT", "bucketSeconds")
		g.fails(fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "heavy", feature: "reads", minTimestamp: %q, maxTimestamp: %q, bucketSeconds: 60) { count } }`,
			ts(start), ts(start.Add(-time.Second))), nil, "BAD_USER_INPUT", "maxTimestamp")

		// A capped list's count is priced at its cap: a hundred fit.
		g.ok(`mutation { createListFeature(input: {entityType: "$type", name: "capped", valueType: STRING, ttlSeconds: 3600, maxItems: 1000}) { key } }`, nil, nil)
		var hundred strings.Builder
		hundred.WriteString("{")
		for i := range 100 {
			fmt.Fprintf(&hundred, ` c%d: listCount(entityType: "$type", entityId: "u%d", feature: "capped")`, i, i)
		}
		hundred.WriteString(" }")
		if cost, answer := g.cost(hundred.String(), nil); strings.Contains(answer, `"errors"`) || cost != 100*(1+1001/10+1) {
			t.Fatalf("100 counts of a list capped at 1,000: cost %d, %s; want %d", cost, answer, 100*(1+1001/10+1))
		}
	})
}

// Counts that share an operation's complexity each look at no more than
// their share: a count past it fails, saying so, while alone it counts.
func TestSharedCountsStopAtTheirShare(t *testing.T) {
	g := newGateway(t, embeddedStore(t), func(c *endpoint.Config) {
		c.Limits.MaxCount = 2000
		c.Limits.MaxComplexity = 2000 // a count costs 201: nine fit, ten share 1,990 keys each
	})
	g.createFeature("reads", "STRING", 86400)
	now := time.Now()
	items := make([]item, 1995)
	for i := range items {
		items[i] = item{fmt.Sprint("s", i), ts(now.Add(-time.Duration(i) * time.Second))}
	}
	g.add("big", "reads", items[:1000]...)
	g.add("big", "reads", items[1000:]...)
	g.add("small", "reads", items[:10]...)
	var one struct{ ListCount int }
	g.ok(`{ listCount(entityType: "$type", entityId: "big", feature: "reads") }`, nil, &one)
	equal(t, "the big list alone", one.ListCount, 1995)
	counts := func(n int) string {
		var b strings.Builder
		b.WriteString(`{ big: listCount(entityType: "$type", entityId: "big", feature: "reads")`)
		for i := range n - 1 {
			fmt.Fprintf(&b, ` c%d: listCount(entityType: "$type", entityId: "small", feature: "reads")`, i)
		}
		return b.String() + " }"
	}
	var nine map[string]int
	g.ok(counts(9), nil, &nine)
	equal(t, "the big list among nine", nine["big"], 1995)
	_, errs := g.do(counts(10), nil)
	if len(errs) != 1 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, "share") || !strings.Contains(errs[0].Message, "more than 1990 items") {
		t.Fatalf("errors = %+v; want the big count past its share of 1,990 keys", errs)
	}
	// Too many to share at least 1,000 keys each: refused before any runs.
	g.fails(counts(20), nil, "BAD_USER_INPUT", "--max-complexity")
}

// A histogram meets the same answer and the same limits over POST, GET
// and a WebSocket.
func TestHistogramOverEveryTransport(t *testing.T) {
	g, srv := subscriptionGateway(t, embeddedStore(t))
	g.createFeature("reads", "STRING", 86400)
	start := time.Now().Add(-time.Hour).Truncate(time.Minute)
	g.add("u1", "reads", item{"a", ts(start)}, item{"b", ts(start.Add(90 * time.Second))}, item{"c", ts(start.Add(100 * time.Second))})
	ok := fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "u1", feature: "reads", minTimestamp: %q, maxTimestamp: %q, bucketSeconds: 60) { count } }`,
		ts(start), ts(start.Add(3*time.Minute-1)))
	tooMany := fmt.Sprintf(`{ listHistogram(entityType: "$type", entityId: "u1", feature: "reads", minTimestamp: %q, bucketSeconds: 1) { count } }`, ts(start))
	for _, transport := range []string{"post", "get", "websocket"} {
		b := g.answer(srv.URL, transport, map[string]any{"query": ok}, 1<<20)
		if !strings.Contains(string(b), `"listHistogram":[{"count":1},{"count":2},{"count":0}]`) {
			t.Errorf("%s: %s", transport, b)
		}
		errs := answerErrors(t, g.answer(srv.URL, transport, map[string]any{"query": tooMany}, 1<<20))
		if len(errs) != 1 || errs[0].Extensions.Code != "BAD_USER_INPUT" || !strings.Contains(errs[0].Message, "--max-buckets") {
			t.Errorf("%s: %+v; want BAD_USER_INPUT naming --max-buckets", transport, errs)
		}
	}
}
