package load_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/load"
	"github.com/listgate/listgate/store"
)

// A load through a gateway sends again only the lists of a batch that
// failed for a reason that passes: a gateway whose store fails the first
// add to two lists of six (UNAVAILABLE, as a node that timed out) answers
// those two null with their errors; the loader sends those two again, and
// no other, and every list ends with exactly its rows.
func TestLoadResendsOnlyTheListsThatFailed(t *testing.T) {
	s := &failFirst{Store: backends[0].open(t), fail: map[string]bool{"e1": true, "e4": true}, calls: map[string]int{}}
	f := createFeature(t, s, store.Feature{EntityType: entityType(t), Name: "history", ValueType: store.String, TTL: time.Hour})
	path, items := writeRows(t, dataio.NDJSON, f, 60, 6)
	tgt := gatewayTarget(gateway(t, s))
	sum, err := load.Run(context.Background(), load.Config{Inputs: []string{path}, Columns: dataio.DefaultColumns(),
		MaxRowBytes: dataio.DefaultMaxRowBytes, Target: tgt, Concurrency: 1})
	if err != nil || sum.Rows != 60 || sum.Bad != 0 {
		t.Fatalf("load: %+v, %v", sum, err)
	}
	checkLists(t, s.Store, f, items)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 6 {
		id := fmt.Sprint("e", i)
		want := 1
		if s.fail[id] {
			want = 2
		}
		if s.calls[id] != want {
			t.Errorf("list %s added to %d times, want %d (adds: %v)", id, s.calls[id], want, s.calls)
		}
	}
}

// failFirst is a store whose first add to each list of fail fails
// UNAVAILABLE, written nowhere.
type failFirst struct {
	store.Store
	mu    sync.Mutex
	fail  map[string]bool // entity ids
	calls map[string]int  // adds asked, by entity id
}

func (s *failFirst) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	s.mu.Lock()
	s.calls[l.EntityID]++
	first := s.calls[l.EntityID] == 1
	s.mu.Unlock()
	if first && s.fail[l.EntityID] {
		return store.AddResult{}, fmt.Errorf("%w: the node did not answer in time (test)", errkind.Unavailable)
	}
	return s.Store.AddItems(ctx, l, items)
}
