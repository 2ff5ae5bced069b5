package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// exported is what an export yielded: each item by feature key, entity id
// and item key.
type exported map[string]store.ExportedItem

func exportID(featureKey, entityID, itemKey string) string {
	return featureKey + "\x00" + entityID + "\x00" + itemKey
}

// export exports features, checking what every export must hold: only
// those features' items, each once, in runs of one list of at most
// store.ExportRun items, a list's items newest first.
func (h *harness) export(features ...*store.Feature) exported {
	h.t.Helper()
	ex, ok := h.s.(store.Exporter)
	if !ok {
		h.t.Fatalf("%T does not implement store.Exporter", h.s)
	}
	asked := map[string]bool{}
	for _, f := range features {
		asked[f.Key()] = true
	}
	got := exported{}
	last := map[string]string{} // the last item key of each list
	err := ex.Export(h.ctx, features, func(run store.ListItems) error {
		fk := run.Feature.Key()
		if !asked[fk] {
			return fmt.Errorf("a run of feature %s, not asked for", fk)
		}
		if len(run.Items) == 0 || len(run.Items) > store.ExportRun {
			return fmt.Errorf("a run of %d items", len(run.Items))
		}
		list := fk + "\x00" + run.EntityID
		for _, it := range run.Items {
			id := exportID(fk, run.EntityID, it.Key)
			if _, dup := got[id]; dup {
				return fmt.Errorf("item %s of list %s yielded twice", it.Key, run.EntityID)
			}
			if prev, ok := last[list]; ok && it.Key >= prev {
				return fmt.Errorf("list %s: item %s after %s, not newest first", run.EntityID, it.Key, prev)
			}
			last[list] = it.Key
			got[id] = it
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("Export: %v", err)
	}
	return got
}

func testExport(t *testing.T, h *harness) {
	now := time.Now()
	f := h.feature("f", "", day)
	// Same entity type and name, another version: its key starts with f's.
	other := h.feature("f", "v2", day)
	capped := h.capped(3)
	short := h.feature("short", "", 2*time.Second)

	var want []string // ids of the items an export must yield
	check := map[string]store.NewItem{}
	// A list longer than a run, in several adds, and a short one.
	long := h.list(f, "u1")
	for start := 0; start < 2*store.ExportRun+10; start += 100 {
		var items []store.NewItem
		for i := start; i < min(start+100, 2*store.ExportRun+10); i++ {
			items = append(items, item(now.Add(-time.Duration(i)*time.Millisecond), fmt.Sprint("v", i)))
		}
		h.add(long, items...)
	}
	h.add(h.list(f, "u2 ü"), item(now, "only"), item(now.Add(-time.Second), "only"))
	for _, l := range []store.List{long, h.list(f, "u2 ü")} {
		for _, it := range h.page(l, store.Range{}).Items {
			id := exportID(f.Key(), l.EntityID, it.Key)
			want = append(want, id)
			check[id] = store.NewItem{Timestamp: it.Timestamp, Value: it.Value}
		}
	}
	h.add(h.list(other, "u1"), item(now, "of v2"))
	// A capped list yields the items a read shows: its newest three.
	cl := h.list(capped, "u1")
	for i := range 10 {
		h.add(cl, item(now.Add(-time.Duration(i)*time.Second), fmt.Sprint("c", i)))
	}
	for _, it := range h.page(cl, store.Range{}).Items {
		want = append(want, exportID(capped.Key(), "u1", it.Key))
	}
	equal(t, "capped list's items read", len(want), 2*store.ExportRun+10+2+3)
	// An expired item is not yielded: wait until a read no longer shows it.
	sl := h.list(short, "u1")
	h.add(sl, item(now.Add(-1500*time.Millisecond), "expiring"))
	for deadline := time.Now().Add(10 * time.Second); len(h.values(sl)) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the short-lived item did not expire within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	got := h.export(f, capped, short)
	for _, id := range want {
		it, ok := got[id]
		if !ok {
			t.Fatalf("item %q not exported", id)
		}
		if c, ok := check[id]; ok {
			if it.Timestamp != c.Timestamp || string(it.Value) != string(c.Value) {
				t.Fatalf("item %q exported as %d %q, want %d %q", id, it.Timestamp, it.Value, c.Timestamp, c.Value)
			}
			wantExpiry := time.Unix(0, it.Timestamp).Add(day).Unix()
			if d := it.Expiry - wantExpiry; d < -2 || d > 2 {
				t.Fatalf("item %q expires at %d, want %d ± 2 s", id, it.Expiry, wantExpiry)
			}
		}
		delete(got, id)
	}
	for id := range got {
		t.Fatalf("item %q exported, but a read does not show it", id)
	}

	// The other version alone yields its one item.
	got = h.export(other)
	equal(t, "items of the other version", len(got), 1)
	if _, ok := got[exportID(other.Key(), "u1", keys.ItemKey(now.UnixNano(), []byte("of v2")))]; !ok {
		t.Fatalf("the other version's item not exported: %v", got)
	}

	// A feature created again yields none of the deleted one's items.
	r := h.feature("r", "", day)
	h.add(h.list(r, "u1"), item(now.Add(-time.Second), "old"))
	if ok, err := h.s.DeleteFeature(h.ctx, r.EntityType, r.Name, r.Version); err != nil || !ok {
		t.Fatalf("DeleteFeature = %v, %v", ok, err)
	}
	r2, err := h.s.CreateFeature(h.ctx, *r)
	if err != nil {
		t.Fatal(err)
	}
	h.add(h.list(&r2, "u1"), item(now, "new"))
	got = h.export(&r2)
	if _, ok := got[exportID(r2.Key(), "u1", keys.ItemKey(now.UnixNano(), []byte("new")))]; !ok || len(got) != 1 {
		t.Fatalf("feature created again exported %v; want its one new item", got)
	}

	// fn's error ends the export and is returned.
	stop := errors.New("stop")
	calls := 0
	err = h.s.(store.Exporter).Export(h.ctx, []*store.Feature{f}, func(store.ListItems) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Export whose fn fails = %v after %d calls; want its error after 1", err, calls)
	}
}
