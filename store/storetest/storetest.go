// Package storetest is the conformance suite every list store passes: each
// rule of the design's "Semantics that must hold" stated once, as a test.
// A backend's own tests call Run with a way to make a store.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// TTLReader is implemented by stores that can report the TTL they hold for
// an item, the way CQL's TTL(value) does.
type TTLReader interface {
	ItemTTL(ctx context.Context, l store.List, itemKey string) (time.Duration, error)
}

// RowCounter is implemented by stores that can count the live rows a
// list's partition holds, shown or not: what a capped list costs.
type RowCounter interface {
	Rows(ctx context.Context, l store.List) (int, error)
}

// TurnTaker is implemented by stores whose long scans take turns
// (store.Turns): TakeTurns holds every turn until release, as other long
// scans would.
type TurnTaker interface {
	TakeTurns() (release func())
}

// NewStore opens a store whose clock is now. Stores it returns may share
// their data; every test uses entity types of its own.
type NewStore func(t *testing.T, now func() time.Time) store.Store

// Options are what a case may ask of a store beyond its clock; the zero
// value asks for the store's defaults.
type Options struct {
	FeedRetention time.Duration // how long the change feed keeps its records
}

// NewStoreWith opens a store as NewStore does, as opts say.
type NewStoreWith func(t *testing.T, now func() time.Time, opts Options) store.Store

// Run runs the suite on stores opened with their defaults: a case that
// asks for others (Options) is skipped.
func Run(t *testing.T, open NewStore) {
	RunWith(t, func(t *testing.T, now func() time.Time, opts Options) store.Store {
		if opts != (Options{}) {
			t.Skipf("this case needs a store opened with %+v: run the suite with storetest.RunWith", opts)
		}
		return open(t, now)
	})
}

// RunWith runs the suite.
func RunWith(t *testing.T, open NewStoreWith) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, h *harness)
	}{
		{"SameTimestampDistinctValuesAreDistinctItems", testSameTimestampDistinctValues},
		{"SameTimestampSameValueIsOneItem", testSameItemIsIdempotent},
		{"NewestFirst", testNewestFirst},
		{"ValuesRoundTrip", testValuesRoundTrip},
		{"MinTimestampIsInclusive", testMinTimestamp},
		{"Limit", testLimit},
		{"CursorPagesCoverTheListOnce", testCursorPaging},
		{"MalformedCursorIsRejected", testMalformedCursor},
		{"ExpiredItemsAreCountedNotWritten", testExpiredNotWritten},
		{"StoredTTLIsTimestampPlusFeatureTTLMinusNow", testStoredTTL},
		{"ItemExpiringWithinASecondIsNotKeptForever", testShortLivedItem},
		{"TTLBeyondServerLimitsIsRejected", testTTLLimits},
		{"RemoveValuesRemovesEveryTimestampAndNothingElse", testRemoveValues},
		{"RemoveAllEmptiesOnlyThatList", testRemoveAll},
		{"OtherListsAreUntouched", testIsolation},
		{"AddIsAllOrNothing", testAddAllOrNothing},
		{"OversizedAddIsRejected", testOversizedAdd},
		{"InvalidIdentifiersWriteNothing", testInvalidIdentifiers},
		{"Features", testFeatures},
		{"TimeWindowBoundsAreInclusive", testTimeWindow},
		{"CountCountsTheWindowWithinItsBound", testCount},
		{"HistogramCountsEachBucketInOneBoundedRead", testHistogram},
		{"DistinctPagesHoldTheNewestItemOfEachValue", testDistinct},
		{"FindGivesTheNewestItemOfEachValueInRequestOrder", testFind},
		{"CappedListShowsOnlyItsNewestItems", testCapReads},
		{"CappedListIsTrimmedByAdds", testCapTrim},
		{"RecreatedFeatureShowsNoItemOfTheDeletedOne", testRecreate},
		{"RecreatedAtOnceIsAnotherList", testRecreateAtOnce},
		{"SinceReadsOldestFirstFromAKey", testSince},
		{"SincePagesPastRowsOfADeletedFeature", testSincePastDeletedRows},
		{"ValuesOfOneMD5AreNotTakenForEachOther", testHashCollision},
		{"RemovalIsBoundedWindowedAndSaysWhatItDid", testRemovalBounds},
		{"AnEndedContextEndsReadsAndWrites", testEndedContext},
		{"FeedGivesEveryAddOfAWatchedListOnceInOrder", testFeed},
		{"ListFeedResumesFromAPosition", testListFeed},
		{"OnlyLiveFeaturesRecordTheirAdds", testLiveFlag},
		{"MadeLiveRecordsAsLiveWaitSays", testLiveWait},
		{"LongScansTakeTurns", testLongScansTakeTurns},
		{"ACatchUpPastTheRetentionFails", testCatchUpPastRetention},
		{"PositionsOfNoRecordAreRefused", testPositionsOfNoRecord},
		{"ExportYieldsEveryVisibleItemOfItsFeaturesOnce", testExport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, ctx: context.Background(), entityType: uniqueEntityType(), open: open}
			h.s = open(t, h.now, Options{})
			tc.test(t, h)
		})
	}
}

var seq atomic.Int64

// uniqueEntityType keeps tests apart even on a database that outlives the
// test process.
func uniqueEntityType() string {
	return fmt.Sprintf("t%d_%d", time.Now().UnixNano()%1e12, seq.Add(1))
}

type harness struct {
	t          *testing.T
	ctx        context.Context
	s          store.Store
	entityType string
	offset     atomic.Int64 // added to the store's clock
	open       NewStoreWith
}

// now is the stores' clock.
func (h *harness) now() time.Time { return time.Now().Add(time.Duration(h.offset.Load())) }

// reopen makes h.s a store opened as opts say, with the same clock.
func (h *harness) reopen(opts Options) {
	h.s = h.open(h.t, h.now, opts)
}

// feature creates a feature of the test's entity type.
func (h *harness) feature(name, version string, ttl time.Duration) *store.Feature {
	h.t.Helper()
	f, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: name, Version: version, ValueType: store.String, TTL: ttl})
	if err != nil {
		h.t.Fatalf("CreateFeature %s: %v", name, err)
	}
	return &f
}

// live makes f live, as subscriptions need it.
func (h *harness) live(f *store.Feature) *store.Feature {
	h.t.Helper()
	g, err := h.s.SetFeatureLive(h.ctx, f.EntityType, f.Name, f.Version, true)
	if err != nil {
		h.t.Fatalf("SetFeatureLive %s: %v", f.Key(), err)
	}
	return &g
}

func (h *harness) list(f *store.Feature, entityID string) store.List {
	return store.List{Feature: f, EntityID: entityID}
}

func (h *harness) add(l store.List, items ...store.NewItem) store.AddResult {
	h.t.Helper()
	res, err := h.s.AddItems(h.ctx, l, items)
	if err != nil {
		h.t.Fatalf("AddItems: %v", err)
	}
	return res
}

func (h *harness) page(l store.List, r store.Range) store.Page {
	h.t.Helper()
	if r.Limit == 0 {
		r.Limit = store.MaxLimit
	}
	p, err := h.s.Items(h.ctx, l, r)
	if err != nil {
		h.t.Fatalf("Items: %v", err)
	}
	return p
}

// values lists a whole list's values, newest first.
func (h *harness) values(l store.List) []string {
	h.t.Helper()
	var out []string
	for _, it := range h.page(l, store.Range{}).Items {
		out = append(out, string(it.Value))
	}
	return out
}

func item(ts time.Time, value string) store.NewItem {
	return store.NewItem{Timestamp: ts.UnixNano(), Value: []byte(value)}
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func isInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, errkind.Invalid) {
		t.Fatalf("%s: err = %v, want ErrInvalid", what, err)
	}
	if strings.TrimSpace(err.Error()) == "" {
		t.Fatalf("%s: empty error message", what)
	}
}

const day = 24 * time.Hour

func testSameTimestampDistinctValues(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	res := h.add(l, item(now, "a"), item(now, "b"))
	equal(t, "added", res.Added, 2)
	p := h.page(l, store.Range{})
	equal(t, "items", len(p.Items), 2)
	for _, it := range p.Items {
		equal(t, "timestamp", it.Timestamp, now.UnixNano())
		equal(t, "key", it.Key, keys.ItemKey(now.UnixNano(), it.Value))
	}
}

func testSameItemIsIdempotent(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	equal(t, "added in one call", h.add(l, item(now, "a"), item(now, "a")).Added, 1)
	h.add(l, item(now, "a"))
	equal(t, "values", h.values(l), []string{"a"})
}

func testNewestFirst(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	h.add(l, item(now.Add(-2*time.Second), "old"), item(now, "new"), item(now.Add(-time.Second), "mid"))
	h.add(l, item(now.Add(-time.Hour), "oldest"), item(now.Add(time.Nanosecond), "newest"))
	equal(t, "values", h.values(l), []string{"newest", "new", "mid", "old", "oldest"})
}

func testValuesRoundTrip(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	values := [][]byte{{}, {0}, {0xff, 0xfe}, []byte("story:123"), bytes.Repeat([]byte("x"), store.DefaultLimits.MaxValueBytes)}
	for i, v := range values {
		h.add(l, store.NewItem{Timestamp: now.UnixNano() - int64(i), Value: v})
	}
	p := h.page(l, store.Range{})
	equal(t, "items", len(p.Items), len(values))
	for i, it := range p.Items {
		if !bytes.Equal(it.Value, values[i]) || it.Value == nil {
			t.Fatalf("item %d: value %q (nil %v), want %q", i, it.Value, it.Value == nil, values[i])
		}
	}
}

func testMinTimestamp(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	base := time.Now().Add(-time.Minute)
	for i := range 5 {
		h.add(l, item(base.Add(time.Duration(i)*time.Second), fmt.Sprint(i)))
	}
	p := h.page(l, store.Range{MinTimestamp: base.Add(2 * time.Second).UnixNano()})
	var got []string
	for _, it := range p.Items {
		got = append(got, string(it.Value))
	}
	equal(t, "values at or after minTimestamp", got, []string{"4", "3", "2"})
	p = h.page(l, store.Range{MinTimestamp: base.Add(2*time.Second + 1).UnixNano()})
	equal(t, "items after minTimestamp+1ns", len(p.Items), 2)
}

func testLimit(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	for i := range 5 {
		h.add(l, item(now.Add(-time.Duration(i)*time.Second), fmt.Sprint(i)))
	}
	p := h.page(l, store.Range{Limit: 3})
	equal(t, "items", len(p.Items), 3)
	equal(t, "hasMore", p.HasMore, true)
	p = h.page(l, store.Range{Limit: 5})
	equal(t, "items", len(p.Items), 5)
	equal(t, "hasMore when the page holds the rest", p.HasMore, false)
	for _, bad := range []int{-1, store.MaxLimit + 1} {
		_, err := h.s.Items(h.ctx, l, store.Range{Limit: bad})
		isInvalid(t, fmt.Sprintf("limit %d", bad), err)
	}
}

func testCursorPaging(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	base := time.Now().Add(-time.Hour)
	const n = 1000
	batch := make([]store.NewItem, 0, n)
	for i := range n {
		// Pairs of items share a timestamp, so pages also split ties.
		batch = append(batch, item(base.Add(time.Duration(i/2)*time.Millisecond), fmt.Sprintf("v%04d", i)))
	}
	equal(t, "added", h.add(l, batch...).Added, n)
	seen := map[string]bool{}
	var prev string
	after := ""
	pages := 0
	for {
		p := h.page(l, store.Range{Limit: 37, After: after, MinTimestamp: base.UnixNano()})
		pages++
		for _, it := range p.Items {
			if prev != "" && it.Key >= prev {
				t.Fatalf("key %s after %s: not newest first", it.Key, prev)
			}
			if seen[string(it.Value)] {
				t.Fatalf("value %s seen twice", it.Value)
			}
			seen[string(it.Value)] = true
			prev = it.Key
		}
		if !p.HasMore {
			break
		}
		after = p.Items[len(p.Items)-1].Key
		if pages > n {
			t.Fatal("paging does not end")
		}
	}
	equal(t, "distinct items seen", len(seen), n)
	equal(t, "pages", pages, (n+36)/37)
}

func testMalformedCursor(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	for _, c := range []string{"x", "' OR 1=1", keys.TimestampPrefix(1), strings.Repeat("9", 44)} {
		_, err := h.s.Items(h.ctx, l, store.Range{Limit: 10, After: c})
		isInvalid(t, "cursor "+c, err)
	}
}

func testExpiredNotWritten(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", time.Hour), "u1")
	now := time.Now()
	res := h.add(l, item(now.Add(-2*time.Hour), "expired"), item(now.Add(-time.Hour-time.Second), "just expired"), item(now, "live"))
	equal(t, "result", res, store.AddResult{Added: 1, Expired: 2})
	equal(t, "values", h.values(l), []string{"live"})
	res = h.add(l, item(now.Add(-3*time.Hour), "expired"))
	equal(t, "all expired", res, store.AddResult{Added: 0, Expired: 1})
}

func testStoredTTL(t *testing.T, h *harness) {
	r, ok := h.s.(TTLReader)
	if !ok {
		t.Fatalf("%T does not implement storetest.TTLReader", h.s)
	}
	l := h.list(h.feature("f", "", 10*day), "u1")
	now := time.Now()
	for _, age := range []time.Duration{0, time.Hour, 9 * day, 10*day - time.Minute} {
		ts := now.Add(-age)
		h.add(l, item(ts, "v"))
		got, err := r.ItemTTL(h.ctx, l, keys.ItemKey(ts.UnixNano(), []byte("v")))
		if err != nil {
			t.Fatalf("ItemTTL: %v", err)
		}
		want := time.Until(ts.Add(10 * day))
		if d := got - want; d < -2*time.Second || d > 2*time.Second {
			t.Fatalf("age %v: stored TTL %v, want %v ± 2s", age, got, want)
		}
	}
}

func testShortLivedItem(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", 2*time.Second), "u1")
	now := time.Now()
	// 400 ms left: rounded up to a TTL of 1 s, never to 0 (which would keep
	// it forever).
	res := h.add(l, item(now.Add(-1600*time.Millisecond), "short"), item(now, "longer"))
	equal(t, "added", res.Added, 2)
	time.Sleep(2200 * time.Millisecond)
	equal(t, "values after 2.2s", h.values(l), []string{})
	if r, ok := h.s.(TTLReader); ok {
		if _, err := r.ItemTTL(h.ctx, l, keys.ItemKey(now.Add(-1600*time.Millisecond).UnixNano(), []byte("short"))); !errors.Is(err, errkind.NotFound) {
			t.Fatalf("expired item's TTL: err = %v, want ErrNotFound", err)
		}
	}
}

func testTTLLimits(t *testing.T, h *harness) {
	_, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: "too_long", ValueType: store.String, TTL: keys.MaxTTL + time.Second})
	isInvalid(t, "feature TTL above 20 years", err)
	_, err = h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: "zero", ValueType: store.String})
	isInvalid(t, "feature TTL 0", err)
	// The longest TTL a feature may have here: 20 years, or less where the
	// server's expiry cap comes first. An item 30 minutes ahead passes one.
	longest := min(time.Until(h.s.ExpiryCap()).Truncate(time.Second)-10*time.Minute, keys.MaxTTL)
	l := h.list(h.feature("longest", "", longest), "u1")
	_, err = h.s.AddItems(h.ctx, l, []store.NewItem{item(time.Now().Add(30*time.Minute), "future")})
	isInvalid(t, "item whose TTL passes the maximum or the expiry cap", err)
	_, err = h.s.AddItems(h.ctx, l, []store.NewItem{item(time.Now().Add(2*time.Hour), "far future")})
	isInvalid(t, "item stamped 2h in the future", err)
	equal(t, "values", h.values(l), []string{})
}

func testRemoveValues(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	var items []store.NewItem
	for i := range 23 {
		items = append(items, item(now.Add(-time.Duration(i)*time.Second), "gone"))
		items = append(items, item(now.Add(-time.Duration(i)*time.Second), "kept"))
	}
	items = append(items, item(now, "gone2"), item(now, "gon"), item(now, "also gone"))
	h.add(l, items...)
	n, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("gone"), []byte("absent"), []byte("also gone")}, store.Window{}, 100_000)
	if err != nil {
		t.Fatalf("RemoveValues: %v", err)
	}
	equal(t, "removed", n, 24)
	vals := h.values(l)
	equal(t, "items left", len(vals), 25)
	for _, v := range vals {
		if v == "gone" || v == "also gone" {
			t.Fatal("a removed value is still listed")
		}
	}
	n, err = h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("absent")}, store.Window{}, 100_000)
	if err != nil || n != 0 {
		t.Fatalf("RemoveValues(absent) = %d, %v", n, err)
	}
}

func testRemoveAll(t *testing.T, h *harness) {
	f := h.feature("f", "", day)
	a, b := h.list(f, "a"), h.list(f, "b")
	now := time.Now()
	h.add(a, item(now, "1"), item(now, "2"))
	h.add(b, item(now, "1"))
	if err := h.s.RemoveAll(h.ctx, a); err != nil {
		t.Fatalf("RemoveAll: %v", err)
	}
	equal(t, "emptied list", h.values(a), []string{})
	equal(t, "other list", h.values(b), []string{"1"})
	h.add(a, item(now, "3"))
	equal(t, "list after re-adding", h.values(a), []string{"3"})
}

func testIsolation(t *testing.T, h *harness) {
	f, g := h.feature("f", "", day), h.feature("g", "", day)
	fv2 := h.feature("f", "v2", day)
	otherType := *f
	otherType.EntityType = h.entityType + "_x"
	if _, err := h.s.CreateFeature(h.ctx, otherType); err != nil {
		t.Fatalf("CreateFeature: %v", err)
	}
	target := h.list(f, "u1")
	bystanders := []store.List{h.list(f, "u2"), h.list(f, "u1 "), h.list(g, "u1"), h.list(fv2, "u1"), h.list(&otherType, "u1")}
	now := time.Now()
	for _, l := range append(bystanders, target) {
		h.add(l, item(now, "shared"), item(now.Add(-time.Second), "other"))
	}
	check := func(step string) {
		t.Helper()
		for _, l := range bystanders {
			equal(t, step+": "+l.Feature.Key()+"/"+l.EntityID, h.values(l), []string{"shared", "other"})
		}
	}
	h.add(target, item(now, "more"))
	check("after add")
	if _, err := h.s.RemoveValues(h.ctx, target, [][]byte{[]byte("shared")}, store.Window{}, 100_000); err != nil {
		t.Fatal(err)
	}
	check("after remove value")
	if err := h.s.RemoveAll(h.ctx, target); err != nil {
		t.Fatal(err)
	}
	check("after remove all")
	equal(t, "target", h.values(target), []string{})
}

func testAddAllOrNothing(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	const n = 1000
	items := make([]store.NewItem, n)
	for i := range items {
		items[i] = item(now.Add(-time.Duration(i)*time.Millisecond), fmt.Sprint(i))
	}
	bad := append([]store.NewItem(nil), items...)
	bad[n-1] = item(now.Add(3*time.Hour), "too far ahead")
	_, err := h.s.AddItems(h.ctx, l, bad)
	isInvalid(t, "an add with one bad item", err)
	equal(t, "items after the rejected add", len(h.values(l)), 0)
	res := h.add(l, items...)
	equal(t, "added", res.Added, n)
	equal(t, "items after the good add", len(h.values(l)), n)
}

func testOversizedAdd(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	many := make([]store.NewItem, store.DefaultLimits.MaxAddItems+1)
	for i := range many {
		many[i] = item(now.Add(-time.Duration(i)), "v")
	}
	_, err := h.s.AddItems(h.ctx, l, many)
	isInvalid(t, "too many items", err)
	big := make([]store.NewItem, store.DefaultLimits.MaxAddBytes/store.DefaultLimits.MaxValueBytes+1)
	for i := range big {
		big[i] = store.NewItem{Timestamp: now.UnixNano() - int64(i), Value: bytes.Repeat([]byte{byte(i)}, store.DefaultLimits.MaxValueBytes)}
	}
	_, err = h.s.AddItems(h.ctx, l, big)
	isInvalid(t, "too many bytes", err)
	_, err = h.s.AddItems(h.ctx, l, []store.NewItem{{Timestamp: now.UnixNano(), Value: make([]byte, store.DefaultLimits.MaxValueBytes+1)}})
	isInvalid(t, "too large a value", err)
	equal(t, "items", len(h.values(l)), 0)
}

func testInvalidIdentifiers(t *testing.T, h *harness) {
	good := h.feature("f", "", day)
	now := time.Now()
	for _, f := range []store.Feature{
		{EntityType: "User", Name: "f", ValueType: store.String, TTL: day},
		{EntityType: h.entityType, Name: "f#x", ValueType: store.String, TTL: day},
		{EntityType: h.entityType, Name: "f", Version: "v|1", ValueType: store.String, TTL: day},
		{EntityType: h.entityType, Name: "f2", ValueType: "TEXT", TTL: day},
		{EntityType: h.entityType, Name: "f3", ValueType: store.String, TTL: 1500 * time.Millisecond},
	} {
		_, err := h.s.CreateFeature(h.ctx, f)
		isInvalid(t, "CreateFeature "+f.Key(), err)
	}
	fs, err := h.s.Features(h.ctx, h.entityType)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "features", len(fs), 1)
	for _, id := range []string{"", "a\x00b", "a\nb", strings.Repeat("x", 257), "\xff"} {
		l := store.List{Feature: good, EntityID: id}
		_, err := h.s.AddItems(h.ctx, l, []store.NewItem{item(now, "v")})
		isInvalid(t, fmt.Sprintf("AddItems entity id %q", id), err)
		_, err = h.s.Items(h.ctx, l, store.Range{Limit: 1})
		isInvalid(t, "Items", err)
		_, err = h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("v")}, store.Window{}, 100_000)
		isInvalid(t, "RemoveValues", err)
		_, err = h.s.Count(h.ctx, l, store.Window{}, 10)
		isInvalid(t, "Count", err)
		_, err = h.s.Find(h.ctx, l, [][]byte{[]byte("v")}, 0, 10)
		isInvalid(t, "Find", err)
		isInvalid(t, "RemoveAll", h.s.RemoveAll(h.ctx, l))
	}
	badFeature := *good
	badFeature.Version = "a#b"
	_, err = h.s.AddItems(h.ctx, store.List{Feature: &badFeature, EntityID: "u1"}, []store.NewItem{item(now, "v")})
	isInvalid(t, "AddItems with a bad version", err)
	_, err = h.s.AddItems(h.ctx, store.List{Feature: good, EntityID: "u1"}, []store.NewItem{{Timestamp: -1, Value: []byte("v")}})
	isInvalid(t, "AddItems with a negative timestamp", err)
	equal(t, "values", h.values(store.List{Feature: good, EntityID: "u1"}), []string{})
}

func testFeatures(t *testing.T, h *harness) {
	f := store.Feature{EntityType: h.entityType, Name: "reading_history", ValueType: store.JSON, TTL: 30 * day, Description: "stories read"}
	created, err := h.s.CreateFeature(h.ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if created.CreatedAt.IsZero() || time.Since(created.CreatedAt) > time.Minute {
		t.Fatalf("createdAt %v", created.CreatedAt)
	}
	_, err = h.s.CreateFeature(h.ctx, f)
	if !errors.Is(err, errkind.Conflict) {
		t.Fatalf("second create: err = %v, want ErrConflict", err)
	}
	v2 := f
	v2.Version = "2025/03/11"
	v2.ValueType = store.Int
	if _, err := h.s.CreateFeature(h.ctx, v2); err != nil {
		t.Fatal(err)
	}
	h.feature("another", "", day)
	fs, err := h.s.Features(h.ctx, h.entityType)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range fs {
		got = append(got, fmt.Sprintf("%s %s %v %q", x.Key(), x.ValueType, x.TTL, x.Description))
	}
	equal(t, "features", got, []string{
		h.entityType + "#another| STRING 24h0m0s \"\"",
		h.entityType + "#reading_history| JSON 720h0m0s \"stories read\"",
		h.entityType + "#reading_history|2025/03/11 INT 720h0m0s \"stories read\"",
	})
	all, err := h.s.Features(h.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range all {
		if x.EntityType == h.entityType {
			n++
		}
	}
	equal(t, "features of this type among all", n, 3)
	ok, err := h.s.DeleteFeature(h.ctx, h.entityType, "reading_history", "2025/03/11")
	if err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	ok, err = h.s.DeleteFeature(h.ctx, h.entityType, "reading_history", "2025/03/11")
	if err != nil || ok {
		t.Fatalf("second DeleteFeature = %v, %v; want false", ok, err)
	}
	ok, err = h.s.DeleteFeature(h.ctx, h.entityType, "never", "")
	if err != nil || ok {
		t.Fatalf("DeleteFeature of a missing feature = %v, %v; want false", ok, err)
	}
	fs, _ = h.s.Features(h.ctx, h.entityType)
	equal(t, "features after delete", len(fs), 2)
}

// page reads a list with r, and the values of its items.
func (h *harness) pageValues(l store.List, r store.Range) (store.Page, []string) {
	h.t.Helper()
	p := h.page(l, r)
	vals := []string{}
	for _, it := range p.Items {
		vals = append(vals, string(it.Value))
	}
	return p, vals
}

func (h *harness) count(l store.List, w store.Window) int {
	h.t.Helper()
	n, err := h.s.Count(h.ctx, l, w, 100_000)
	if err != nil {
		h.t.Fatalf("Count: %v", err)
	}
	return n
}

func (h *harness) find(l store.List, minTimestamp int64, values ...string) []string {
	h.t.Helper()
	vs := make([][]byte, len(values))
	for i, v := range values {
		vs[i] = []byte(v)
	}
	found, err := h.s.Find(h.ctx, l, vs, minTimestamp, 100_000)
	if err != nil {
		h.t.Fatalf("Find: %v", err)
	}
	return found
}

// Items at t0..t9 (seconds): v0 oldest … v9 newest.
func (h *harness) tenItems(l store.List) []time.Time {
	h.t.Helper()
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	var ts []time.Time
	var items []store.NewItem
	for i := range 10 {
		ts = append(ts, base.Add(time.Duration(i)*time.Second))
		items = append(items, item(ts[i], fmt.Sprint("v", i)))
	}
	h.add(l, items...)
	return ts
}

func testTimeWindow(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	ts := h.tenItems(l)
	w := store.Window{MinTimestamp: ts[3].UnixNano(), MaxTimestamp: ts[6].UnixNano()}
	_, vals := h.pageValues(l, store.Range{MinTimestamp: w.MinTimestamp, MaxTimestamp: w.MaxTimestamp})
	equal(t, "window, both bounds inclusive", vals, []string{"v6", "v5", "v4", "v3"})
	_, vals = h.pageValues(l, store.Range{MaxTimestamp: ts[6].UnixNano() - 1})
	equal(t, "maxTimestamp 1 ns before an item leaves it out", vals[0], "v5")
	p, vals := h.pageValues(l, store.Range{MinTimestamp: w.MinTimestamp, MaxTimestamp: w.MaxTimestamp, Limit: 3})
	equal(t, "window with a limit", vals, []string{"v6", "v5", "v4"})
	equal(t, "hasMore", p.HasMore, true)
	p, vals = h.pageValues(l, store.Range{MinTimestamp: w.MinTimestamp, MaxTimestamp: w.MaxTimestamp, Limit: 3, After: p.End})
	equal(t, "next page of the window", vals, []string{"v3"})
	equal(t, "hasMore at the window's end", p.HasMore, false)
	// A cursor above the window's top reads from the top; one below it
	// from the cursor.
	_, vals = h.pageValues(l, store.Range{MaxTimestamp: ts[2].UnixNano(), After: keys.ItemKey(ts[8].UnixNano(), []byte("v8"))})
	equal(t, "cursor above maxTimestamp", vals, []string{"v2", "v1", "v0"})
	_, vals = h.pageValues(l, store.Range{MaxTimestamp: ts[8].UnixNano(), After: keys.ItemKey(ts[2].UnixNano(), []byte("v2"))})
	equal(t, "cursor below maxTimestamp", vals, []string{"v1", "v0"})
	equal(t, "count of the window", h.count(l, w), 4)
	equal(t, "count of an empty window", h.count(l, store.Window{MinTimestamp: ts[6].UnixNano(), MaxTimestamp: ts[5].UnixNano()}), 0)
	equal(t, "count of all", h.count(l, store.Window{}), 10)
}

func testCount(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	ts := h.tenItems(l)
	equal(t, "count from minTimestamp", h.count(l, store.Window{MinTimestamp: ts[5].UnixNano()}), 5)
	equal(t, "count to maxTimestamp", h.count(l, store.Window{MaxTimestamp: ts[5].UnixNano()}), 6)
	n, err := h.s.Count(h.ctx, l, store.Window{}, 10)
	if err != nil || n != 10 {
		t.Fatalf("count of 10 items bounded at 10 rows = %d, %v", n, err)
	}
	_, err = h.s.Count(h.ctx, l, store.Window{}, 9)
	if !errors.Is(err, store.ErrTooManyRows) || !errors.Is(err, errkind.Invalid) {
		t.Fatalf("count of 10 items bounded at 9 rows: err = %v, want ErrTooManyRows", err)
	}
	n, err = h.s.Count(h.ctx, l, store.Window{MinTimestamp: ts[2].UnixNano()}, 9)
	if err != nil || n != 8 {
		t.Fatalf("count of a window of 8 bounded at 9 rows = %d, %v", n, err)
	}
	equal(t, "count of an empty list", h.count(h.list(l.Feature, "nobody"), store.Window{}), 0)
}

func (h *harness) histogram(l store.List, b store.Buckets, maxRows int) []int {
	h.t.Helper()
	counts, err := h.s.Histogram(h.ctx, l, b, maxRows)
	if err != nil {
		h.t.Fatalf("Histogram: %v", err)
	}
	return counts
}

func testHistogram(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	ts := h.tenItems(l)
	buckets := func(from, to time.Time, width time.Duration) store.Buckets {
		return store.Buckets{Window: store.Window{MinTimestamp: from.UnixNano(), MaxTimestamp: to.UnixNano()}, Width: int64(width)}
	}
	equal(t, "buckets of 3 s from t1 to t8", h.histogram(l, buckets(ts[1], ts[8], 3*time.Second), 100), []int{3, 3, 2})
	equal(t, "maxTimestamp 1 ns before an item leaves it out", h.histogram(l, buckets(ts[1], ts[8].Add(-1), 3*time.Second), 100), []int{3, 3, 1})
	equal(t, "one bucket of 1 ns", h.histogram(l, buckets(ts[3], ts[3], 1), 100), []int{1})
	equal(t, "buckets of a window before the list", h.histogram(l, buckets(ts[0].Add(-time.Hour), ts[0].Add(-time.Minute), 30*time.Minute), 100), []int{0, 0})
	equal(t, "buckets of an empty list", h.histogram(h.list(l.Feature, "nobody"), buckets(ts[0], ts[9], time.Second), 100), make([]int, 10))
	whole := buckets(ts[0], ts[9], 5*time.Second)
	equal(t, "buckets of the list bounded at 10 rows", h.histogram(l, whole, 10), []int{5, 5})
	if _, err := h.s.Histogram(h.ctx, l, whole, 9); !errors.Is(err, store.ErrTooManyRows) || !errors.Is(err, errkind.Invalid) {
		t.Fatalf("histogram of 10 items bounded at 9 rows: err = %v, want ErrTooManyRows", err)
	}
	equal(t, "buckets of a window of 8 bounded at 8 rows", h.histogram(l, buckets(ts[2], ts[9], 4*time.Second), 8), []int{4, 4})
	for what, b := range map[string]store.Buckets{
		"a width of 0":                        buckets(ts[0], ts[9], 0),
		"maxTimestamp unset":                  {Window: store.Window{MinTimestamp: ts[0].UnixNano()}, Width: int64(time.Second)},
		"a window that ends before it starts": buckets(ts[9], ts[0], time.Second),
		"too many buckets":                    buckets(ts[0], ts[9], time.Nanosecond),
	} {
		_, err := h.s.Histogram(h.ctx, l, b, 100)
		isInvalid(t, what, err)
	}

	// A capped list shows its newest items alone, in a histogram as in a
	// count.
	c := h.list(h.capped(4), "u1")
	ts = h.tenItems(c)
	equal(t, "buckets of a capped list", h.histogram(c, buckets(ts[0], ts[9], time.Second), 100), []int{0, 0, 0, 0, 0, 0, 1, 1, 1, 1})
	equal(t, "buckets of a window across the cap", h.histogram(c, buckets(ts[0], ts[7], 2*time.Second), 100), []int{0, 0, 0, 2})
}

func testDistinct(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	base := time.Now().Add(-time.Minute)
	// Newest first: a b a c b a d e a f (and 30 more a's, older).
	seq := []string{"a", "b", "a", "c", "b", "a", "d", "e", "a", "f"}
	var items []store.NewItem
	for i, v := range seq {
		items = append(items, item(base.Add(-time.Duration(i)*time.Second), v))
	}
	for i := range 30 {
		items = append(items, item(base.Add(-time.Duration(100+i)*time.Second), "a"))
	}
	h.add(l, items...)
	p, vals := h.pageValues(l, store.Range{Distinct: true, Limit: 4, MaxScan: 40})
	equal(t, "distinct page", vals, []string{"a", "b", "c", "d"})
	equal(t, "hasMore", p.HasMore, true)
	equal(t, "timestamps are the newest of each value", p.Items[0].Timestamp, base.UnixNano())
	p, vals = h.pageValues(l, store.Range{Distinct: true, Limit: 4, MaxScan: 40, After: p.End})
	equal(t, "next distinct page: its own a, the older a's passed over", vals, []string{"e", "a", "f"})
	equal(t, "hasMore at the end", p.HasMore, false)
	// A page that reaches its scan bound ends early and says where the
	// next one starts.
	p, vals = h.pageValues(l, store.Range{Distinct: true, Limit: 4, MaxScan: 5})
	equal(t, "bounded page", vals, []string{"a", "b", "c"})
	equal(t, "bounded page hasMore", p.HasMore, true)
	equal(t, "bounded page ends at the 5th row", p.End, keys.ItemKey(base.Add(-4*time.Second).UnixNano(), []byte("b")))
	_, vals = h.pageValues(l, store.Range{Distinct: true, Limit: 4, MaxScan: 5, After: p.End})
	equal(t, "page after a bounded one", vals, []string{"a", "d", "e", "f"})
	// Pages read on to the end cover every value, each page distinct.
	after, pages := "", 0
	for {
		p, vals = h.pageValues(l, store.Range{Distinct: true, Limit: 2, MaxScan: 3, After: after})
		for i := range vals {
			for j := range i {
				if vals[i] == vals[j] {
					t.Fatalf("page %v holds %s twice", vals, vals[i])
				}
			}
		}
		if pages++; !p.HasMore || pages > 50 {
			break
		}
		after = p.End
	}
	equal(t, "paging ends", p.HasMore, false)
}

func testFind(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	ts := h.tenItems(l)
	h.add(l, item(ts[2].Add(time.Millisecond), "v7")) // v7 is also held older
	found := h.find(l, 0, "v7", "absent", "v0", "v7", "v9")
	want := []string{
		keys.ItemKey(ts[7].UnixNano(), []byte("v7")), "", keys.ItemKey(ts[0].UnixNano(), []byte("v0")),
		keys.ItemKey(ts[7].UnixNano(), []byte("v7")), keys.ItemKey(ts[9].UnixNano(), []byte("v9")),
	}
	equal(t, "found, in request order, the newest of each", found, want)
	found = h.find(l, ts[3].UnixNano(), "v0", "v3")
	equal(t, "found at or after minTimestamp", found, []string{"", keys.ItemKey(ts[3].UnixNano(), []byte("v3"))})
	if _, err := h.s.Find(h.ctx, l, [][]byte{[]byte("v0")}, 0, 5); !errors.Is(err, store.ErrTooManyRows) {
		t.Fatalf("find past its bound: err = %v, want ErrTooManyRows", err)
	}
	if found, err := h.s.Find(h.ctx, l, [][]byte{[]byte("v9")}, 0, 1); err != nil || found[0] == "" {
		t.Fatalf("find of the newest item with a bound of 1 row = %v, %v", found, err)
	}
}

func (h *harness) capped(maxItems int) *store.Feature {
	h.t.Helper()
	f, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: "capped", ValueType: store.String, TTL: day, MaxItems: maxItems})
	if err != nil {
		h.t.Fatalf("CreateFeature: %v", err)
	}
	equal(h.t, "maxItems", f.MaxItems, maxItems)
	return &f
}

func testCapReads(t *testing.T, h *harness) {
	f := h.capped(4)
	fs, err := h.s.Features(h.ctx, h.entityType)
	if err != nil || len(fs) != 1 || fs[0].MaxItems != 4 {
		t.Fatalf("Features = %+v, %v", fs, err)
	}
	l := h.list(f, "u1")
	// Ten items in one add: whatever the add trims, reads show only the
	// newest four.
	ts := h.tenItems(l)
	_, vals := h.pageValues(l, store.Range{})
	equal(t, "values", vals, []string{"v9", "v8", "v7", "v6"})
	p, vals := h.pageValues(l, store.Range{Limit: 3})
	equal(t, "first page", vals, []string{"v9", "v8", "v7"})
	equal(t, "hasMore", p.HasMore, true)
	p, vals = h.pageValues(l, store.Range{Limit: 3, After: p.End})
	equal(t, "second page stops at the cap", vals, []string{"v6"})
	equal(t, "hasMore at the cap", p.HasMore, false)
	_, vals = h.pageValues(l, store.Range{MaxTimestamp: ts[7].UnixNano()})
	equal(t, "a window below the newest items", vals, []string{"v7", "v6"})
	_, vals = h.pageValues(l, store.Range{After: keys.ItemKey(ts[5].UnixNano(), []byte("v5"))})
	equal(t, "a cursor past the cap", vals, []string{})
	equal(t, "count", h.count(l, store.Window{}), 4)
	equal(t, "count of a window across the cap", h.count(l, store.Window{MaxTimestamp: ts[7].UnixNano()}), 2)
	equal(t, "found", h.find(l, 0, "v9", "v6", "v5"), []string{keys.ItemKey(ts[9].UnixNano(), []byte("v9")), keys.ItemKey(ts[6].UnixNano(), []byte("v6")), ""})
	n, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("v8"), []byte("v2")}, store.Window{}, 100_000)
	if err != nil || n != 1 {
		t.Fatalf("RemoveValues of a shown and a capped-out value = %d, %v; want 1 (the shown one)", n, err)
	}
	// With v8 gone, reads show the newest four left.
	_, vals = h.pageValues(l, store.Range{})
	equal(t, "values after a removal", vals[:3], []string{"v9", "v7", "v6"})
	// New items push the oldest out.
	h.add(l, item(time.Now(), "new"))
	_, vals = h.pageValues(l, store.Range{})
	equal(t, "values after an add", vals[:3], []string{"new", "v9", "v7"})
	equal(t, "count after an add", h.count(l, store.Window{}), 4)
}

func testCapTrim(t *testing.T, h *harness) {
	rc, ok := h.s.(RowCounter)
	if !ok {
		t.Fatalf("%T does not implement storetest.RowCounter", h.s)
	}
	const maxItems, adds = 20, 400
	f := h.capped(maxItems)
	l := h.list(f, "u1")
	base := time.Now().Add(-time.Hour)
	for i := range adds {
		h.add(l, item(base.Add(time.Duration(i)*time.Millisecond), fmt.Sprint(i)))
	}
	rows, err := rc.Rows(h.ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	// An add trims with probability 1/slack, so the list passes its cap by
	// more than 12 slacks with probability about e^-12.
	slack := store.TrimSlack(maxItems)
	if rows > maxItems+12*slack {
		t.Fatalf("%d single-item adds to a list capped at %d left %d rows: the adds do not trim (slack %d)", adds, maxItems, rows, slack)
	}
	_, vals := h.pageValues(l, store.Range{})
	equal(t, "shown", len(vals), maxItems)
	equal(t, "newest shown", vals[0], fmt.Sprint(adds-1))
	equal(t, "oldest shown", vals[maxItems-1], fmt.Sprint(adds-maxItems))
	// An add of more items than the slack always trims: the list holds the
	// newest maxItems rows, the add's own older items dropped with the rest.
	var many []store.NewItem
	for i := range 3 * slack {
		many = append(many, item(base.Add(time.Minute+time.Duration(i)*time.Millisecond), fmt.Sprint("m", i)))
	}
	h.add(l, many...)
	if rows, err = rc.Rows(h.ctx, l); err != nil || rows != maxItems {
		t.Fatalf("rows after an add of %d items = %d, %v; want %d", len(many), rows, err, maxItems)
	}
}

func testRecreate(t *testing.T, h *harness) {
	f := h.feature("f", "", day)
	l := h.list(f, "u1")
	now := time.Now()
	h.add(l, item(now.Add(-time.Second), "old"), item(now.Add(-2*time.Second), "kept value"))
	h.add(h.list(f, "u2"), item(now, "old of u2"))
	if ok, err := h.s.DeleteFeature(h.ctx, f.EntityType, f.Name, f.Version); err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	// Created again with a cap, it waits until every gateway has seen the
	// deletion, saying how long; with another TTL alone it would not.
	again := store.Feature{EntityType: f.EntityType, Name: f.Name, ValueType: store.String, TTL: 2 * day, MaxItems: 2}
	if _, err := h.s.CreateFeature(h.ctx, again); !errors.Is(err, errkind.Conflict) || !strings.Contains(err.Error(), "s (--feature-staleness and 5 s of clock skew") {
		t.Fatalf("created again at once with a cap: %v; want a CONFLICT naming the seconds left", err)
	}
	again.ValueType = store.Int
	again.MaxItems = 0
	if _, err := h.s.CreateFeature(h.ctx, again); !errors.Is(err, errkind.Conflict) {
		t.Fatalf("created again at once as INT: %v; want a CONFLICT", err)
	}
	h.offset.Add(int64(store.DefaultRecreateWait))
	again.ValueType, again.MaxItems = store.String, 2
	g, err := h.s.CreateFeature(h.ctx, again)
	if err != nil {
		t.Fatalf("CreateFeature again once every gateway has seen the deletion: %v", err)
	}
	l = h.list(&g, "u1")
	_, vals := h.pageValues(l, store.Range{})
	equal(t, "items of the deleted feature", vals, []string{})
	equal(t, "items of another list of it", h.values(h.list(&g, "u2")), []string{})
	equal(t, "count", h.count(l, store.Window{}), 0)
	equal(t, "found", h.find(l, 0, "old"), []string{""})
	// The new feature's items show, the old ones never, whatever their
	// timestamps: an item added again at an old item's timestamp is new.
	h.add(l, item(now.Add(-3*time.Second), "new"), item(now.Add(-2*time.Second), "kept value"))
	_, vals = h.pageValues(l, store.Range{})
	equal(t, "items after adds", vals, []string{"kept value", "new"})
	equal(t, "count after adds", h.count(l, store.Window{}), 2)
	equal(t, "the cap counts new items only", h.find(l, 0, "new"), []string{keys.ItemKey(now.Add(-3*time.Second).UnixNano(), []byte("new"))})
	n, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("old"), []byte("new")}, store.Window{}, 100_000)
	if err != nil || n != 1 {
		t.Fatalf("RemoveValues of an old and a new value = %d, %v; want 1", n, err)
	}
	fs, err := h.s.Features(h.ctx, h.entityType)
	if err != nil || len(fs) != 1 || fs[0].TTL != 2*day || fs[0].MaxItems != 2 || fs[0].ItemsSince != g.ItemsSince {
		t.Fatalf("Features = %+v, %v", fs, err)
	}
	_, err = h.s.CreateFeature(h.ctx, g)
	if !errors.Is(err, errkind.Conflict) {
		t.Fatalf("creating it a third time: err = %v, want ErrConflict", err)
	}
	// A page of a feature created again looks at MaxScan rows at most, and
	// paging on from its end finds every item, past rows left from the
	// deleted feature (where a store keeps them).
	r := h.feature("r", "", day)
	var old []store.NewItem
	for i := range 20 {
		old = append(old, item(now.Add(-time.Duration(i)*time.Second), fmt.Sprint("old ", i)))
	}
	h.add(h.list(r, "u3"), old...)
	if ok, err := h.s.DeleteFeature(h.ctx, r.EntityType, r.Name, r.Version); err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	r2, err := h.s.CreateFeature(h.ctx, *r)
	if err != nil {
		t.Fatal(err)
	}
	u3 := h.list(&r2, "u3")
	h.add(u3, item(now.Add(-time.Minute), "new"))
	var seen []string
	after := ""
	for pages := 1; ; pages++ {
		p, vals := h.pageValues(u3, store.Range{Limit: 1, MaxScan: 5, After: after})
		seen = append(seen, vals...)
		if !p.HasMore {
			break
		}
		if pages > 6 || p.End == "" {
			t.Fatalf("page %d: hasMore with end %q", pages, p.End)
		}
		after = p.End
	}
	equal(t, "items paged through", seen, []string{"new"})
}

func testSince(t *testing.T, h *harness) {
	f := h.feature("f", "", day)
	l := h.list(f, "u1")
	ts := h.tenItems(l)
	h.add(l, item(ts[5], "v5 twin")) // a second item at v5's timestamp
	since := func(from string, limit int) []string {
		t.Helper()
		page, err := h.s.Since(h.ctx, l, from, limit)
		if err != nil {
			t.Fatalf("Since: %v", err)
		}
		vals := []string{}
		for _, it := range page.Items {
			vals = append(vals, string(it.Value))
			if it.Key != keys.ItemKey(it.Timestamp, it.Value) {
				t.Fatalf("item %+v: key and timestamp disagree", it)
			}
		}
		return vals
	}
	got := since(keys.TimestampPrefix(ts[5].UnixNano()), 100)
	if len(got) != 6 || got[2] != "v6" || got[5] != "v9" || !strings.HasPrefix(got[0], "v5") || !strings.HasPrefix(got[1], "v5") {
		t.Fatalf("since v5's timestamp = %v: want both items at it (in key order), then v6 … v9", got)
	}
	equal(t, "since an item key, at most 2", since(keys.ItemKey(ts[7].UnixNano(), []byte("v7")), 2), []string{"v7", "v8"})
	equal(t, "since the oldest, all", len(since("", 100)), 11)
	// Rows of a deleted feature are left out.
	if ok, err := h.s.DeleteFeature(h.ctx, f.EntityType, f.Name, f.Version); err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	g, err := h.s.CreateFeature(h.ctx, *f)
	if err != nil {
		t.Fatal(err)
	}
	l = h.list(&g, "u1")
	h.add(l, item(ts[0].Add(-time.Second), "new"))
	equal(t, "since, after the feature was created again", since("", 100), []string{"new"})
}

// Paging by Since from the oldest row finds every item of a feature
// created again, in order, however many rows of the deleted one lie
// between them (where a store keeps them).
func testSincePastDeletedRows(t *testing.T, h *harness) {
	f := h.feature("f", "", day)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var old []store.NewItem
	for i := range 100 {
		old = append(old, item(base.Add(time.Duration(3*i)*time.Second), fmt.Sprint("old ", i)), item(base.Add(time.Duration(3*i+1)*time.Second), fmt.Sprint("old ", i, "b")))
	}
	h.add(h.list(f, "u1"), old...)
	if ok, err := h.s.DeleteFeature(h.ctx, f.EntityType, f.Name, f.Version); err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	g, err := h.s.CreateFeature(h.ctx, *f)
	if err != nil {
		t.Fatal(err)
	}
	l := h.list(&g, "u1")
	var want []string
	var items []store.NewItem
	for i := range 100 {
		want = append(want, fmt.Sprint("new ", i))
		items = append(items, item(base.Add(time.Duration(3*i+2)*time.Second), want[i]))
	}
	h.add(l, items...)
	// Each call looks at limit rows at most: 300 rows take 30 calls, and
	// one more finds nothing after them.
	const limit = 10
	got := []string{}
	from := ""
	for calls := 1; ; calls++ {
		page, err := h.s.Since(h.ctx, l, from, limit)
		if err != nil {
			t.Fatalf("Since: %v", err)
		}
		if len(page.Items) > limit {
			t.Fatalf("call %d: %d items, past the limit of %d", calls, len(page.Items), limit)
		}
		for _, it := range page.Items {
			got = append(got, string(it.Value))
		}
		if page.Next == "" {
			break
		}
		if calls > 300/limit+1 || page.Next <= from {
			t.Fatalf("call %d: next %q after from %q: Since does not move on", calls, page.Next, from)
		}
		from = page.Next
	}
	equal(t, "items paged through", got, want)
}

// A public MD5 collision pair of printable strings: one hash, two values.
var collision = [2]string{
	"TEXTCOLLBYfGiJUETHQ4hAcKSMd5zYpgqf1YRDhkmxHkhPWptrkoyz28wnI9V0aHeAuaKnak",
	"TEXTCOLLBYfGiJUETHQ4hEcKSMd5zYpgqf1YRDhkmxHkhPWptrkoyz28wnI9V0aHeAuaKnak",
}

// Searches and removals compare the values, not only their hash: with
// one value of a collision pair stored, the other is not found and its
// removal removes nothing; with both, each finds and removes its own.
func testHashCollision(t *testing.T, h *harness) {
	a, b := collision[0], collision[1]
	if keys.ValueHash([]byte(a)) != keys.ValueHash([]byte(b)) {
		t.Fatal("the pair does not collide")
	}
	l := h.list(h.feature("f", "", day), "u1")
	now := time.Now()
	h.add(l, item(now.Add(-time.Second), a))
	equal(t, "found, with a stored", h.find(l, 0, b, a), []string{"", keys.ItemKey(now.Add(-time.Second).UnixNano(), []byte(a))})
	if n, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte(b)}, store.Window{}, 100); err != nil || n != 0 {
		t.Fatalf("removing b with a stored: %d, %v", n, err)
	}
	equal(t, "values after removing b", h.values(l), []string{a})
	h.add(l, item(now, b))
	equal(t, "found, with both stored, b newest", h.find(l, 0, a, b),
		[]string{keys.ItemKey(now.Add(-time.Second).UnixNano(), []byte(a)), keys.ItemKey(now.UnixNano(), []byte(b))})
	if n, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte(a)}, store.Window{}, 100); err != nil || n != 1 {
		t.Fatalf("removing a: %d, %v", n, err)
	}
	equal(t, "values after removing a", h.values(l), []string{b})
}

// A removal looks at the keys of its window only, no more than its bound
// of them (past it, it removes nothing), and one cut short by its context
// says how many it removed of how many.
func testRemovalBounds(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	ts := h.tenItems(l)
	h.add(l, item(ts[2].Add(time.Millisecond), "v9"), item(ts[5].Add(time.Millisecond), "v9"))
	n, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("v9")}, store.Window{MinTimestamp: ts[3].UnixNano(), MaxTimestamp: ts[8].UnixNano()}, 100)
	if err != nil || n != 1 {
		t.Fatalf("removing v9 from the window of v3 to v8: %d, %v; want the one at v5's time", n, err)
	}
	if _, err := h.s.RemoveValues(h.ctx, l, [][]byte{[]byte("v9")}, store.Window{}, 5); !errors.Is(err, store.ErrTooManyRows) {
		t.Fatalf("a removal past its bound: %v, want ErrTooManyRows", err)
	}
	equal(t, "v9s left", h.find(l, 0, "v9")[0] != "", true)
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	_, err = h.s.RemoveValues(ctx, l, [][]byte{[]byte("v9")}, store.Window{}, 100)
	var cut *store.Removal
	if !errors.As(err, &cut) && !errors.Is(err, context.Canceled) {
		t.Fatalf("a removal whose context ended: %v", err)
	}
	if cut != nil && (cut.Removed != 0 || !errors.Is(cut, context.Canceled)) {
		t.Fatalf("a removal whose context ended says %v", cut)
	}
}

// A feature deleted and created again at once, however quickly, is
// created after the one deleted: its lists are others in the change feed.
func testRecreateAtOnce(t *testing.T, h *harness) {
	f := h.feature("f", "", day)
	for range 5 {
		if ok, err := h.s.DeleteFeature(h.ctx, f.EntityType, f.Name, f.Version); err != nil || !ok {
			t.Fatalf("DeleteFeature = %v, %v", ok, err)
		}
		g, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: f.EntityType, Name: f.Name, ValueType: f.ValueType, TTL: f.TTL})
		if err != nil {
			t.Fatal(err)
		}
		if !g.CreatedAt.After(f.CreatedAt) || h.list(&g, "u").ID() == h.list(f, "u").ID() {
			t.Fatalf("created again at %v, the deleted one at %v", g.CreatedAt, f.CreatedAt)
		}
		f = &g
	}
}

// Reads and writes of a context that has ended fail with its error, and
// write nothing: no items, and for a live feature no record.
func testEndedContext(t *testing.T, h *harness) {
	l := h.list(h.feature("f", "", day), "u1")
	h.tenItems(l)
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	if _, err := h.s.Items(ctx, l, store.Range{Limit: 5}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a page: %v", err)
	}
	if _, err := h.s.Count(ctx, l, store.Window{}, 1000); !errors.Is(err, context.Canceled) {
		t.Fatalf("a count: %v", err)
	}
	if _, err := h.s.AddItems(ctx, l, []store.NewItem{item(time.Now(), "late")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("an add: %v", err)
	}
	equal(t, "found late", h.find(l, 0, "late"), []string{""})
	live := h.list(h.live(h.feature("live", "", day)), "u1")
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.s.AddItems(ctx, live, []store.NewItem{item(time.Now(), "late")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("an add to a live feature: %v", err)
	}
	h.add(live, item(time.Now(), "marker"))
	got, _ := h.readFeed(head, func(id store.ListID) bool { return id == live.ID() }, "marker")
	equal(t, "records after an add whose context ended", values(got), []string{"marker"})
}

// readFeed reads the feed from `from` until a record holding marker has
// come, and returns the records read and the position reached.
func (h *harness) readFeed(from store.Position, watched func(store.ListID) bool, marker string) ([]store.Change, store.Position) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	var got []store.Change
	at := from
	for {
		changes, reached, err := h.s.ReadFeed(ctx, at, watched, 1<<20)
		if err != nil {
			h.t.Fatalf("ReadFeed after %v (read so far: %v): %v", at, values(got), err)
		}
		if reached.Less(at) {
			h.t.Fatalf("ReadFeed went back from %v to %v", at, reached)
		}
		for _, c := range changes {
			if !at.Behind(c.Record) {
				h.t.Fatalf("ReadFeed after %v gave %v, at or before it", at, c.Record)
			}
		}
		got, at = append(got, changes...), reached
		for _, c := range changes {
			for _, it := range c.Items {
				if string(it.Value) == marker {
					return got, at
				}
			}
		}
		if err := h.s.WaitFeed(ctx, at); err != nil {
			h.t.Fatalf("no %q within 30 s; read %v: %v", marker, values(got), err)
		}
	}
}

// values is each record's values, joined by commas.
func values(changes []store.Change) []string {
	var out []string
	for _, c := range changes {
		var vs []string
		for _, it := range c.Items {
			vs = append(vs, string(it.Value))
		}
		out = append(out, strings.Join(vs, ","))
	}
	return out
}

// The feed gives, after its head, each add to a list watched once, in the
// order the adds were acknowledged, whatever their items' timestamps, all
// of an add's items oldest first even when the cap keeps fewer; it gives
// no add of a list not watched, and no add from before its head.
func testFeed(t *testing.T, h *harness) {
	f := h.live(h.feature("feed", "", time.Hour))
	watched, other, capped := h.list(f, "watched"), h.list(f, "other"), h.list(h.live(h.capped(2)), "capped")
	now := time.Now()
	h.add(watched, item(now, "before the head"))
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.s.CheckPosition(h.ctx, head); err != nil {
		t.Fatalf("the head is not a position the feed holds: %v", err)
	}
	var askedOther atomic.Bool
	want := func(l store.ListID) bool {
		if l == other.ID() {
			askedOther.Store(true)
			return false
		}
		return l == watched.ID() || l == capped.ID()
	}
	h.add(other, item(now, "not watched"))
	h.add(watched, item(now.Add(30*time.Minute), "ahead"), item(now.Add(-59*time.Minute), "old"))
	h.add(capped, item(now, "a"), item(now.Add(time.Millisecond), "b"), item(now.Add(2*time.Millisecond), "c"))
	h.add(watched, item(now, "marker 1"))
	got, at := h.readFeed(head, want, "marker 1")
	equal(t, "records", values(got), []string{"old,ahead", "a,b,c", "marker 1"})
	equal(t, "lists", []store.ListID{got[0].List, got[1].List, got[2].List}, []store.ListID{watched.ID(), capped.ID(), watched.ID()})
	if !askedOther.Load() {
		t.Fatal("the add to a list not watched was never weighed")
	}
	for i := 1; i < len(got); i++ {
		if got[i].Record <= got[i-1].Record {
			t.Fatalf("records out of order: %q then %q", got[i-1].Record, got[i].Record)
		}
	}
	h.add(watched, item(now, "marker 2"))
	more, _ := h.readFeed(at, want, "marker 2")
	equal(t, "after the position reached", values(more), []string{"marker 2"})
	equal(t, "capped list", h.values(capped), []string{"c", "b"})
}

// ListFeed gives one list's records after a position up to another, in
// the feed's order: from the middle of a record, the whole record (the
// reader skips what it has); a position is a place to resume from, and
// says when its record was recorded.
func testListFeed(t *testing.T, h *harness) {
	f := h.live(h.feature("feed", "", time.Hour))
	l, other := h.list(f, "resumed"), h.list(f, "other")
	now := time.Now()
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	h.add(l, item(now, "x1"), item(now.Add(time.Second), "x2"))
	h.add(other, item(now, "o"))
	h.add(l, item(now.Add(-time.Hour+time.Minute), "y"))
	h.add(l, item(now, "end"))
	all, end := h.readFeed(head, func(id store.ListID) bool { return id == l.ID() }, "end")
	equal(t, "read", values(all), []string{"x1,x2", "y", "end"})
	read := func(after, upTo store.Position) []string {
		t.Helper()
		var got []store.Change
		for at := after; at.Less(upTo); {
			changes, reached, _, err := h.s.ListFeed(h.ctx, l, at, upTo, 10)
			if err != nil {
				t.Fatalf("ListFeed: %v", err)
			}
			if !at.Less(reached) {
				t.Fatalf("ListFeed after %v stayed at %v", at, reached)
			}
			got, at = append(got, changes...), reached
		}
		return values(got)
	}
	equal(t, "from the head", read(head, end), []string{"x1,x2", "y", "end"})
	equal(t, "after x1", read(all[0].After(0), end), []string{"x1,x2", "y", "end"})
	equal(t, "after x2, the last of its record", read(all[0].After(1), end), []string{"x1,x2", "y", "end"})
	equal(t, "after y, up to y", read(all[1].After(0), all[1].After(0)), []string(nil))
	equal(t, "up to y", read(head, all[1].After(0)), []string{"x1,x2", "y"})
	for _, p := range []store.Position{all[0].After(1), end} {
		if err := h.s.CheckPosition(h.ctx, p); err != nil {
			t.Fatalf("CheckPosition(%v) = %v", p, err)
		}
		back, err := store.ParsePosition(p.String())
		if err != nil || back != p {
			t.Fatalf("ParsePosition(%q) = %v, %v; want %v", p.String(), back, err, p)
		}
	}
	foreign := store.Position{Record: "z" + strings.Repeat("\x01", 16), Item: 3}
	if err := h.s.CheckPosition(h.ctx, foreign); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("CheckPosition of another store's position = %v, want PositionExpired", err)
	}
	for _, c := range all {
		if at, ok := h.s.PositionTime(c.After(0)); !ok || at.Sub(c.At).Abs() > time.Millisecond {
			t.Fatalf("PositionTime of a record of %v = %v, %v", c.At, at, ok)
		}
	}
	if _, ok := h.s.PositionTime(foreign); ok {
		t.Fatal("PositionTime of another store's position: known")
	}
}

// A feature is created live or not, as asked (not by default), and made
// live or not; made live, it says when, and made live again after that,
// when again. Only adds to a live feature are recorded: an add to one
// that is not live leaves no record in the feed, and one to it once it is
// live does. Created again, a feature is live as asked, since then.
func testLiveFlag(t *testing.T, h *harness) {
	quiet := h.feature("quiet", "", time.Hour)
	equal(t, "live by default", quiet.Live, false)
	born, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: "born_live", ValueType: store.String, TTL: time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "created live", born.Live, true)
	equal(t, "created live: live since its creation", born.LiveSince.IsZero(), true)
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	q, b := h.list(quiet, "u"), h.list(&born, "u")
	h.add(q, item(now, "not recorded"))
	h.add(b, item(now, "born 1"))
	watched := func(id store.ListID) bool { return id == q.ID() || id == b.ID() }
	got, _ := h.readFeed(head, watched, "born 1")
	equal(t, "records after adds to a feature not live and to one live", values(got), []string{"born 1"})
	equal(t, "the add not recorded is in the list", h.values(q), []string{"not recorded"})

	before := time.Now().Add(-time.Second)
	made, err := h.s.SetFeatureLive(h.ctx, quiet.EntityType, quiet.Name, quiet.Version, true)
	if err != nil {
		t.Fatal(err)
	}
	if !made.Live || made.LiveSince.Before(before) || made.LiveSince.After(time.Now().Add(time.Second)) {
		t.Fatalf("made live: live %v since %v", made.Live, made.LiveSince)
	}
	again, err := h.s.SetFeatureLive(h.ctx, quiet.EntityType, quiet.Name, quiet.Version, true)
	if err != nil || !again.LiveSince.Equal(made.LiveSince) {
		t.Fatalf("made live twice: since %v, %v; want %v", again.LiveSince, err, made.LiveSince)
	}
	fs, err := h.s.Features(h.ctx, h.entityType)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Name == "quiet" && (!f.Live || !f.LiveSince.Equal(made.LiveSince)) {
			t.Fatalf("listed: live %v since %v; want since %v", f.Live, f.LiveSince, made.LiveSince)
		}
	}
	q = h.list(&made, "u")
	head, err = store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	h.add(q, item(now, "recorded"))
	got, _ = h.readFeed(head, watched, "recorded")
	equal(t, "records once live", values(got), []string{"recorded"})

	off, err := h.s.SetFeatureLive(h.ctx, born.EntityType, born.Name, born.Version, false)
	if err != nil || off.Live || !off.LiveSince.IsZero() {
		t.Fatalf("made not live: live %v since %v, %v", off.Live, off.LiveSince, err)
	}
	// Made not live and live again, at once and again: each time later.
	since := made.LiveSince
	for range 3 {
		if off, err := h.s.SetFeatureLive(h.ctx, made.EntityType, made.Name, made.Version, false); err != nil || off.Live || !off.LiveSince.Equal(since) {
			t.Fatalf("made not live: live %v since %v, %v; want since %v kept", off.Live, off.LiveSince, err, since)
		}
		on, err := h.s.SetFeatureLive(h.ctx, made.EntityType, made.Name, made.Version, true)
		if err != nil || !on.Live || !on.LiveSince.After(since) {
			t.Fatalf("made live again: live %v since %v, %v; want after %v", on.Live, on.LiveSince, err, since)
		}
		since = on.LiveSince
	}
	made.LiveSince = since
	q = h.list(&made, "u")
	head, err = store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	h.add(h.list(&off, "u"), item(now, "no longer recorded"))
	h.add(q, item(now, "marker"))
	got, _ = h.readFeed(head, watched, "marker")
	equal(t, "records once not live", values(got), []string{"marker"})

	if _, err := h.s.SetFeatureLive(h.ctx, h.entityType, "missing", "", true); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("SetFeatureLive of a missing feature: %v, want NotFound", err)
	}
	if ok, err := h.s.DeleteFeature(h.ctx, h.entityType, "quiet", ""); err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	if _, err := h.s.SetFeatureLive(h.ctx, h.entityType, "quiet", "", false); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("SetFeatureLive of a deleted feature: %v, want NotFound", err)
	}
	back, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: "quiet", ValueType: store.String, TTL: time.Hour})
	if err != nil || back.Live || !back.LiveSince.IsZero() {
		t.Fatalf("created again not live: live %v since %v, %v", back.Live, back.LiveSince, err)
	}
	fs, err = h.s.Features(h.ctx, h.entityType)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Name == "quiet" && (f.Live || !f.LiveSince.IsZero()) {
			t.Fatalf("created again, listed: live %v since %v", f.Live, f.LiveSince)
		}
	}
}

// LiveWait says how long a subscription to a feature made live waits:
// the fleet's wait on a store that many gateways share, or 0 on one whose
// adds are recorded from the moment SetFeatureLive returns, even an add
// made with the feature as it was before (a snapshot that has not seen
// the change), which such a store proves here.
func testLiveWait(t *testing.T, h *harness) {
	const fleet = 65 * time.Second
	stale := h.feature("stale", "", time.Hour)
	if _, err := h.s.SetFeatureLive(h.ctx, stale.EntityType, stale.Name, stale.Version, true); err != nil {
		t.Fatal(err)
	}
	switch w := h.s.LiveWait(fleet); w {
	case fleet:
		return // subscriptions wait it out (CheckLiveSince): nothing more to prove
	case 0:
	default:
		t.Fatalf("LiveWait(%v) = %v, want %v or 0", fleet, w, fleet)
	}
	marker, err := h.s.CreateFeature(h.ctx, store.Feature{EntityType: h.entityType, Name: "marker", ValueType: store.String, TTL: time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, m := h.list(stale, "u"), h.list(&marker, "u")
	h.add(s, item(now, "from a stale snapshot"))
	h.add(m, item(now, "marker"))
	got, _ := h.readFeed(head, func(id store.ListID) bool { return id == s.ID() || id == m.ID() }, "marker")
	equal(t, "records after an add given the feature as it was before it was made live", values(got), []string{"from a stale snapshot", "marker"})
}

// A scan of more rows than a store reads in its first stretch (256 rows
// embedded, a 1,000-row page on a cluster) reads the rest only in its
// turn, and one waiting for its turn ends with its context; a short scan
// never waits.
func testLongScansTakeTurns(t *testing.T, h *harness) {
	taker, ok := h.s.(TurnTaker)
	if !ok {
		t.Fatalf("%T cannot take its turns (TurnTaker)", h.s)
	}
	f := h.feature("f", "", time.Hour)
	long, short := h.list(f, "long"), h.list(f, "short")
	now := time.Now()
	for _, l := range []struct {
		list store.List
		n    int
	}{{long, 1500}, {short, 10}} {
		items := make([]store.NewItem, l.n)
		for i := range items {
			items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: []byte(fmt.Sprint(i))}
		}
		for start := 0; start < l.n; start += 500 {
			h.add(l.list, items[start:min(start+500, l.n)]...)
		}
	}
	release := taker.TakeTurns()
	if n, err := h.s.Count(h.ctx, short, store.Window{}, 100_000); err != nil || n != 10 {
		t.Fatalf("count of 10 items while the turns are taken = %d, %v", n, err)
	}
	// Without turns it would count in a moment; with them it waits out its
	// deadline.
	waiting, cancel := context.WithTimeout(h.ctx, 500*time.Millisecond)
	defer cancel()
	if n, err := h.s.Count(waiting, long, store.Window{}, 100_000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("count of 1,500 items while the turns are taken = %d, %v; want it to wait out its deadline", n, err)
	}
	release()
	if n, err := h.s.Count(h.ctx, long, store.Window{}, 100_000); err != nil || n != 1500 {
		t.Fatalf("count of 1,500 items in its turn = %d, %v", n, err)
	}
}
