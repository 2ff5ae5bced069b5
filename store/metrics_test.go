package store

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// quickAdds is a store whose adds return at once: what a benchmark of it
// measures is the wrapper around it.
type quickAdds struct{ Store }

func (quickAdds) AddItems(_ context.Context, _ List, items []NewItem) (AddResult, error) {
	return AddResult{Added: len(items)}, nil
}

// What Instrument adds to every add, against the bare store in the same
// run, one add at a time and from every core at once.
func BenchmarkInstrumentedAdd(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	in, err := Instrument(quickAdds{}, mp)
	if err != nil {
		b.Fatal(err)
	}
	f := &Feature{EntityType: "user", Name: "f", ValueType: String, TTL: time.Hour}
	l := List{Feature: f, EntityID: "u1"}
	items := []NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("v")}}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		s    Store
	}{{"bare", quickAdds{}}, {"instrumented", in}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.s.AddItems(ctx, l, items)
			}
		})
		b.Run(c.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.s.AddItems(ctx, l, items)
				}
			})
		})
	}
}

// What knowing the writes in flight costs an add by itself: a slot taken
// and given back.
func BenchmarkWritesInFlight(b *testing.B) {
	start := time.Now() // the wrapper reads the clock anyway, to time the add
	w := newWritesInFlight(start)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.end(w.begin(start))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w.end(w.begin(start))
			}
		})
	})
}

// The oldest write under way is known while it runs, whatever began and
// ended around it, and forgotten once it ends, among more writes at once
// than there are slots too (the overflow).
func TestWritesInFlight(t *testing.T) {
	t0 := time.Now()
	w := newWritesInFlight(t0)
	now := t0.Add(time.Hour)
	if got := w.oldest(now); got != 0 {
		t.Fatalf("none under way: oldest %v", got)
	}
	first := w.begin(t0.Add(time.Second))
	second := w.begin(t0.Add(2 * time.Second))
	if got := w.oldest(now); got != time.Hour-time.Second {
		t.Fatalf("two under way: oldest %v, want 59m59s", got)
	}
	w.end(first)
	if got := w.oldest(now); got != time.Hour-2*time.Second {
		t.Fatalf("the first ended: oldest %v, want 59m58s", got)
	}
	w.end(second)
	var many []int
	for i := range 3 * writeSlots {
		many = append(many, w.begin(t0.Add(time.Minute+time.Duration(i)*time.Millisecond)))
	}
	if got := w.oldest(now); got != time.Hour-time.Minute {
		t.Fatalf("%d under way: oldest %v, want 59m", len(many), got)
	}
	// The oldest ends: the next is found wherever it is kept.
	w.end(many[0])
	if got := w.oldest(now); got != time.Hour-time.Minute-time.Millisecond {
		t.Fatalf("the oldest of many ended: oldest %v", got)
	}
	for _, slot := range many[1:] {
		w.end(slot)
	}
	if got := w.oldest(now); got != 0 {
		t.Fatalf("all ended: oldest %v", got)
	}
	if w.overflow.first() != 0 || len(w.overflow.starts) == 0 {
		t.Fatalf("the overflow kept %d writes; it should have kept some, and none now", len(w.overflow.starts))
	}
}

// Instrument knows a write under way through every write it wraps, until
// it returns, even by a panic.
func TestInstrumentedKnowsWritesUnderWay(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	held := &heldWrites{entered: make(chan struct{}), release: make(chan struct{})}
	in, err := Instrument(held, mp)
	if err != nil {
		t.Fatal(err)
	}
	l := List{Feature: &Feature{EntityType: "user", Name: "f", ValueType: String, TTL: time.Hour}, EntityID: "u1"}
	ctx := context.Background()
	for name, write := range map[string]func(){
		"AddItems":      func() { in.AddItems(ctx, l, nil) },
		"RemoveValues":  func() { in.RemoveValues(ctx, l, nil, Window{}, 1) },
		"RemoveAll":     func() { in.RemoveAll(ctx, l) },
		"CreateFeature": func() { in.CreateFeature(ctx, *l.Feature) },
		"DeleteFeature": func() { in.DeleteFeature(ctx, "user", "f", "") },
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { recover() }()
			write()
		}()
		<-held.entered
		if in.OldestWrite() <= 0 {
			t.Errorf("%s under way: OldestWrite %v", name, in.OldestWrite())
		}
		held.release <- struct{}{}
		<-done
		if got := in.OldestWrite(); got != 0 {
			t.Errorf("%s returned (by a panic): OldestWrite %v", name, got)
		}
	}
}

// heldWrites is a store each of whose writes waits to be released, then
// panics.
type heldWrites struct {
	Store
	entered, release chan struct{}
}

func (h *heldWrites) hold() {
	h.entered <- struct{}{}
	<-h.release
	panic("the write failed")
}

func (h *heldWrites) AddItems(context.Context, List, []NewItem) (AddResult, error) {
	h.hold()
	return AddResult{}, nil
}

func (h *heldWrites) RemoveValues(context.Context, List, [][]byte, Window, int) (int, error) {
	h.hold()
	return 0, nil
}

func (h *heldWrites) RemoveAll(context.Context, List) error {
	h.hold()
	return nil
}

func (h *heldWrites) CreateFeature(context.Context, Feature) (Feature, error) {
	h.hold()
	return Feature{}, nil
}

func (h *heldWrites) DeleteFeature(context.Context, string, string, string) (bool, error) {
	h.hold()
	return false, nil
}
