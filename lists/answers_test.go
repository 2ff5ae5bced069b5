package lists

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/pool"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// heldItems holds each page read until the test lets it go, saying when
// one starts.
type heldItems struct {
	store.Store
	started, release chan struct{}
}

func (s heldItems) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	s.started <- struct{}{}
	<-s.release
	return s.Store.Items(ctx, l, r)
}

// A page reserves, before it is read, twice its limit times what an item
// of its feature may hold (--max-value-bytes before any page of it was
// read, then the largest item read), keeps twice what it holds once read,
// and the answer holds what it writes (Settle) until it is written
// (Answered).
func TestPagesReserveWhatTheyMayHold(t *testing.T) {
	e, err := embedded.Open(embedded.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s := heldItems{Store: e, started: make(chan struct{}), release: make(chan struct{})}
	ctx := context.Background()
	catalog, err := features.New(ctx, s, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	answers := pool.New(64<<20, 64<<20)
	svc, err := New(Config{Store: s, Catalog: catalog, Loader: DefaultLoaderConfig, Meter: noop.NewMeterProvider().Meter(""), Answers: answers,
		Limits: Limits{MaxListLimit: 1000, MaxEntities: 1000, MaxResponseBytes: 32 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{EntityType: "user", EntityID: "u1", Feature: "history"}
	if _, err := svc.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "history", ValueType: store.String, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	items := make([]NewItem, 10)
	for i := range items {
		items[i] = NewItem{Value: values.Value{Raw: fmt.Sprint("story", i)}} // 6 bytes
	}
	if _, err := svc.Add(ctx, ref, items); err != nil {
		t.Fatal(err)
	}
	read := func(limit int) (reserved, kept int64) {
		t.Helper()
		rctx := WithReads(ctx, new(Reads))
		SetCaller(rctx, "a")
		done := make(chan error)
		go func() {
			_, err := svc.Page(rctx, PageQuery{Ref: ref, Limit: &limit})
			done <- err
		}()
		<-s.started
		reserved = answers.Used()
		s.release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		kept = answers.Used()
		if err := svc.Settle(rctx, 100); err != nil || answers.Used() != 100 {
			t.Fatalf("settled to 100: %d held, %v", answers.Used(), err)
		}
		Answered(rctx)
		if answers.Used() != 0 {
			t.Fatalf("%d held once answered", answers.Used())
		}
		return reserved, kept
	}
	item := int64(keys.ItemKeyLen + 6 + itemOverhead)
	if r, k := read(100); r != 2*100*int64(store.DefaultLimits.MaxValueBytes+keys.ItemKeyLen+itemOverhead) || k != 2*10*item {
		t.Fatalf("the feature's first page: %d reserved, %d kept; want %d items of --max-value-bytes, then 10 of %d bytes, twice", r, k, 100, item)
	}
	if r, k := read(100); r != 2*100*item || k != 2*10*item {
		t.Fatalf("its next page: %d reserved, %d kept; want 100 items of %d bytes, then 10, twice", r, k, item)
	}

	// A caller at its share waits for room until its deadline, then is
	// refused THROTTLED.
	other, err := answers.Take("a", answers.Share())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	rctx, cancel := context.WithTimeout(WithReads(ctx, new(Reads)), 50*time.Millisecond)
	defer cancel()
	SetCaller(rctx, "a")
	limit := 10
	if _, err := svc.Page(rctx, PageQuery{Ref: ref, Limit: &limit}); !errors.Is(err, ErrAnswersShare) || !errors.Is(err, errkind.Throttled) {
		t.Fatalf("a page of a caller at its share: %v", err)
	}
}
