package lists

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// The loader's batch function: n lists of 10 items, each its own read.
func BenchmarkLoaderBatch(b *testing.B) {
	s, err := embedded.Open(embedded.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(Config{Store: s, Loader: DefaultLoaderConfig, Meter: noop.NewMeterProvider().Meter("")})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 10, 100} {
		var keys []readKey
		for i := range n {
			id := fmt.Sprint("u", i)
			items := make([]store.NewItem, 10)
			for j := range items {
				items[j] = store.NewItem{Timestamp: time.Now().UnixNano() - int64(j), Value: fmt.Appendf(nil, "story%d", j)}
			}
			if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: id}, items); err != nil {
				b.Fatal(err)
			}
			keys = append(keys, readKey{feature: &f, entityID: id, r: store.Range{Limit: 10}})
		}
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range svc.loader.batch(ctx, keys) {
					if r.Error != nil || len(r.Data.page.Items) != 10 {
						b.Fatalf("%+v", r)
					}
				}
			}
		})
	}
}
