package watch

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// keptList is a list of one subscription with kept items it has not read.
func keptList(kept int) (*Hub, *list, *Subscription) {
	h := &Hub{}
	w := &list{subs: map[*Subscription]struct{}{}}
	s := &Subscription{list: w}
	w.subs[s] = struct{}{}
	for range kept {
		h.push(w, testEntry())
	}
	return h, w, s
}

var (
	testKey   = strings.Repeat("0", keys.ItemKeyLen)
	testValue = []byte(strings.Repeat("v", 100))
)

func testEntry() entry { return entry{Item: store.Item{Key: testKey, Value: testValue}} }

// BenchmarkTrim is a trim of one item read from a list that keeps a
// number of items its slowest subscription has not read: its cost, and
// what it allocates, whatever the number kept.
func BenchmarkTrim(b *testing.B) {
	for _, kept := range []int{1_000, 80_000} {
		b.Run(fmt.Sprint("kept=", kept), func(b *testing.B) {
			h, w, s := keptList(kept)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if len(w.items) == kept {
					b.StopTimer()
					for range 10_000 {
						h.push(w, testEntry())
					}
					b.StartTimer()
				}
				s.next++
				h.trim(w)
			}
		})
	}
}

// BenchmarkPushTrim is the same list as items come and its slowest
// subscription reads them: one item pushed, one read and dropped, with
// what append's growth copies.
func BenchmarkPushTrim(b *testing.B) {
	for _, kept := range []int{1_000, 80_000} {
		b.Run(fmt.Sprint("kept=", kept), func(b *testing.B) {
			h, w, s := keptList(kept)
			b.ReportAllocs()
			for b.Loop() {
				h.push(w, testEntry())
				s.next++
				h.trim(w)
			}
		})
	}
}

// A trim allocates nothing: it drops the items read from the front of the
// buffer, however many are kept behind them.
func TestTrimDoesNotAllocate(t *testing.T) {
	h, w, s := keptList(10_000)
	allocs := testing.AllocsPerRun(1000, func() {
		s.next++
		h.trim(w)
	})
	if allocs != 0 {
		t.Fatalf("a trim of one item of 10,000 allocates %v times", allocs)
	}
	if len(w.items) != 10_000-1001 || w.base != 1001 {
		t.Fatalf("%d items kept from %d, want %d from 1001", len(w.items), w.base, 10_000-1001)
	}
}

// A list whose slowest subscription stalls after reading most of a burst
// keeps an array the size of what it has not read, not of the burst.
func TestTrimLetsGoOfABurst(t *testing.T) {
	h, w, s := keptList(80_000)
	s.next = 79_990
	h.trim(w)
	if len(w.items) != 10 || cap(w.items) > 100 {
		t.Fatalf("%d items kept in an array of %d", len(w.items), cap(w.items))
	}
	s.next = w.end()
	h.trim(w)
	if len(w.items) != 0 || w.bytes != 0 || h.total != 0 {
		t.Fatalf("%d items, %d bytes (%d in all) kept once every one was read", len(w.items), w.bytes, h.total)
	}
}

// Subscriptions join a list, read and end in a random order while items
// come: the list keeps exactly the items its slowest subscription has not
// read, its base is where that one reads next, and atBase counts the
// subscriptions there.
func TestListKeepsOnlyUnread(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, seed))
		h := &Hub{cfg: Config{MaxLists: 1}, lists: map[listName]*list{}}
		if err := h.instrument(metricnoop.NewMeterProvider().Meter("")); err != nil {
			t.Fatal(err)
		}
		var subs []*Subscription
		for step := range 2000 {
			switch r := rng.IntN(10); {
			case r < 2 || len(subs) == 0:
				s := &Subscription{hub: h, notify: make(chan struct{}, 1), done: make(chan struct{}), begun: make(chan struct{})}
				if err := h.join(context.Background(), s, store.List{Feature: &store.Feature{}, EntityID: "e"}, store.Position{}, true); err != nil {
					t.Fatal(err)
				}
				subs = append(subs, s)
			case r < 4:
				h.push(subs[0].list, testEntry())
			case r < 5:
				i := rng.IntN(len(subs))
				h.end(subs[i], nil, nil)
				subs = append(subs[:i], subs[i+1:]...)
			default:
				if s := subs[rng.IntN(len(subs))]; s.next < s.list.end() {
					h.read(s)
				}
			}
			if len(subs) == 0 {
				if len(h.lists) != 0 || h.total != 0 {
					t.Fatalf("seed %d, step %d: %d lists and %d bytes kept with no subscription", seed, step, len(h.lists), h.total)
				}
				continue
			}
			w := subs[0].list
			low, at := w.end(), 0
			for _, s := range subs {
				if s.next < low {
					low, at = s.next, 0
				}
				if s.next == low {
					at++
				}
			}
			var bytes int64
			for _, e := range w.items {
				bytes += entryBytes(e.Item)
			}
			if w.base != low || w.atBase != at || w.bytes != bytes || h.total != bytes || w.cumBefore(w.end())-w.cumBase != bytes {
				t.Fatalf("seed %d, step %d: base %d (atBase %d), %d bytes (%d in all); want base %d (%d there), %d bytes",
					seed, step, w.base, w.atBase, w.bytes, h.total, low, at, bytes)
			}
		}
	}
}
