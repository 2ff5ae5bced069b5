package lists_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/values"
)

// countingStore counts the pages read.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	s.reads.Add(1)
	return s.Store.Items(ctx, l, r)
}

func service(t *testing.T, maxResponseBytes int) (*lists.Service, *countingStore) {
	t.Helper()
	e, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s := &countingStore{Store: e}
	ctx := context.Background()
	catalog, err := features.New(ctx, s, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := lists.New(lists.Config{Store: s, Catalog: catalog, Loader: lists.DefaultLoaderConfig, Meter: noop.NewMeterProvider().Meter(""),
		Limits: lists.Limits{MaxListLimit: 1000, MaxEntities: 1000, MaxResponseBytes: maxResponseBytes}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "history", ValueType: store.String, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return svc, s
}

func add(t *testing.T, svc *lists.Service, entityID string, n int) {
	t.Helper()
	items := make([]lists.NewItem, n)
	for i := range items {
		items[i] = lists.NewItem{Value: values.Value{Raw: fmt.Sprintf("story%03d", i)}}
	}
	if _, err := svc.Add(context.Background(), lists.Ref{EntityType: "user", EntityID: entityID, Feature: "history"}, items); err != nil {
		t.Fatal(err)
	}
}

func query(entityID string, limit int) lists.PageQuery {
	return lists.PageQuery{Ref: lists.Ref{EntityType: "user", EntityID: entityID, Feature: "history"}, Limit: &limit}
}

// The pages of one request go through its loader: equal pages, asked for
// at once, are read once; a single read gives the same page.
func TestPagesOfARequestShareItsLoader(t *testing.T) {
	svc, s := service(t, 1<<20)
	add(t, svc, "u1", 3)
	add(t, svc, "u2", 2)
	ctx := lists.WithReads(context.Background(), new(lists.Reads))
	var wg sync.WaitGroup
	pages := make([]*lists.Page, 6)
	for i := range pages {
		wg.Go(func() {
			p, err := svc.Page(ctx, query(fmt.Sprint("u", 1+i%2), 10))
			if err != nil {
				t.Error(err)
			}
			pages[i] = p
		})
	}
	wg.Wait()
	if n := s.reads.Load(); n != 2 {
		t.Errorf("%d reads for 6 pages of 2 lists, want 2", n)
	}
	for i, p := range pages {
		if want := 3 - i%2; p == nil || len(p.Items) != want {
			t.Fatalf("page %d: %+v, want %d items", i, p, want)
		}
	}
	single := lists.WithReads(context.Background(), new(lists.Reads))
	lists.SingleRead(single)
	p, err := svc.Page(single, query("u1", 10))
	if err != nil || len(p.Items) != 3 || p.Items[0].Key != pages[0].Items[0].Key {
		t.Fatalf("single read: %+v, %v", p, err)
	}
}

// Every field that shows a page is charged to the request's response,
// copies of one page too; once the budget is spent, the fields that follow
// fail and read nothing.
func TestResponseBytesAreChargedPerField(t *testing.T) {
	svc, s := service(t, 1000) // a 3-item page is about 3 × (96 + 30) bytes
	add(t, svc, "u1", 3)
	add(t, svc, "u2", 3)
	ctx := lists.WithReads(context.Background(), new(lists.Reads))
	for i := range 2 {
		if _, err := svc.Page(ctx, query("u1", 10)); err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
	}
	_, err := svc.Page(ctx, query("u1", 10))
	if !errors.Is(err, errkind.Invalid) {
		t.Fatalf("third copy of a page past the budget: %v, want errkind.Invalid", err)
	}
	before := s.reads.Load()
	if _, err := svc.Page(ctx, query("u2", 10)); !errors.Is(err, errkind.Invalid) {
		t.Fatalf("another page past the budget: %v", err)
	}
	if s.reads.Load() != before {
		t.Errorf("a page was read after the response was full")
	}
	// Another request has its own budget.
	if _, err := svc.Page(lists.WithReads(context.Background(), new(lists.Reads)), query("u2", 10)); err != nil {
		t.Fatal(err)
	}
}

// Under CheckOnly, writes check their input and write nothing, and a
// feature created earlier in the check run counts for the writes after it.
func TestCheckOnlyWritesNothing(t *testing.T) {
	svc, s := service(t, 1<<20)
	ctx := lists.CheckOnly(context.Background())
	if _, err := svc.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "presented", ValueType: store.Int, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ref := lists.Ref{EntityType: "user", EntityID: "u1", Feature: "presented"}
	if _, err := svc.Add(ctx, ref, []lists.NewItem{{Value: values.Value{Raw: int64(5)}}}); err != nil {
		t.Fatalf("add to a feature the check run creates: %v", err)
	}
	if _, err := svc.Add(ctx, ref, []lists.NewItem{{Value: values.Value{Raw: "five"}}}); !errors.Is(err, errkind.Invalid) {
		t.Fatalf("a STRING into an INT feature: %v, want errkind.Invalid", err)
	}
	if _, err := svc.Add(ctx, lists.Ref{EntityType: "user", EntityID: "u1", Feature: "history"}, []lists.NewItem{{Value: values.Value{Raw: "a"}}}); err != nil {
		t.Fatal(err)
	}
	if f, err := svc.Feature(context.Background(), "user", "presented", "", lists.ShownFeature{}); err != nil || f != nil {
		t.Errorf("the check run created a feature: %v, %v", f, err)
	}
	p, err := s.Items(context.Background(), store.List{Feature: mustFeature(t, svc, "history"), EntityID: "u1"}, store.Range{Limit: 10})
	if err != nil || len(p.Items) != 0 {
		t.Errorf("the check run wrote %d items (%v)", len(p.Items), err)
	}
}

func mustFeature(t *testing.T, svc *lists.Service, name string) *store.Feature {
	t.Helper()
	f, err := svc.Feature(context.Background(), "user", name, "", lists.ShownFeature{})
	if err != nil || f == nil {
		t.Fatalf("feature %s: %v, %v", name, f, err)
	}
	return f
}
