package embedded_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// The reads that look at keys alone, over lists of small and of large
// values: what they cost should not follow what the values weigh. Each
// looks at every key of a list of benchItems items; ns/key is what one key
// costs.

const benchItems = 10_000

// benchList makes a store with a list of benchItems items of size random
// bytes, 26 values over and over, compacted to tables as a list long
// written is.
func benchList(b *testing.B, size int) (*embedded.Store, store.List) {
	b.Helper()
	s := open(b, b.TempDir(), nil)
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.Bytes, TTL: 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	values := make([][]byte, 26)
	for i := range values {
		values[i] = make([]byte, size)
		rand.Read(values[i])
	}
	now := time.Now()
	var items []store.NewItem
	for i := range benchItems {
		items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: values[i%26]})
		if len(items) == 100 || i == benchItems-1 {
			if _, err := s.AddItems(ctx, l, items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
	}
	if err := s.Compact(); err != nil {
		b.Fatal(err)
	}
	return s, l
}

func BenchmarkKeyOnlyReads(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{8, 32 << 10} {
		s, l := benchList(b, size)
		reads := []struct {
			name string
			read func() error
		}{
			{"count", func() error {
				n, err := s.Count(ctx, l, store.Window{}, 100_000)
				if err == nil && n != benchItems {
					err = fmt.Errorf("count %d", n)
				}
				return err
			}},
			{"histogram24", func() error {
				// The last day's 24 hours: the list's items are in the last.
				now := time.Now()
				day := store.Buckets{Window: store.Window{MinTimestamp: now.Add(-24*time.Hour + 1).UnixNano(), MaxTimestamp: now.UnixNano()}, Width: int64(time.Hour)}
				counts, err := s.Histogram(ctx, l, day, 100_000)
				if err == nil && (len(counts) != 24 || counts[23] != benchItems) {
					err = fmt.Errorf("histogram %v", counts)
				}
				return err
			}},
			{"search", func() error {
				_, err := s.Find(ctx, l, [][]byte{[]byte("absent")}, 0, 100_000)
				return err
			}},
			{"distinctPage", func() error {
				// 26 values: the page looks at every key to fill its 30.
				_, err := s.Items(ctx, l, store.Range{Limit: 30, Distinct: true, MaxScan: benchItems})
				return err
			}},
			{"countPastMaxCount", func() error {
				_, err := s.Count(ctx, l, store.Window{}, benchItems-1)
				if !errors.Is(err, store.ErrTooManyRows) {
					return fmt.Errorf("count past its bound: %v", err)
				}
				return nil
			}},
		}
		for _, r := range reads {
			b.Run(fmt.Sprintf("%s/value=%dB", r.name, size), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := r.read(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchItems, "ns/key")
			})
		}
	}
}
