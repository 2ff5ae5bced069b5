package cql

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	itemkeys "github.com/listgate/listgate/store/keys"
)

// The change feed on the cluster: list_changes, a record per add,
// partitioned by a time bucket and a shard, ordered by a time UUID that
// the writing gateway stamps by its measure of the cluster's clock
// (clock.go), and expiring after FeedRetention. A reader reads no further
// than the settled end (lease.go), past which no record can still appear
// before one already read: that is what makes the feed's order the same
// for every reader, and a position in it a place to resume from. A reader
// reads the heads (no items) of the records between its position and the
// settled end from every shard, once each, a bounded number at a time,
// and then the records of the lists it wants.

// FeedConfig tunes the change feed. Shards must be the same on every
// gateway of a fleet: writers spread records over them, followers read
// them all.
type FeedConfig struct {
	Shards    int           // partitions per bucket
	Poll      time.Duration // between two reads of the feed
	Retention time.Duration // how long a record is kept
	// MaxClockOffset bounds how far apart the node clocks may be, as
	// measured: past it subscriptions are refused (clock.go).
	MaxClockOffset time.Duration
}

// DefaultFeedConfig reads four shards four times a second, which is about
// 16 reads a second for a gateway with subscriptions, none for one
// without.
var DefaultFeedConfig = FeedConfig{Shards: 4, Poll: 250 * time.Millisecond, Retention: 10 * time.Minute, MaxClockOffset: DefaultMaxClockOffset}

// bucketWidth is the time a feed partition covers.
const bucketWidth = 10 * time.Second

func bucketOf(t time.Time) int64 { return t.UnixNano() / int64(bucketWidth) }

// retentionMargin is how long before its retention a position is no
// longer one to resume from: a catch-up reads its records while they
// expire, each at its own time by its node's clock. 10 s, or half the
// retention when that is less.
func (s *Store) retentionMargin() time.Duration { return min(10*time.Second, s.cfg.Feed.Retention/2) }

// headsPerRead bounds the heads one read of the feed holds, over every
// shard it reads, and headsPerShard is the least it reads of a shard.
const headsPerRead, headsPerShard = 4096, 16

// shardOf spreads the lists over the shards.
func (s *Store) shardOf(l store.ListID) int {
	h := fnv.New32a()
	h.Write([]byte(l.Feature))
	h.Write([]byte{0})
	h.Write([]byte(l.EntityID))
	return int(h.Sum32() % uint32(s.cfg.Feed.Shards))
}

// record is an add's change record: its statement, stamped as the add
// begins under this gateway's lease, what its items weigh
// (store.ChangeBytes), the context its write must use (it ends with the
// lease, whatever the add's client does), and done, to call once the
// write has ended, written or not.
func (s *Store) record(ctx context.Context, l store.List, writes []store.Write) (entry gocql.BatchEntry, size int, rctx context.Context, done func(), err error) {
	tick, rctx, done, err := s.stamp(ctx)
	if err != nil {
		return gocql.BatchEntry{}, 0, nil, nil, err
	}
	at := timeOf(tick)
	c := store.ChangeOf("", at, l, writes)
	keys := make([]string, len(c.Items))
	values := make([][]byte, len(c.Items))
	for i, it := range c.Items {
		keys[i], values[i] = it.Key, it.Value
	}
	size = store.ChangeBytes(c)
	return gocql.BatchEntry{Stmt: s.stmt.insertChange, Idempotent: true,
		Args: []any{bucketOf(at), s.shardOf(c.List), s.writer.timeUUID(tick), c.List.Feature, l.Feature.CreatedAt, c.List.EntityID, keys, values, size, int(s.cfg.Feed.Retention / time.Second)}}, size, rctx, done, nil
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

func durationTicks(d time.Duration) int64 { return int64(d / 100) }

// uuidAt is a time UUID of the tick t. Bounds of a slice are taken a tick
// beyond what they must keep, so that how a server orders UUIDs of one
// tick never matters: the reader orders those itself.
func uuidAt(t int64) gocql.UUID { return gocql.MinTimeUUID(timeOf(t)) }

// FeedHead is a position every record of an add that begins once it
// counts as started comes after, and every record of an add that ended
// before the call comes before, through any gateway. Each gateway stamps
// its records by its own measure of the cluster's clock, at most the
// clock's margin from this one's (clock.Margin), and a record is stamped
// as its add begins. So the head is the margin ahead of now, and it
// counts as started once now is the margin past it: an add that ended
// before the call was stamped before now, so before the head, even by a
// clock the margin ahead; one that begins after it is started is stamped
// after the head, even by a clock the margin behind. This gateway's own
// stamps stay above the head (feedWriter.holdAbove), whatever its measure
// does next. A gateway whose measure does not count refuses
// (errkind.ClockSkew).
func (s *Store) FeedHead(context.Context) (store.Position, time.Duration, error) {
	margin, err := s.clock.Margin()
	if err != nil {
		return store.Position{}, 0, err
	}
	now := s.clock.Now()
	head := ticks(now) + durationTicks(margin)
	s.writer.holdAbove(head)
	return s.endOf(head), timeOf(head + durationTicks(margin)).Sub(now), nil
}

// expired says why the feed no longer holds every record after the tick
// t, or "" if it does: its records expire FeedRetention after their time,
// and a catch-up must read them before.
func (s *Store) expired(t int64) string {
	if t < ticks(s.clock.Now().Add(-s.cfg.Feed.Retention+s.retentionMargin())) {
		return "the change feed no longer keeps the adds after this position (it keeps them for --change-feed-retention, the TTL of list_changes)"
	}
	return ""
}

// CheckPosition says whether the records after p are still kept, and p
// is one a reader was given: the end of a tick (a head, FeedHead), or a
// record the feed holds, after one of its items or all of them.
func (s *Store) CheckPosition(ctx context.Context, p store.Position) error {
	t, ok := s.tickOf(p.Record)
	switch {
	case !ok:
		return store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	case s.expired(t) != "":
		return store.PositionExpired(s.expired(t))
	case t > ticks(s.clock.Now().Add(s.clock.maxOffset)):
		return store.PositionExpired("the position is ahead of the change feed")
	case p == s.endOf(t):
		return nil
	}
	n, err := s.recordLength(ctx, p.Record, t)
	switch {
	case err != nil:
		return err
	case n < 0:
		return store.PositionExpired("the position names no record of the change feed")
	case p.Item != store.AllItems && int(p.Item) >= n:
		return store.PositionExpired(fmt.Sprintf("the position names item %d of a record of %d items", p.Item, n))
	}
	return nil
}

// recordLength is how many items the record rec (of the tick t) holds, -1
// if the feed holds no such record. Its shard is not in its position: each
// is asked.
func (s *Store) recordLength(ctx context.Context, rec string, t int64) (int, error) {
	var id gocql.UUID
	binary.BigEndian.PutUint32(id[0:], uint32(t))
	binary.BigEndian.PutUint16(id[4:], uint16(t>>32))
	binary.BigEndian.PutUint16(id[6:], uint16(t>>48)&0x0fff|0x1000)
	copy(id[8:], rec[13:])
	for shard := range s.cfg.Feed.Shards {
		var keys []string
		err := s.scan(s.session.Query(s.stmt.selectChangeKeys, bucketOf(timeOf(t)), shard, id).WithContext(ctx).
			Consistency(s.cfg.ReadConsistency).Idempotent(true), &keys)
		switch {
		case err == nil:
			return distinctKeys(keys), nil
		case !errors.Is(err, gocql.ErrNotFound):
			return 0, classify("reading a record of the change feed", err)
		}
	}
	return -1, nil
}

// LiveWait is the fleet's wait: another gateway may add from a snapshot
// that has not seen the feature made live.
func (s *Store) LiveWait(wait time.Duration) time.Duration { return wait }

// PositionTime is the time of the record position's time UUID, by the
// cluster's clock.
func (s *Store) PositionTime(p store.Position) (time.Time, bool) {
	t, ok := s.tickOf(p.Record)
	if !ok {
		return time.Time{}, false
	}
	return timeOf(t), true
}

// WaitFeed returns at once when the feed is settled past `after`, else
// after a poll: a cluster does not say when a record comes.
func (s *Store) WaitFeed(ctx context.Context, after store.Position) error {
	if t, ok := s.tickOf(after.Record); ok && s.settledTick.Load() > t {
		return nil
	}
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

// span is the ticks a read covers: after `after`, up to end, and within
// one bucket of its start, so that a reader far behind reads a bucket at
// a time. A position past the retention is expired: its records may have
// gone.
func (s *Store) span(after store.Position, end int64) (from, to int64, err error) {
	from, ok := s.tickOf(after.Record)
	if !ok {
		return 0, 0, store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	}
	if why := s.expired(from); why != "" {
		return 0, 0, store.PositionExpired(why)
	}
	return from, min(end, from+durationTicks(bucketWidth)), nil
}

// heads reads the heads of the records of ticks [from, to] in the shards,
// after `after`, in the feed's order, at most headsPerRead of them. It
// returns how far they cover, to or less, and how many records of the
// ticks after from up to there it saw (what the audit counts again).
func (s *Store) heads(ctx context.Context, shards []int, after store.Position, from, to int64) ([]head, int64, int, error) {
	limit := max(s.headsPerRead/len(shards), headsPerShard)
	left := make([]int, len(shards)) // what each shard may still read, over the buckets
	for i := range left {
		left[i] = limit
	}
	var out []head
	var seen []int64 // the ticks of every record read
	covered := to
	for b := bucketOf(timeOf(from)); b <= bucketOf(timeOf(to)); b++ {
		for i, shard := range shards {
			if left[i] == 0 {
				continue // read up to its last tick but one: covered is below this bucket
			}
			iter := s.iter(s.session.Query(s.stmt.selectChangeHeads, b, shard, uuidAt(from-1), uuidAt(covered+1), left[i]).
				WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(left[i]))
			h := head{bucket: b, shard: shard}
			var createdAt time.Time
			n := 0
			for iter.Scan(&h.id, &h.list.Feature, &createdAt, &h.list.EntityID, &h.bytes) {
				n++
				t := h.id.Timestamp()
				seen = append(seen, t)
				h.rec, h.list.CreatedAt = s.recordOf(h.id), createdAt.UnixNano()
				if t >= from && t <= to && after.Behind(h.rec) {
					out = append(out, h)
				}
			}
			if err := iter.Close(); err != nil {
				return nil, 0, 0, classify("reading the change feed", err)
			}
			if left[i] -= n; left[i] == 0 {
				// The last tick read may have more records: this shard is
				// read up to the tick before (the first, at least).
				covered = min(covered, max(seen[len(seen)-1]-1, from))
			}
		}
	}
	out = slices.DeleteFunc(out, func(h head) bool { return h.id.Timestamp() > covered })
	slices.SortFunc(out, func(a, b head) int { return strings.Compare(a.rec, b.rec) })
	counted := 0
	for _, t := range seen {
		if t > from && t <= covered {
			counted++
		}
	}
	return out, covered, counted, nil
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
	settled, err := s.settled(ctx)
	if err != nil {
		return nil, after, err
	}
	s.auditLate(ctx, settled)
	from, to, err := s.span(after, settled)
	if err != nil {
		return nil, after, err
	}
	if to < from {
		return nil, after, nil
	}
	shards := make([]int, s.cfg.Feed.Shards)
	for i := range shards {
		shards[i] = i
	}
	hs, to, counted, err := s.heads(ctx, shards, after, from, to)
	if err != nil {
		return nil, after, err
	}
	s.audit.add(from, to, counted)
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

// ListFeed reads the records of one list after `after` up to upTo's, and
// no further than the settled end, from its shard: the heads of every
// list's records there are what it costs.
func (s *Store) ListFeed(ctx context.Context, l store.List, after, upTo store.Position, maxBytes int) ([]store.Change, store.Position, int, error) {
	end, ok := s.tickOf(upTo.Record)
	if !ok {
		return nil, after, 0, store.PositionExpired("the position is not one of this cluster's and keyspace's change feed")
	}
	settled, err := s.settled(ctx)
	if err != nil {
		return nil, after, 0, err
	}
	from, to, err := s.span(after, min(end, settled))
	if err != nil {
		return nil, after, 0, err
	}
	if to < from {
		return nil, after, 0, nil
	}
	id := l.ID()
	hs, to, _, err := s.heads(ctx, []int{s.shardOf(id)}, after, from, to)
	if err != nil {
		return nil, after, 0, err
	}
	var want []head
	for _, h := range hs {
		if id.Has(h.list) && h.rec <= upTo.Record {
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
	iter := s.iter(s.session.Query(s.stmt.selectChanges, bucket, shard, ids).
		WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true))
	var out []store.Change
	var id gocql.UUID
	var c store.Change
	var createdAt time.Time
	var keys []string
	var values [][]byte
	for iter.Scan(&id, &c.List.Feature, &createdAt, &c.List.EntityID, &keys, &values) {
		if items, ok := recordItems(keys, values); ok { // else not a record this store wrote
			c.Record, c.At, c.List.CreatedAt = s.recordOf(id), id.Time(), createdAt.UnixNano()
			c.Items = items
			out = append(out, c)
		}
		c, keys, values = store.Change{}, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, classify("reading the change feed", err)
	}
	return out, nil
}

// A record's keys and values are lists, whose every write appends its
// elements anew: a record written twice at one client timestamp (the
// driver retried its write, or hints replayed an attempt beside its
// retry) holds each item twice, the two writes' elements in either order,
// even interleaved. Each item is taken once, at its first place: in every
// merge of copies of one sequence the first places keep its order, so
// every reader of the record, whatever copies it sees, numbers its items
// alike. The values are paired with the keys by the hash each key
// carries, not by place.

// recordItems are the items of a record's keys and values, each once; ok
// is false when they are not a record this store wrote.
func recordItems(keys []string, values [][]byte) ([]store.Item, bool) {
	if len(values) != len(keys) {
		return nil, false
	}
	if ascending(keys) { // as written once: ChangeOf orders them
		items := make([]store.Item, len(keys))
		for i, k := range keys {
			items[i] = store.Item{Key: k, Timestamp: itemkeys.ItemTimestamp(k), Value: values[i]}
		}
		return items, true
	}
	byHash := make(map[string][]byte, len(values))
	for _, v := range values {
		byHash[itemkeys.ValueHash(v)] = v
	}
	seen := make(map[string]bool, len(keys))
	var items []store.Item
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		v, ok := byHash[itemkeys.HashOf(k)]
		if !ok {
			return nil, false
		}
		items = append(items, store.Item{Key: k, Timestamp: itemkeys.ItemTimestamp(k), Value: v})
	}
	return items, true
}

// ascending says whether each key comes after the one before: no key is
// there twice.
func ascending(keys []string) bool {
	for i := 1; i < len(keys); i++ {
		if keys[i] <= keys[i-1] {
			return false
		}
	}
	return true
}

// distinctKeys is how many distinct keys a record's keys hold.
func distinctKeys(keys []string) int {
	if ascending(keys) {
		return len(keys)
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		seen[k] = struct{}{}
	}
	return len(seen)
}
