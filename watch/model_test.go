package watch_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/watch"
)

// The model-based test of live lists: random adds (past, future and equal
// timestamps, the same item again, bursts), subscriptions (from now on,
// since a time, after a position received), clients that read slowly,
// vanish and resume, features deleted and created again, against a store
// and its hubs (two hubs on two sessions on Cassandra, as two gateways);
// every delivery is compared with a model of the contract:
//
//   - a subscription delivers the items of every add to its list after its
//     start, once, in the order of the adds, each add's items in key order;
//   - after a position: what follows the item it names; since a time: first
//     the list's items from then on, oldest first, all at its start;
//   - a position is the same for an item through every hub;
//   - TOO_SLOW names the position after the last item the client was sent,
//     and resuming from it delivers exactly the rest;
//   - a subscription to a feature deleted and created again ends NOT_FOUND;
//     an add through a gateway that has not seen it created again (on
//     Cassandra, where gateways cache features) reaches the new one's;
//   - a subscription to a feature made not live and live again ends
//     POSITION_EXPIRED (or BAD_USER_INPUT, seen while not live), and the
//     add made in between, not recorded, reaches nobody;
//   - once the feed no longer keeps what follows the hub's place (the
//     embedded store's clock moved past the retention), every
//     subscription ends POSITION_EXPIRED, as does a client resuming from
//     a place before then, and none skips an item.
//
// It runs a few seeds in `go test`; -model.seed reproduces one, and
// FuzzHubModel runs many on the embedded store.

var (
	modelSeed   = flag.Uint64("model.seed", 0, "run the model test with this seed only")
	modelRounds = flag.Int("model.rounds", 0, "rounds of the model test (default: by store)")
)

func TestHubAgainstModel(t *testing.T) {
	seeds := []uint64{uint64(time.Now().UnixNano()), 1, 2}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	for _, b := range backends(small) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			run, rounds := seeds, 30
			if b.name == "cassandra" {
				run, rounds = seeds[:1], 8 // each round waits for the feed to settle
			}
			if *modelRounds > 0 {
				rounds = *modelRounds
			}
			for _, seed := range run {
				runModel(t, b, seed, rounds)
			}
		})
	}
}

// FuzzHubModel runs the model with seeds the fuzzer picks, on the embedded
// store.
func FuzzHubModel(f *testing.F) {
	f.Add(uint64(1))
	f.Fuzz(func(t *testing.T, seed uint64) {
		runModel(t, backends(small)[0], seed, 4)
	})
}

func runModel(t *testing.T, b backend, seed uint64, rounds int) {
	t.Logf("model seed %d (-model.seed=%d reproduces it)", seed, seed)
	m := newModel(t, b, seed)
	defer m.close()
	for round := range rounds {
		for range 1 + m.rng.IntN(8) {
			m.step()
		}
		m.drain(fmt.Sprint("round ", round))
	}
	for i := range m.lists {
		m.add(i, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("the end")}})
	}
	m.drain("the end")
	t.Logf("seed %d: %d adds; %d subscriptions ended TOO_SLOW and resumed, %d resumed by a client back, %d ended NOT_FOUND, POSITION_EXPIRED or BAD_USER_INPUT; %d items caught up by since; %d toggles of live, %d adds by a stale gateway, %d subscriptions past the retention",
		seed, len(m.adds), m.slow, m.back, m.notFound, m.caughtUp, m.toggled, m.stale, m.expired)
}

// model is the contract's state, and the real hubs and subscriptions it
// is compared with.
type model struct {
	t       *testing.T
	rng     *rand.Rand
	seed    uint64
	writer  store.Store
	hubs    []*watch.Hub
	feature *store.Feature
	goneMu  sync.Mutex          // gone and liveAt are read by the hubs' tick goroutines
	gone    map[int64]bool      // CreatedAt of features deleted
	liveAt  map[int64]modelLive // by CreatedAt: whether the feature is live, since when
	prev    *store.Feature      // the feature as it was before it was created again: a stale gateway's
	offset  *atomic.Int64       // the embedded store's clock, ahead of time.Now by this (nil on Cassandra)
	retain  time.Duration       // the embedded store's --change-feed-retention
	ages    int                 // times its clock moved past the retention
	addAge  []int               // ages when each add was made
	lists   []store.List
	content []map[string]store.Item // each list's items by key, as reads show them
	adds    []modelAdd              // every add, in order
	subs    []*modelSub
	away    []*modelSub               // clients that vanished, to resume
	known   map[store.Position][2]int // positions received, and the item (add, item) each names
	names   map[[2]int]store.Position // the same, the other way
	times   []int64                   // timestamps used, to use again
	n       int                       // values made
	named   int                       // subscriptions made
	// What the run went through: subscriptions ended TOO_SLOW and
	// resumed, resumed by a client that came back, ended NOT_FOUND, and
	// items of catch-ups by since; toggles of live, adds by a stale
	// gateway, subscriptions ended because the feed passed them.
	slow, back, notFound, caughtUp int
	toggled, stale, expired        int
}

// modelLive is a feature's live state, as its gateways see it.
type modelLive struct {
	live  bool
	since time.Time
}

type modelAdd struct {
	list  store.ListID
	items []store.Item // in key order
}

// modelSub is a client's subscription: what it must receive next, in
// order, and the position after what it received.
type modelSub struct {
	name   string
	list   int
	l      store.List // of the feature as it was when it began
	listID store.ListID
	hub    int
	sub    *watch.Subscription
	cancel context.CancelFunc
	want   []want
	last   *store.Position // of the last item sent to it
	doomed bool            // its feature was deleted, or made not live: NOT_FOUND, POSITION_EXPIRED or BAD_USER_INPUT may end it
	since  *store.Position // the position its catch-up by since items share
	age    int             // ages when what it started after was added: the feed may pass it once ages grows
}

// want is an item a subscription must receive: of an add (add ≥ 0, its
// item), or of a catch-up by since (add < 0).
type want struct {
	add, item int
	it        store.Item
}

func newModel(t *testing.T, b backend, seed uint64) *model {
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, seed)), seed: seed, gone: map[int64]bool{}, liveAt: map[int64]modelLive{},
		known: map[store.Position][2]int{}, names: map[[2]int]store.Position{}}
	var stores []store.Store
	if b.name == "cassandra" {
		stores = []store.Store{b.open(t), b.open(t)} // two sessions, as two gateways
	} else {
		// Its clock, which age moves past the feed's retention.
		m.offset, m.retain = new(atomic.Int64), time.Hour
		s, err := embedded.Open(embedded.Config{Dir: t.TempDir(), Limits: small, FeedRetention: m.retain,
			Now: func() time.Time { return time.Now().Add(time.Duration(m.offset.Load())) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = []store.Store{s}
	}
	m.writer = stores[0]
	for _, s := range stores {
		hub, err := watch.New(watch.Config{Store: s, MaxLists: 100, Tick: 20 * time.Millisecond, Meter: metricnoop.NewMeterProvider().Meter(""),
			SubscriptionBytes: smallAdd, ListBytes: smallAdd, TotalBytes: 3 * smallAdd / 2, SlowAfter: 50 * time.Millisecond,
			Current: m.current})
		if err != nil {
			t.Fatal(err)
		}
		m.hubs = append(m.hubs, hub)
	}
	// Items live a day: age, which moves the embedded store's clock an
	// hour on, expires none.
	f, err := m.writer.CreateFeature(context.Background(), store.Feature{
		EntityType: fmt.Sprintf("w%d_%d", time.Now().UnixNano()%1e9, seq.Add(1)), Name: "f", ValueType: store.String, TTL: 24 * time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	m.feature = &f
	m.setLive(m.feature)
	m.setLists()
	return m
}

// current is what a gateway's catalog says of a watched list's feature,
// as lists.Service says it: deleted, not live, or live since another time.
func (m *model) current(l store.List) error {
	m.goneMu.Lock()
	defer m.goneMu.Unlock()
	created := l.Feature.CreatedAt.UnixNano()
	switch st := m.liveAt[created]; {
	case m.gone[created]:
		return fmt.Errorf("%w: deleted", errkind.NotFound)
	case !st.live:
		return fmt.Errorf("%w: not live", errkind.Invalid)
	case !st.since.Equal(l.Feature.LiveSince):
		return store.PositionExpired("made not live and live again")
	}
	return nil
}

// setLive tells the gateways' catalogs f's live state.
func (m *model) setLive(f *store.Feature) {
	m.goneMu.Lock()
	defer m.goneMu.Unlock()
	m.liveAt[f.CreatedAt.UnixNano()] = modelLive{f.Live, f.LiveSince}
}

func (m *model) setLists() {
	m.lists, m.content = nil, nil
	for i := range 3 {
		m.lists = append(m.lists, store.List{Feature: m.feature, EntityID: fmt.Sprint("e", i)})
		m.content = append(m.content, map[string]store.Item{})
	}
}

func (m *model) close() {
	for _, s := range append(m.subs, m.away...) {
		if s.cancel != nil {
			s.cancel()
		}
	}
	for _, h := range m.hubs {
		h.Close()
	}
}

func (m *model) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("seed %d: "+format, append([]any{m.seed}, args...)...)
}

// step makes one random operation.
func (m *model) step() {
	switch r := m.rng.IntN(100); {
	case r < 45:
		m.randomAdd()
	case r < 65:
		m.subscribe(m.rng.IntN(len(m.lists)))
	case r < 73:
		m.vanish()
	case r < 83:
		m.resume()
	case r < 93:
		m.readSome()
	case r < 95:
		m.recreate()
	case r < 97:
		m.toggle()
	case r < 99:
		m.staleAdd()
	default:
		m.age()
	}
}

func (m *model) timestamp() int64 {
	now := time.Now().UnixNano()
	switch r := m.rng.IntN(4); {
	case r == 0 && len(m.times) > 0:
		return m.times[m.rng.IntN(len(m.times))] // the same as another's
	case r == 1:
		return now - m.rng.Int64N(int64(time.Hour))
	case r == 2:
		return now + m.rng.Int64N(int64(time.Hour))
	}
	return now
}

func (m *model) randomAdd() {
	l := m.rng.IntN(len(m.lists))
	n := 1 + m.rng.IntN(5)
	size := m.rng.IntN(100)
	if m.rng.IntN(4) == 0 {
		n, size = 10+m.rng.IntN(11), 3000 // a burst: up to 60 KiB, past a subscription's buffer in two
	}
	var items []store.NewItem
	for range n {
		if old := m.content[l]; len(old) > 0 && m.rng.IntN(6) == 0 {
			for _, it := range old { // the same item again
				items = append(items, store.NewItem{Timestamp: it.Timestamp, Value: it.Value})
				break
			}
			continue
		}
		m.n++
		ts := m.timestamp()
		m.times = append(m.times, ts)
		items = append(items, store.NewItem{Timestamp: ts, Value: []byte(fmt.Sprintf("v%d-%s", m.n, strings.Repeat("x", size)))})
	}
	m.add(l, items)
}

// add adds through the writer, and tells every subscription of the list
// it must receive the add's items (none when the feature is not live).
func (m *model) add(l int, items []store.NewItem) {
	m.addAs(l, m.lists[l], items)
}

// addAs adds to the list l as a gateway that sees it as list.
func (m *model) addAs(l int, list store.List, items []store.NewItem) {
	if _, err := m.writer.AddItems(context.Background(), list, items); err != nil {
		m.fatalf("add: %v", err)
	}
	byKey := map[string]store.Item{}
	for _, it := range items {
		k := keys.ItemKey(it.Timestamp, it.Value)
		byKey[k] = store.Item{Key: k, Timestamp: it.Timestamp, Value: it.Value}
	}
	a := modelAdd{list: list.ID()}
	for _, it := range byKey {
		a.items = append(a.items, it)
		m.content[l][it.Key] = it
	}
	slices.SortFunc(a.items, func(x, y store.Item) int { return strings.Compare(x.Key, y.Key) })
	m.adds = append(m.adds, a)
	m.addAge = append(m.addAge, m.ages)
	for _, s := range append(m.subs, m.away...) {
		if s.listID.Has(a.list) && list.Feature.Live {
			for i, it := range a.items {
				s.want = append(s.want, want{len(m.adds) - 1, i, it})
			}
		}
	}
}

// subscribe starts a subscription from now on, or since a time, on a
// random hub.
func (m *model) subscribe(l int) {
	m.named++
	s := &modelSub{name: fmt.Sprintf("s%d", m.named), list: l, l: m.lists[l], listID: m.lists[l].ID(), hub: m.rng.IntN(len(m.hubs)), age: m.ages}
	var start watch.Start
	if m.rng.IntN(3) == 0 && len(m.content[l]) > 0 {
		// A since some item is at or after, so that the catch-up can be
		// read at once, before anything else is added.
		var since int64
		for _, it := range m.content[l] {
			since = it.Timestamp - m.rng.Int64N(int64(time.Minute))
			break
		}
		start.Since = &since
		var catchUp []store.Item
		for _, it := range m.content[l] {
			if it.Timestamp >= since {
				catchUp = append(catchUp, it)
			}
		}
		slices.SortFunc(catchUp, func(x, y store.Item) int { return strings.Compare(x.Key, y.Key) })
		for _, it := range catchUp {
			s.want = append(s.want, want{-1, 0, it})
		}
	}
	m.start(s, start)
	m.subs = append(m.subs, s)
	if start.Since != nil {
		// Read now, before anything else is added: an item added while a
		// catch-up is read may come twice, which the model does not say.
		m.read(s, len(s.want))
	}
}

// start subscribes s; false when the feed no longer keeps what follows
// its place, which only the store's clock moved past the retention since
// it was added explains.
func (m *model) start(s *modelSub, start watch.Start) bool {
	if start.After == nil {
		s.age = m.ages
	} else if at, ok := m.known[*start.After]; ok {
		s.age = m.addAge[at[0]]
	} // else after where it began: as old as it was
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := m.hubs[s.hub].Subscribe(ctx, s.l, start)
	if s.age < m.ages && errors.Is(err, errkind.PositionExpired) {
		cancel()
		m.expired++
		return false
	}
	if err != nil {
		cancel()
		m.fatalf("%s: subscribe: %v", s.name, err)
	}
	select { // the contract holds of adds begun once it has started
	case <-sub.Started():
	case <-sub.Done():
		// Ended first: TOO_SLOW when records of earlier adds, which it
		// skips, filled its share while this model did not read. Its
		// next read gets the end, and resumes or drops it.
	case <-time.After(30 * time.Second):
		m.fatalf("%s: not started within 30 s", s.name)
	}
	s.sub, s.cancel = sub, cancel
	return true
}

// vanish makes a client go away, to resume later after the position of
// the last item it received.
func (m *model) vanish() {
	if len(m.subs) == 0 {
		return
	}
	i := m.rng.IntN(len(m.subs))
	s := m.subs[i]
	m.subs = slices.Delete(m.subs, i, i+1)
	s.cancel()
	if s.last == nil || s.doomed {
		return // nowhere to resume from
	}
	s.sub, s.cancel = nil, nil
	m.away = append(m.away, s)
}

// resume brings back a client that vanished, after its last position, on
// a random hub; or subscribes after a position an item of another list
// had (positions are of the whole feed).
func (m *model) resume() {
	if len(m.away) == 0 {
		return
	}
	i := m.rng.IntN(len(m.away))
	s := m.away[i]
	m.away = slices.Delete(m.away, i, i+1)
	s.hub = m.rng.IntN(len(m.hubs))
	s.want = slices.DeleteFunc(s.want, func(w want) bool { return w.add < 0 })
	if !m.start(s, watch.Start{After: s.last}) {
		return
	}
	m.subs = append(m.subs, s)
	m.back++
	if other := m.rng.IntN(len(m.lists)); other != s.list && !s.doomed {
		at, ok := m.known[*s.last]
		if !ok {
			return
		}
		o := &modelSub{name: s.name + "/" + fmt.Sprint(other), list: other, l: m.lists[other], listID: m.lists[other].ID(), hub: m.rng.IntN(len(m.hubs))}
		for ai := at[0] + 1; ai < len(m.adds); ai++ {
			if o.listID.Has(m.adds[ai].list) {
				for ii, it := range m.adds[ai].items {
					o.want = append(o.want, want{ai, ii, it})
				}
			}
		}
		if m.start(o, watch.Start{After: s.last}) {
			m.subs = append(m.subs, o)
		}
	}
}

// readSome reads part of what a subscription must receive.
func (m *model) readSome() {
	if len(m.subs) == 0 {
		return
	}
	s := m.subs[m.rng.IntN(len(m.subs))]
	if len(s.want) > 0 {
		m.read(s, 1+m.rng.IntN(len(s.want)))
	}
}

// recreate deletes the feature and creates it again: its subscriptions
// end NOT_FOUND, and new lists begin.
func (m *model) recreate() {
	ctx := context.Background()
	f := m.feature
	if _, err := m.writer.DeleteFeature(ctx, f.EntityType, f.Name, f.Version); err != nil {
		m.fatalf("delete: %v", err)
	}
	m.goneMu.Lock()
	m.gone[f.CreatedAt.UnixNano()] = true
	m.goneMu.Unlock()
	again, err := m.writer.CreateFeature(ctx, store.Feature{EntityType: f.EntityType, Name: f.Name, ValueType: f.ValueType, TTL: f.TTL, Live: true})
	if err != nil {
		m.fatalf("create again: %v", err)
	}
	for _, s := range append(m.subs, m.away...) {
		s.doomed = true
	}
	m.away = nil
	m.prev, m.feature = f, &again
	m.setLive(&again)
	m.setLists()
}

// toggle makes the feature not live, adds to a list (not recorded), and
// makes it live again, all before the gateways' next check: every
// subscription of it ends, and the add reaches nobody.
func (m *model) toggle() {
	ctx := context.Background()
	f := m.feature
	off, err := m.writer.SetFeatureLive(ctx, f.EntityType, f.Name, f.Version, false)
	if err != nil {
		m.fatalf("made not live: %v", err)
	}
	m.setLive(&off)
	l := m.rng.IntN(len(m.lists))
	m.n++
	m.addAs(l, store.List{Feature: &off, EntityID: m.lists[l].EntityID}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte(fmt.Sprint("unrecorded", m.n))}})
	on, err := m.writer.SetFeatureLive(ctx, f.EntityType, f.Name, f.Version, true)
	if err != nil {
		m.fatalf("made live again: %v", err)
	}
	m.setLive(&on)
	for _, s := range append(m.subs, m.away...) {
		s.doomed = true
	}
	m.away = nil // their positions are from before it was made live again: refused above the hub
	m.feature = &on
	for i := range m.lists {
		m.lists[i].Feature = &on
	}
	m.toggled++
}

// staleAdd adds to a list as a gateway that has not yet seen the feature
// created again: its record names the feature as it was, and reaches the
// subscriptions of the list as it is. On Cassandra only, where gateways
// cache features; the embedded store's one process sees a feature created
// again at once.
func (m *model) staleAdd() {
	if m.prev == nil || m.offset != nil {
		return
	}
	l := m.rng.IntN(len(m.lists))
	m.n++
	m.addAs(l, store.List{Feature: m.prev, EntityID: m.lists[l].EntityID}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte(fmt.Sprint("stale", m.n))}})
	m.stale++
}

// age moves the embedded store's clock past the feed's retention, as a
// gateway stopped for that long would find it: a subscription still
// reading records of the feed from before (a catch-up, or a hub behind)
// ends POSITION_EXPIRED, as does a client resuming from a place it
// missed adds after; none skips an item. POSITION_EXPIRED may end a
// subscription that started after a place from before. The embedded
// store only: a cluster's feed keeps to the cluster's clock.
func (m *model) age() {
	if m.offset == nil {
		return
	}
	m.offset.Add(int64(m.retain + time.Minute))
	m.ages++
}

// drain reads every subscription until it has received all it must.
func (m *model) drain(when string) {
	for _, s := range slices.Clone(m.subs) {
		m.read(s, len(s.want))
		if s.doomed && len(s.want) == 0 {
			m.expectEnd(s)
			m.notFound++
		}
	}
	m.t.Logf("%s: %d adds, %d subscriptions, %d away", when, len(m.adds), len(m.subs), len(m.away))
}

// read reads n items of s, checking each against the model; a
// subscription ended TOO_SLOW is resumed from the position it names.
func (m *model) read(s *modelSub, n int) {
	m.t.Helper()
	for range n {
		if len(s.want) == 0 || s.sub == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		d, err := s.sub.Next(ctx)
		cancel()
		var end *watch.EndError
		switch {
		case err == nil:
			m.check(s, d)
		case s.doomed && (errors.Is(err, errkind.NotFound) || errors.Is(err, errkind.PositionExpired) || errors.Is(err, errkind.Invalid)):
			m.drop(s)
			m.notFound++
			return
		case s.age < m.ages && errors.Is(err, errkind.PositionExpired):
			m.drop(s)
			m.expired++
			return
		case s.doomed && errors.Is(err, errkind.TooSlow):
			m.drop(s) // its feature is gone: nothing to resume
			return
		case errors.Is(err, errkind.TooSlow) && errors.As(err, &end):
			if s.last != nil && end.Position != *s.last {
				m.fatalf("%s ended TOO_SLOW naming %v, not the last item sent (%v)", s.name, end.Position, *s.last)
			}
			s.cancel()
			s.want = slices.DeleteFunc(s.want, func(w want) bool { return w.add < 0 }) // a catch-up by since is not resumed
			if !m.start(s, watch.Start{After: &end.Position}) {
				m.subs = slices.DeleteFunc(m.subs, func(x *modelSub) bool { return x == s })
				return
			}
			m.slow++
		default:
			m.fatalf("%s: next (want %q of add %d): %v", s.name, s.want[0].it.Value[:min(len(s.want[0].it.Value), 8)], s.want[0].add, err)
		}
	}
}

// check compares a delivery with what s must receive next.
func (m *model) check(s *modelSub, d watch.Delivery) {
	m.t.Helper()
	w := s.want[0]
	if d.Key != w.it.Key || string(d.Value) != string(w.it.Value) {
		m.fatalf("%s (list %d, after %v) received %s %.8s at %v, want %s %.8s (add %d, item %d; %d more)", s.name, s.list, s.last, d.Key, d.Value, d.Position, w.it.Key, w.it.Value, w.add, w.item, len(s.want)-1)
	}
	switch {
	case w.add < 0:
		if s.since != nil && d.Position != *s.since {
			m.fatalf("%s: the items of a catch-up by since have positions %v and %v", s.name, *s.since, d.Position)
		}
		s.since = &d.Position
		m.caughtUp++
	default:
		if s.last != nil && !s.last.Less(d.Position) {
			m.fatalf("%s: position %v after %v", s.name, d.Position, *s.last)
		}
		at := [2]int{w.add, w.item}
		if k, ok := m.known[d.Position]; ok && k != at {
			m.fatalf("%s: position %v names item %v, and item %v elsewhere", s.name, d.Position, at, k)
		}
		if p, ok := m.names[at]; ok && p != d.Position {
			m.fatalf("%s: item %v has position %v, and %v elsewhere", s.name, at, d.Position, p)
		}
		m.known[d.Position], m.names[at] = at, d.Position
	}
	s.want = s.want[1:]
	s.sub.Sent(d)
	s.last = &d.Position
}

// expectEnd reads the end of a subscription whose feature was deleted or
// made not live: NOT_FOUND, POSITION_EXPIRED or BAD_USER_INPUT, or
// TOO_SLOW when a bound ended it first.
func (m *model) expectEnd(s *modelSub) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if d, err := s.sub.Next(ctx); !errors.Is(err, errkind.NotFound) && !errors.Is(err, errkind.TooSlow) &&
		!errors.Is(err, errkind.PositionExpired) && !errors.Is(err, errkind.Invalid) {
		m.fatalf("%s: want NOT_FOUND, POSITION_EXPIRED or BAD_USER_INPUT, got %s, %v", s.name, d.Key, err)
	}
	m.drop(s)
}

func (m *model) drop(s *modelSub) {
	s.cancel()
	m.subs = slices.DeleteFunc(m.subs, func(x *modelSub) bool { return x == s })
}
