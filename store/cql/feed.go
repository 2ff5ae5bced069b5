package cql

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
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
// expiring after FeedRetention. A record must be written within half of
// FeedWindow of its time, or its add fails; so once the cluster's clock is
// FeedWindow past a time, no record of that time or before can still
// appear: the feed is settled up to there, and readers read no further.
// That is what makes the feed's order the same for every reader, and a
// position in it a place to resume from: no record can come later before
// one already read. A reader reads the heads (no items) of the records
// between its position and the settled end from every shard, once each,
// and then the records of the lists it wants.

// FeedConfig tunes the change feed. Shards must be the same on every
// gateway of a fleet: writers spread records over them, followers read
// them all.
type FeedConfig struct {
	Shards    int           // partitions per bucket
	Poll      time.Duration // between two reads of the feed
	Window    time.Duration // how late a record may become readable after its time: how far the settled end trails the clock
	Retention time.Duration // how long a record is kept
}

// DefaultFeedConfig reads four shards four times a second, which is about
// 16 reads a second for a gateway with subscriptions, none for one
// without; an add is delivered about two seconds after it.
var DefaultFeedConfig = FeedConfig{Shards: 4, Poll: 250 * time.Millisecond, Window: 2 * time.Second, Retention: 10 * time.Minute}

// bucketWidth is the time a feed partition covers.
const bucketWidth = 10 * time.Second

func bucketOf(t time.Time) int64 { return t.UnixNano() / int64(bucketWidth) }

// shardOf spreads the lists over the shards.
func (s *Store) shardOf(l store.ListID) int {
	h := fnv.New32a()
	h.Write([]byte(l.Feature))
	h.Write([]byte{0})
	h.Write([]byte(l.EntityID))
	return int(h.Sum32() % uint32(s.cfg.Feed.Shards))
}

// record is an add's change record: its statement, timed as the add
// begins, and what its items weigh (store.ChangeBytes).
func (s *Store) record(l store.List, writes []store.Write) (gocql.BatchEntry, int) {
	at := s.clock.stamp()
	id := gocql.UUIDFromTime(at)
	c := store.ChangeOf("", at, l, writes)
	keys := make([]string, len(c.Items))
	values := make([][]byte, len(c.Items))
	for i, it := range c.Items {
		keys[i], values[i] = it.Key, it.Value
	}
	size := store.ChangeBytes(c)
	return gocql.BatchEntry{Stmt: s.stmt.insertChange, Idempotent: true,
		Args: []any{bucketOf(at), s.shardOf(c.List), id, c.List.Feature, l.Feature.CreatedAt, c.List.EntityID, keys, values, size, int(s.cfg.Feed.Retention / time.Second)}}, size
}

// recordContext is the context of an add that writes a record: a deadline
// of its own, by this gateway's clock, as deadlines are. Whether the
// client waits or not, the record is written, or the add fails. It must
// be readable within half the feed's window of its time: a record that
// could not be written by then fails the add, which the client retries
// (an add of the same items is the same add, delivered again with the new
// record).
func (s *Store) recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Feed.Window/2)
}

// recordFailed is the error of an add whose record may not have been
// written.
func recordFailed(err error) error {
	return fmt.Errorf("%w: the record of the add that live subscriptions follow was not written, though its items may have been; add them again (an add of the same items is the same add): %v",
		errkind.Unavailable, classify("recording an add", err))
}

// Record positions: the kind, the feed's identity (its cluster and
// keyspace: a position of another feed is told apart), the time UUID's
// 60-bit time, then its clock sequence and node, so that positions order
// by time, then by the rest. A position at a time with every other byte
// 0xff comes after every record of that time: where a reader that read up
// to that time stands.
const positionKind = store.CQLPositionKind

// feedIdentity names a feed by its cluster's name and keyspace.
func feedIdentity(cluster, keyspace string) [4]byte {
	h := fnv.New32a()
	h.Write([]byte(cluster))
	h.Write([]byte{0})
	h.Write([]byte(keyspace))
	return [4]byte(h.Sum(nil))
}

func (s *Store) recordOf(id gocql.UUID) string {
	b := append(append(make([]byte, 0, 21), positionKind), s.feedID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(id.Timestamp()))
	return string(append(b, id[8:]...))
}

// endOf is the position after every record of the tick t (100 ns since
// the UUID epoch).
func (s *Store) endOf(t int64) store.Position {
	b := append(append(make([]byte, 0, 21), positionKind), s.feedID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(t))
	return store.Position{Record: string(append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)), Item: store.AllItems}
}

// tickOf is the time of a record position, in ticks; ok false for a
// position of another feed.
func (s *Store) tickOf(rec string) (int64, bool) {
	if len(rec) != 21 || rec[0] != positionKind || rec[1:5] != string(s.feedID[:]) {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64([]byte(rec[5:13]))), true
}

// uuidEpoch is the time UUIDs count from, in ticks of 100 ns.
const uuidEpoch = 122192928000000000

func ticks(t time.Time) int64 { return t.UnixNano()/100 + uuidEpoch }

func timeOf(tick int64) time.Time { return time.Unix(0, (tick-uuidEpoch)*100) }

// uuidAt is a time UUID of the tick t. Bounds of a slice are taken a tick
// beyond what they must keep, so that how a server orders UUIDs of one
// tick never matters: the reader orders those itself.
func uuidAt(t int64) gocql.UUID { return gocql.MinTimeUUID(timeOf(t)) }

// settled is the feed's settled end now, in ticks.
func (s *Store) settled() int64 { return ticks(s.clock.Now().Add(-s.cfg.Feed.Window)) }

// maxSkew bounds the wait of FeedHead.
const maxSkew = 250 * time.Millisecond

// FeedHead is a position every record of an add that began after the call
// comes after, and every record of an add that ended before it comes
// before, though each gateway times its records by its own measure of the
// cluster's clock: off by up to half its round trip and the millisecond of
// the cluster's now(), and a record is timed as its add begins. The head
// is the skew ahead of now, and the call returns once now is the skew past
// the head: an add that ended before the call was timed before now, so
// before the head, even by a clock the skew behind; one that begins after
// it is timed after the head, even by a clock the skew ahead. The skew
// taken, twice this gateway's round trip and a millisecond, covers another
// gateway whose round trip is up to three times this one's.
func (s *Store) FeedHead(ctx context.Context) (store.Position, error) {
	skew := time.Duration(s.clock.skew.Load())
	head := s.clock.Now().Add(skew)
	t := time.NewTimer(head.Add(skew).Sub(s.clock.Now()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return store.Position{}, context.Cause(ctx)
	case <-t.C:
	}
	return s.endOf(ticks(head)), nil
}

// CheckPosition says whether the records after p are still kept.
func (s *Store) CheckPosition(_ context.Context, p store.Position) error {
	t, ok := s.tickOf(p.Record)
	now := s.clock.Now()
	switch {
	case !ok:
		return store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	case t < ticks(now.Add(-s.cfg.Feed.Retention+s.cfg.Feed.Window)):
		return store.PositionExpired("the change feed no longer keeps the adds after this position (it keeps them for the retention of list_changes)")
	case t > ticks(now.Add(s.cfg.Feed.Window)):
		return store.PositionExpired("the position is ahead of the change feed")
	}
	return nil
}

// PositionTime is the time of the record position's time UUID, by the
// cluster's clock.
func (s *Store) PositionTime(p store.Position) (time.Time, bool) {
	t, ok := s.tickOf(p.Record)
	if !ok {
		return time.Time{}, false
	}
	return timeOf(t), true
}

// WaitFeed waits one poll: a cluster does not say when a record comes.
func (s *Store) WaitFeed(ctx context.Context, _ store.Position) error {
	t := time.NewTimer(s.cfg.Feed.Poll)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// head is a record without its items.
type head struct {
	bucket int64
	shard  int
	id     gocql.UUID
	rec    string
	list   store.ListID
	bytes  int
}

// span is the ticks a read covers: after `after`, up to end, no further
// back than the feed keeps, and within one bucket of its start, so that a
// reader far behind reads a bucket at a time.
func (s *Store) span(after store.Position, end int64) (from, to int64, ok bool) {
	from, ok = s.tickOf(after.Record)
	if !ok {
		return 0, 0, false
	}
	from = max(from, ticks(s.clock.Now().Add(-s.cfg.Feed.Retention)))
	return from, min(end, from+int64(bucketWidth/100)), true
}

// heads reads the heads of the records of ticks [from, to] in the shards,
// after `after`, in the feed's order.
func (s *Store) heads(ctx context.Context, shards []int, after store.Position, from, to int64) ([]head, error) {
	var out []head
	for b := bucketOf(timeOf(from)); b <= bucketOf(timeOf(to)); b++ {
		for _, shard := range shards {
			iter := s.session.Query(s.stmt.selectChangeHeads, b, shard, uuidAt(from-1), uuidAt(to+1)).
				WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(5000).Iter()
			h := head{bucket: b, shard: shard}
			var createdAt time.Time
			for iter.Scan(&h.id, &h.list.Feature, &createdAt, &h.list.EntityID, &h.bytes) {
				h.rec, h.list.CreatedAt = s.recordOf(h.id), createdAt.UnixNano()
				if t := h.id.Timestamp(); t >= from && t <= to && after.Behind(h.rec) {
					out = append(out, h)
				}
			}
			if err := iter.Close(); err != nil {
				return nil, classify("reading the change feed", err)
			}
		}
	}
	slices.SortFunc(out, func(a, b head) int { return strings.Compare(a.rec, b.rec) })
	return out, nil
}

// upToBytes is the heads from the first on whose items stay within
// maxBytes (the first at least), and whether that is all of them.
func upToBytes(hs []head, maxBytes int) ([]head, bool) {
	size := 0
	for i, h := range hs {
		if i > 0 && size+h.bytes > maxBytes {
			return hs[:i], false
		}
		size += h.bytes
	}
	return hs, true
}

// ReadFeed reads the records after `after` up to the settled end, a bucket
// at most: every shard's heads, then the records of the lists watched.
func (s *Store) ReadFeed(ctx context.Context, after store.Position, watched func(store.ListID) bool, maxBytes int) ([]store.Change, store.Position, error) {
	ctx, span := s.tracer.Start(ctx, "changefeed.read")
	defer span.End()
	changes, reached, err := s.readFeed(ctx, after, watched, maxBytes)
	span.SetAttributes(attribute.Int("listgate.changefeed.records", len(changes)))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "reading the change feed failed")
	}
	return changes, reached, err
}

func (s *Store) readFeed(ctx context.Context, after store.Position, watched func(store.ListID) bool, maxBytes int) ([]store.Change, store.Position, error) {
	from, to, ok := s.span(after, s.settled())
	if !ok {
		return nil, after, store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	}
	if to < from {
		return nil, after, nil
	}
	shards := make([]int, s.cfg.Feed.Shards)
	for i := range shards {
		shards[i] = i
	}
	hs, err := s.heads(ctx, shards, after, from, to)
	if err != nil {
		return nil, after, err
	}
	var want []head
	for _, h := range hs {
		if watched(h.list) {
			want = append(want, h)
		}
	}
	want, all := upToBytes(want, maxBytes)
	reached := s.endOf(to)
	if !all {
		reached = store.Position{Record: want[len(want)-1].rec, Item: store.AllItems}
	}
	changes, err := s.fetch(ctx, want)
	return changes, reached, err
}

// ListFeed reads the records of one list after `after` up to upTo's, from
// its shard: the heads of every list's records there are what it costs.
func (s *Store) ListFeed(ctx context.Context, l store.List, after, upTo store.Position, maxBytes int) ([]store.Change, store.Position, int, error) {
	end, ok := s.tickOf(upTo.Record)
	if !ok {
		return nil, after, 0, store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	}
	from, to, ok := s.span(after, end)
	if !ok {
		return nil, after, 0, store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	}
	if to < from {
		return nil, after, 0, nil
	}
	id := l.ID()
	hs, err := s.heads(ctx, []int{s.shardOf(id)}, after, from, to)
	if err != nil {
		return nil, after, 0, err
	}
	var want []head
	for _, h := range hs {
		if h.list == id && h.rec <= upTo.Record {
			want = append(want, h)
		}
	}
	want, all := upToBytes(want, maxBytes)
	reached := s.endOf(to)
	if to == end {
		reached = upTo
	}
	if !all {
		reached = store.Position{Record: want[len(want)-1].rec, Item: store.AllItems}
	}
	changes, err := s.fetch(ctx, want)
	return changes, reached, len(hs), err
}

// fetch reads the records of heads, in their order.
func (s *Store) fetch(ctx context.Context, hs []head) ([]store.Change, error) {
	type part struct {
		bucket int64
		shard  int
	}
	byPart := map[part][]gocql.UUID{}
	for _, h := range hs {
		p := part{h.bucket, h.shard}
		byPart[p] = append(byPart[p], h.id)
	}
	out := make([]store.Change, 0, len(hs))
	now := s.clock.Now()
	for p, ids := range byPart {
		for start := 0; start < len(ids); start += store.FetchBatch {
			changes, err := s.fetchPart(ctx, p.bucket, p.shard, ids[start:min(start+store.FetchBatch, len(ids))])
			if err != nil {
				return nil, err
			}
			for _, c := range changes {
				s.feedLag.Record(ctx, now.Sub(c.At).Seconds())
			}
			out = append(out, changes...)
		}
	}
	slices.SortFunc(out, func(a, b store.Change) int { return strings.Compare(a.Record, b.Record) })
	return out, nil
}

// fetchPart reads records of one partition by id.
func (s *Store) fetchPart(ctx context.Context, bucket int64, shard int, ids []gocql.UUID) ([]store.Change, error) {
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
			c.Record, c.At, c.List.CreatedAt = s.recordOf(id), id.Time(), createdAt.UnixNano()
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
	return out, nil
}

// clock is the cluster's clock as this gateway measures it: its own, moved
// by the offset of the coordinators' now() it saw last with the shortest
// round trip. The feed orders records by it, so that gateways whose own
// clocks disagree still agree on the records' times.
type clock struct {
	raw    func() time.Time
	offset atomic.Int64 // ns
	skew   atomic.Int64 // ns, how far another gateway's Now may be from this one's
	last   atomic.Int64 // the latest stamp, unix ns
	mu     sync.Mutex
	best   []sample // the last few
}

type sample struct {
	offset, rtt time.Duration
}

// Now is the cluster's time, as measured.
func (c *clock) Now() time.Time { return c.raw().Add(time.Duration(c.offset.Load())) }

// maxStepBack is the largest step back of the clock stamp holds off.
const maxStepBack = 10 * time.Millisecond

// stamp is the time of a record: Now, but later than every stamp before
// it, so that of two adds one after the other the later is recorded later
// even when a new measurement moves the offset back by a few
// milliseconds. A record is timed as its add begins, its items written
// meanwhile, so the margin between two such adds is only the first's
// round trip. A larger step back (a first measurement that failed, then
// one that did) is followed, not held off.
func (c *clock) stamp() time.Time {
	for {
		last, now := c.last.Load(), c.Now().UnixNano()
		t := now
		if now <= last && last-now < int64(maxStepBack) {
			t = last + 100 // a tick of a time UUID
		}
		if c.last.CompareAndSwap(last, t) {
			return time.Unix(0, t)
		}
	}
}

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
	c.skew.Store(int64(min(2*best.rtt+time.Millisecond, maxSkew)))
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
