package cql_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
)

// A scan of more than one page reads its pages after the first only in
// its turn, and one waiting for its turn ends with its context; a scan of
// one page never waits.
func TestLongScansTakeTurns(t *testing.T) {
	s := cqltest.Open(t, cqltest.Config(t))
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: fmt.Sprintf("turns%d", time.Now().UnixNano()%1e9), Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	long, short := store.List{Feature: &f, EntityID: "long"}, store.List{Feature: &f, EntityID: "short"}
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
			if _, err := s.AddItems(ctx, l.list, items[start:min(start+500, l.n)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	release := s.TakeTurns()
	if n, err := s.Count(ctx, short, store.Window{}, 100_000); err != nil || n != 10 {
		t.Fatalf("count of 10 items while the turns are taken = %d, %v", n, err)
	}
	// Without turns it would count in a moment; with them it waits out its
	// deadline.
	waiting, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if n, err := s.Count(waiting, long, store.Window{}, 100_000); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("count of 1,500 items while the turns are taken = %d, %v; want it to wait out its deadline", n, err)
	}
	release()
	if n, err := s.Count(ctx, long, store.Window{}, 100_000); err != nil || n != 1500 {
		t.Fatalf("count of 1,500 items in its turn = %d, %v", n, err)
	}
}
