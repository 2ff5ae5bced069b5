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
// (Answered); an operation's first 64 KiB are not taken of the pool.
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
	// What the pool holds while the page is read, once it is, and once
	// the answer is settled to 100 bytes.
	read := func(limit int) (reserved, kept, settled int64) {
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
		if err := svc.Settle(rctx, 100); err != nil {
			t.Fatal(err)
		}
		settled = answers.Used()
		Answered(rctx)
		if answers.Used() != 0 {
			t.Fatalf("%d held once answered", answers.Used())
		}
		return reserved, kept, settled
	}
	item := int64(keys.ItemKeyLen + 6 + itemOverhead)
	if r, k, s := read(100); r != 2*100*int64(store.DefaultLimits.MaxValueBytes+keys.ItemKeyLen+itemOverhead) || k != 2*10*item || s != 100 {
		t.Fatalf("the feature's first page: %d reserved, %d kept, %d settled; want 100 items of --max-value-bytes, then 10 of %d bytes, twice, then 100", r, k, s, item)
	}
	if r, k, s := read(1000); r != 2*1000*item || k != 2*10*item || s != 100 {
		t.Fatalf("its next page: %d reserved, %d kept, %d settled; want 1,000 items of %d bytes, then 10, twice, then 100", r, k, s, item)
	}
	// An operation's first 64 KiB are not taken of the pool.
	if r, k, s := read(100); r != 0 || k != 0 || s != 0 {
		t.Fatalf("a page that may hold %d bytes: %d reserved, %d kept, %d settled; want none", 2*100*item, r, k, s)
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
	limit := 1000 // past what is not taken of the pool
	if _, err := svc.Page(rctx, PageQuery{Ref: ref, Limit: &limit}); !errors.Is(err, ErrAnswersShare) || !errors.Is(err, errkind.Throttled) {
		t.Fatalf("a page of a caller at its share: %v", err)
	}
}
