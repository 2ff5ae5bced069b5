package cql

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	itemkeys "github.com/listgate/listgate/store/keys"
)

// The change feed on the cluster: list_changes, a record per add,
// partitioned by a time bucket and a shard, ordered by a time UUID of the
// cluster's clock (each gateway measures how far its own is from it), and
// expiring after FeedRetention. A follower reads the ids of the records of
// its last FeedWindow, every FeedPoll, from every shard (one or two
// buckets each: a handful of single-partition reads, however many lists it
// watches), and then the records it has not read yet.

// FeedConfig tunes the change feed. Shards must be the same on every
// gateway of a fleet: writers spread records over them, followers read
// them all.
type FeedConfig struct {
	Shards    int           // partitions per bucket
	Poll      time.Duration // between two reads of the feed
	Window    time.Duration // how late a record may become readable after its time and still be read
	Retention time.Duration // how long a record is kept
}

// DefaultFeedConfig reads four shards four times a second, which, with a
// record readable within two seconds of its time, is about 20 reads a
// second for a gateway with subscriptions, none for one without.
var DefaultFeedConfig = FeedConfig{Shards: 4, Poll: 250 * time.Millisecond, Window: 2 * time.Second, Retention: 10 * time.Minute}

// bucketWidth is the time a feed partition covers.
const bucketWidth = 10 * time.Second

func bucketOf(t time.Time) int64 { return t.UnixNano() / int64(bucketWidth) }

// shardOf spreads the lists over the shards.
func (s *Store) shardOf(l store.List) int {
	h := fnv.New32a()
	h.Write([]byte(l.Feature.Key()))
	h.Write([]byte{0})
	h.Write([]byte(l.EntityID))
	return int(h.Sum32() % uint32(s.cfg.Feed.Shards))
}

// record writes an add's change, once its items are written. It must be
// readable within the feed's window of its time: a record that could not
// be written by then fails the add, which the client retries (an add of
// the same items is the same add), so that no acknowledged add is missed
// by followers.
func (s *Store) record(ctx context.Context, l store.List, writes []store.Write) error {
	at := s.clock.Now()
	id := gocql.UUIDFromTime(at)
	c := store.ChangeOf(id.String(), at, l, writes)
	keys := make([]string, len(c.Items))
	values := make([][]byte, len(c.Items))
	bytes := 0
	for i, it := range c.Items {
		keys[i], values[i] = it.Key, it.Value
		bytes += len(it.Key) + len(it.Value)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Feed.Window/2) // by this gateway's clock, as deadlines are
	defer cancel()
	err := s.session.Query(s.stmt.insertChange, bucketOf(at), s.shardOf(l), id, c.List.Feature, l.Feature.CreatedAt, c.List.EntityID, keys, values, bytes, int(s.cfg.Feed.Retention/time.Second)).
		WithContext(ctx).Consistency(s.cfg.WriteConsistency).Idempotent(true).Exec()
	if err != nil {
		return fmt.Errorf("%w: the items were written, but not the record of their add that live subscriptions follow; add them again (an add of the same items is the same add): %v",
			errkind.Unavailable, classify("recording an add", err))
	}
	return nil
}

// FeedNow is the cluster's time, as this gateway measures it.
func (s *Store) FeedNow() time.Time { return s.clock.Now() }

// Follow reads the feed every Poll until stopped: the heads of the records
// of its window, then the records of the lists wanted it has not read yet.
func (s *Store) Follow(since time.Time, wants func(store.ListID) bool, fn func(store.Change)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f := &follower{s: s, wants: wants, fn: fn, seen: map[gocql.UUID]time.Time{}, start: since, last: since}
		t := time.NewTicker(s.cfg.Feed.Poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := f.traced(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("reading the change feed failed; the next read retries", "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

type follower struct {
	s           *Store
	wants       func(store.ListID) bool
	fn          func(store.Change)
	start, last time.Time
	seen        map[gocql.UUID]time.Time // records handed to fn, by id, until they are past the window
}

// fetchBytes bounds the bytes of the records one statement fetches (but
// for a record larger alone).
const fetchBytes = 8 << 20

// traced is a read, as a trace of its own: a changefeed.read span over
// its statements' spans.
func (f *follower) traced(ctx context.Context) error {
	ctx, span := f.s.tracer.Start(ctx, "changefeed.read")
	defer span.End()
	n, err := f.read(ctx)
	span.SetAttributes(attribute.Int("listgate.changefeed.records", n))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "reading the change feed failed")
	}
	return err
}

// read reads the records of [last − Window, now] from every shard, and
// returns how many it handed to fn.
func (f *follower) read(ctx context.Context) (int, error) {
	s := f.s
	now := s.clock.Now()
	// After an outage, what is still kept.
	from := later(f.last.Add(-s.cfg.Feed.Window), now.Add(-s.cfg.Feed.Retention))
	n := 0
	for b := bucketOf(from); b <= bucketOf(now); b++ {
		for shard := range s.cfg.Feed.Shards {
			k, err := f.readPartition(ctx, b, shard, from)
			if n += k; err != nil {
				return n, err
			}
		}
	}
	f.last = now
	for id, at := range f.seen {
		if at.Before(from.Add(-s.cfg.Feed.Poll)) {
			delete(f.seen, id)
		}
	}
	return n, nil
}

// readPartition reads one partition's records from from on: their heads
// (no items), then, a few at a time, the records of wanted lists not seen
// yet, handed to fn in the partition's order, which is their time's.
func (f *follower) readPartition(ctx context.Context, bucket int64, shard int, from time.Time) (int, error) {
	s := f.s
	type head struct {
		id    gocql.UUID
		bytes int
	}
	var want []head
	iter := s.session.Query(s.stmt.selectChangeHeads, bucket, shard, gocql.MinTimeUUID(from)).
		WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(5000).Iter()
	var h head
	var l store.ListID
	var createdAt time.Time
	for iter.Scan(&h.id, &l.Feature, &createdAt, &l.EntityID, &h.bytes) {
		if _, ok := f.seen[h.id]; ok {
			continue
		}
		if l.CreatedAt = createdAt.UnixNano(); f.wants(l) {
			want = append(want, h)
		}
	}
	if err := iter.Close(); err != nil {
		return 0, classify("reading the change feed", err)
	}
	n := 0
	for len(want) > 0 {
		k, size := 0, 0
		for k < len(want) && k < store.FetchBatch && (k == 0 || size+want[k].bytes <= fetchBytes) {
			size += want[k].bytes
			k++
		}
		ids := make([]gocql.UUID, k)
		for i := range ids {
			ids[i] = want[i].id
		}
		want = want[k:]
		changes, err := f.fetch(ctx, bucket, shard, ids)
		if err != nil {
			return n, err
		}
		now := s.clock.Now()
		for _, c := range changes {
			s.feedLag.Record(ctx, now.Sub(c.At).Seconds())
			if !c.At.Before(f.start) {
				f.fn(c)
				n++
			}
		}
	}
	return n, nil
}

// fetch reads records by id, and marks them seen.
func (f *follower) fetch(ctx context.Context, bucket int64, shard int, ids []gocql.UUID) ([]store.Change, error) {
	s := f.s
	iter := s.session.Query(s.stmt.selectChanges, bucket, shard, ids).
		WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).Iter()
	var out []store.Change
	var id gocql.UUID
	var c store.Change
	var createdAt time.Time
	var keys []string
	var values [][]byte
	for iter.Scan(&id, &c.List.Feature, &createdAt, &c.List.EntityID, &keys, &values) {
		if len(values) == len(keys) { // else not a record this store wrote
			c.ID, c.At, c.List.CreatedAt = id.String(), id.Time(), createdAt.UnixNano()
			c.Items = make([]store.Item, len(keys))
			for i, k := range keys {
				c.Items[i] = store.Item{Key: k, Timestamp: itemkeys.ItemTimestamp(k), Value: values[i]}
			}
			out = append(out, c)
		}
		c, keys, values = store.Change{}, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, classify("reading the change feed", err)
	}
	// Seen once read whole: a read that fails reads them again.
	for _, id := range ids {
		f.seen[id] = id.Time()
	}
	return out, nil
}

// clock is the cluster's clock as this gateway measures it: its own, moved
// by the offset of the coordinators' now() it saw last with the shortest
// round trip. The feed orders records by it, so that gateways whose own
// clocks disagree still agree on the records' times.
type clock struct {
	raw    func() time.Time
	offset atomic.Int64 // ns
	mu     sync.Mutex
	best   []sample // the last few
}

type sample struct {
	offset, rtt time.Duration
}

// Now is the cluster's time, as measured.
func (c *clock) Now() time.Time { return c.raw().Add(time.Duration(c.offset.Load())) }

// measure asks a coordinator for its time and keeps the offset of the
// sample with the shortest round trip among the last five.
func (s *Store) measureClock(ctx context.Context) error {
	t0 := s.clock.raw()
	var server time.Time
	err := s.session.Query("SELECT toTimestamp(now()) FROM system.local").WithContext(ctx).Consistency(gocql.One).Scan(&server)
	t1 := s.clock.raw()
	if err != nil {
		return classify("reading the cluster's clock", err)
	}
	c := &s.clock
	smp := sample{offset: server.Sub(t0.Add(t1.Sub(t0) / 2)), rtt: t1.Sub(t0)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.best = append(c.best, smp)
	if len(c.best) > 5 {
		c.best = c.best[1:]
	}
	best := slices.MinFunc(c.best, func(a, b sample) int { return int(a.rtt - b.rtt) })
	c.offset.Store(int64(best.offset))
	return nil
}

// runClock measures the clock every interval until ctx ends.
func (s *Store) runClock(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.measureClock(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("measuring the cluster's clock failed", "err", err)
			}
		}
	}
}

// observeClock exports the offset as listgate_clock_offset_seconds.
func (s *Store) observeClock(meter metric.Meter) error {
	_, err := meter.Float64ObservableGauge("listgate.clock.offset", metric.WithUnit("s"),
		metric.WithDescription("The cluster's clock minus this gateway's, as measured from the coordinators' now(): the skew the change feed corrects."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(time.Duration(s.clock.offset.Load()).Seconds())
			return nil
		}))
	return err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
