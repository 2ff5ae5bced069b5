package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// The change feed, kept in the database with the items: an add's record
// is written in the add's own batch, so an add and its record are one
// write, and positions survive a restart. Records are numbered as their
// adds begin to commit, by the time in ns (feedSeq); they are kept for
// FeedRetention, then swept.
//
//	g <seq (8 bytes)>                 →  at (8 bytes, unix ns) + list id
//	c <list id> <seq (8 bytes)>       →  at (8 bytes) + the items: (uvarint len, key, uvarint len, value)…
//	m feed                            →  epoch (8 bytes) + floor (8 bytes)
//	m reserve                         →  the highest number that may have been given (8 bytes)
//
// A list id is <feature key> 00 <created at (8 bytes)> <entity id> 00.
// The epoch is drawn when the feed begins, and again in a backup (Backup):
// a position of another data folder, or of the folder a backup was made
// of, names another epoch. The floor is the oldest number not swept.
const (
	feedPrefix   = 'g'
	changePrefix = 'c'
	metaPrefix   = 'm'
)

var (
	feedMetaKey = []byte{metaPrefix, 'f', 'e', 'e', 'd'}
	reserveKey  = []byte{metaPrefix, 'r', 'e', 's', 'e', 'r', 'v', 'e'}
)

// DefaultFeedRetention is how long records are kept, as on a cluster.
const DefaultFeedRetention = 10 * time.Minute

// reserveAhead is how far past the number it gives the numbering writes
// down that it may have gone (reserveKey): at most one synced write that
// often, and a restart numbers from there on.
const reserveAhead = 10 * time.Second

// feedSeq numbers records in the order their adds commit. A number is the
// time in ns as it is given, or one more than the last if that is later:
// it says when, not how many adds came before it (another tenant's
// included), and no number is given twice, across restarts too, whatever
// the clock does: a restart numbers past every number the last run may
// have given (reserved), committed or not, so that a position handed out
// at a number given up never names a later record. Numbers are given
// before a commit; the feed is settled up to the highest number below
// which every add has committed or given up, and readers never read past
// it, so that no record can appear before one read.
type feedSeq struct {
	epoch [8]byte // set at Open

	// mu guards what follows. Once in reserveAhead give holds it through
	// a synced write of the reserve: the readers and adds of that moment
	// wait for it.
	mu       sync.Mutex
	last     uint64              // the last number given
	reserved uint64              // no number past it was given: written down (reserveKey) before one is
	pending  map[uint64]struct{} // given, not yet committed or given up
	settled  uint64              // every number up to it is committed or given up
	floor    uint64              // the oldest number not swept
	moved    chan struct{}       // closed, and replaced, when settled moves
}

// openFeed reads the feed's epoch, floor and reserve, making them for a
// new folder, and numbers on past the newest record kept and every number
// the last run may have given.
func (s *Store) openFeed() error {
	f := &s.feed
	f.pending, f.moved = map[uint64]struct{}{}, make(chan struct{})
	epoch, floor, ok, err := readFeedMeta(s.db)
	switch {
	case err != nil:
		return err
	case !ok:
		if _, err := rand.Read(f.epoch[:]); err != nil {
			return err
		}
		f.floor = 1
		if err := s.db.Set(feedMetaKey, feedMeta(f.epoch, f.floor), pebble.Sync); err != nil {
			return err
		}
	default:
		f.epoch, f.floor = epoch, floor
	}
	f.last = f.floor - 1
	v, closer, err := s.db.Get(reserveKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound): // a folder of before the reserve: numbered by count
	case err != nil:
		return fmt.Errorf("reading the change feed's state: %w", err)
	default:
		well := len(v) == 8
		if well {
			f.reserved = binary.BigEndian.Uint64(v)
		}
		closer.Close()
		if !well {
			return errors.New("the change feed's reserve is malformed")
		}
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{feedPrefix}, UpperBound: []byte{feedPrefix + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	if it.Last() {
		f.last = max(f.last, binary.BigEndian.Uint64(it.Key()[1:]))
	}
	// The last run is over: every number it gave committed or never will.
	f.last = max(f.last, f.reserved)
	f.settled = f.last
	return it.Error()
}

// readFeedMeta reads the feed's epoch and floor from db; ok false when it
// has none.
func readFeedMeta(db pebble.Reader) (epoch [8]byte, floor uint64, ok bool, err error) {
	v, closer, err := db.Get(feedMetaKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return epoch, 0, false, nil
	}
	if err != nil {
		return epoch, 0, false, fmt.Errorf("reading the change feed's state: %w", err)
	}
	defer closer.Close()
	if len(v) != 16 {
		return epoch, 0, false, fmt.Errorf("the change feed's state is malformed (%d bytes)", len(v))
	}
	return [8]byte(v[:8]), binary.BigEndian.Uint64(v[8:]), true, nil
}

func feedMeta(epoch [8]byte, floor uint64) []byte {
	return binary.BigEndian.AppendUint64(epoch[:], floor)
}

// give numbers a record about to be committed, at now; done must follow
// unless it fails. Once in reserveAhead it writes down how far it may go
// before it gives a number past the last reserve.
func (s *Store) give(now time.Time) (uint64, error) {
	f := &s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	n := max(f.last+1, uint64(max(now.UnixNano(), 0)))
	if n > f.reserved {
		r := n + uint64(reserveAhead)
		if err := s.db.Set(reserveKey, binary.BigEndian.AppendUint64(nil, r), pebble.Sync); err != nil {
			return 0, fmt.Errorf("numbering the record of an add: %w", err)
		}
		f.reserved = r
	}
	f.last = n
	f.pending[n] = struct{}{}
	return n, nil
}

// done marks n committed or given up, and moves the settled end.
func (f *feedSeq) done(n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, n)
	settled := f.last
	for p := range f.pending {
		settled = min(settled, p-1)
	}
	if settled > f.settled {
		f.settled = settled
		close(f.moved)
		f.moved = make(chan struct{})
	}
}

// state is the settled end, the floor, and a channel closed when the
// settled end next moves.
func (f *feedSeq) state() (settled, floor uint64, moved <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.settled, f.floor, f.moved
}

func (f *feedSeq) record(n uint64) string {
	b := append(append(make([]byte, 0, store.EmbeddedRecordLen), store.EmbeddedPositionKind), f.epoch[:]...)
	return string(binary.BigEndian.AppendUint64(b, n))
}

// seqOf reads the number of a record position of this feed.
func (f *feedSeq) seqOf(rec string) (uint64, bool) {
	if len(rec) != store.EmbeddedRecordLen || rec[0] != store.EmbeddedPositionKind || rec[1:9] != string(f.epoch[:]) {
		return 0, false
	}
	return binary.BigEndian.Uint64([]byte(rec[9:])), true
}

// listID is a list's id in the feed's keys.
func listID(id store.ListID) []byte {
	b := make([]byte, 0, len(id.Feature)+len(id.EntityID)+10)
	b = append(append(b, id.Feature...), 0)
	b = binary.BigEndian.AppendUint64(b, uint64(id.CreatedAt))
	return append(append(b, id.EntityID...), 0)
}

func parseListID(b []byte) (store.ListID, bool) {
	fk, rest, ok := bytes.Cut(b, []byte{0})
	if !ok || len(rest) < 9 || rest[len(rest)-1] != 0 {
		return store.ListID{}, false
	}
	return store.ListID{Feature: string(fk), CreatedAt: int64(binary.BigEndian.Uint64(rest[:8])), EntityID: string(rest[8 : len(rest)-1])}, true
}

func changeKey(list []byte, n uint64) []byte {
	k := append(append(make([]byte, 0, 9+len(list)), changePrefix), list...)
	return binary.BigEndian.AppendUint64(k, n)
}

func feedKey(n uint64) []byte { return binary.BigEndian.AppendUint64([]byte{feedPrefix}, n) }

// writeRecord puts an add's record in its batch, numbered n.
func writeRecord(b *pebble.Batch, n uint64, at time.Time, l store.List, writes []store.Write) error {
	id := listID(l.ID())
	head := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), uint64(at.UnixNano()))
	if err := b.Set(feedKey(n), append(head, id...), nil); err != nil {
		return err
	}
	c := store.ChangeOf("", at, l, writes)
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+store.ChangeBytes(c)+8*len(c.Items)), uint64(at.UnixNano()))
	for _, it := range c.Items {
		v = binary.AppendUvarint(v, uint64(len(it.Key)))
		v = append(v, it.Key...)
		v = binary.AppendUvarint(v, uint64(len(it.Value)))
		v = append(v, it.Value...)
	}
	return b.Set(changeKey(id, n), v, nil)
}

// readRecord decodes a record's value.
func readRecord(rec string, list store.ListID, v []byte) (store.Change, error) {
	if len(v) < 8 {
		return store.Change{}, errors.New("a change record is malformed")
	}
	c := store.Change{Record: rec, At: time.Unix(0, int64(binary.BigEndian.Uint64(v))), List: list}
	v = v[8:]
	for len(v) > 0 {
		var parts [2][]byte
		for i := range parts {
			n, w := binary.Uvarint(v)
			if w <= 0 || uint64(len(v)-w) < n {
				return store.Change{}, errors.New("a change record is malformed")
			}
			parts[i] = bytes.Clone(v[w : w+int(n)])
			v = v[w+int(n):]
		}
		key := string(parts[0])
		c.Items = append(c.Items, store.Item{Key: key, Timestamp: keys.ItemTimestamp(key), Value: parts[1]})
	}
	return c, nil
}

// FeedHead is the settled end of the feed, started at once: the adds
// after it are numbered after it.
func (s *Store) FeedHead(context.Context) (store.Position, time.Duration, error) {
	settled, _, _ := s.feed.state()
	return store.Position{Record: s.feed.record(settled), Item: store.AllItems}, 0, nil
}

// from is the number of the first record a reader at p may not have
// read whole; ok false for a position of another feed.
func (f *feedSeq) from(p store.Position) (uint64, bool) {
	n, ok := f.seqOf(p.Record)
	if ok && p.Item == store.AllItems {
		n++
	}
	return n, ok
}

// The ways a position is not one the feed holds.
var (
	errOtherFolder = store.PositionExpired("the position is not one of this gateway's data folder (nor of a backup of it: a backup begins a feed of its own)")
	errNotKept     = store.PositionExpired("the change feed no longer keeps the adds after this position (--change-feed-retention)")
	errAhead       = store.PositionExpired("the position is ahead of the change feed (of a copy of this data folder made before it?)")
	errNoItem      = store.PositionExpired("the position names no item the change feed holds")
)

// CheckPosition says whether every record after p is kept: p is of this
// folder's feed, at most its settled end, not before what it keeps, and,
// after an item, names an item of a record it holds.
func (s *Store) CheckPosition(_ context.Context, p store.Position) error {
	n, ok := s.feed.seqOf(p.Record)
	if !ok {
		return errOtherFolder
	}
	// The settled end first: the view then holds every record up to it.
	settled, _, _ := s.feed.state()
	if n > settled {
		return errAhead
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	from, _ := s.feed.from(p)
	if err := s.kept(snap, from); err != nil {
		return err
	}
	if p.Item != store.AllItems {
		c, ok, err := s.readRecordOf(snap, n)
		if err != nil {
			return err
		}
		if !ok || uint32(len(c.Items)) <= p.Item {
			return errNoItem
		}
	}
	return nil
}

// kept says, as errNotKept, whether the view r, taken before the call,
// lacks records from the number n on that the feed held: swept (the floor
// is read after r was taken, and the sweep raises it before it deletes,
// so records r lacks are below it) or past the retention, swept or not
// yet.
func (s *Store) kept(r pebble.Reader, n uint64) error {
	if _, floor, _ := s.feed.state(); n < floor {
		return errNotKept
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: feedKey(n), UpperBound: []byte{feedPrefix + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	if it.First() && len(it.Value()) >= 8 && int64(binary.BigEndian.Uint64(it.Value())) < s.now().Add(-s.cfg.FeedRetention).UnixNano() {
		return errNotKept
	}
	return it.Error()
}

// readRecordOf reads the record numbered n in the view r; ok false when
// it holds none.
func (s *Store) readRecordOf(r pebble.Reader, n uint64) (store.Change, bool, error) {
	v, closer, err := r.Get(feedKey(n))
	if errors.Is(err, pebble.ErrNotFound) {
		return store.Change{}, false, nil
	}
	if err != nil {
		return store.Change{}, false, fmt.Errorf("reading the change feed: %w", err)
	}
	head := bytes.Clone(v)
	closer.Close()
	if len(head) < 8 {
		return store.Change{}, false, errors.New("a change record's head is malformed")
	}
	id, ok := parseListID(head[8:])
	if !ok {
		return store.Change{}, false, errors.New("a change record's head is malformed")
	}
	c, err := s.readChange(r, s.feed.record(n), id, head[8:], n)
	return c, err == nil, err
}

// LiveWait is 0: one process serves the data folder, and an add that
// commits after SetFeatureLive made its feature live records, whatever
// feature it was given (AddItems).
func (s *Store) LiveWait(time.Duration) time.Duration { return 0 }

// PositionTime is when the record numbered in p was recorded, as its head
// says.
func (s *Store) PositionTime(p store.Position) (time.Time, bool) {
	n, ok := s.feed.seqOf(p.Record)
	if !ok {
		return time.Time{}, false
	}
	v, closer, err := s.db.Get(feedKey(n))
	if err != nil {
		return time.Time{}, false
	}
	defer closer.Close()
	if len(v) < 8 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))), true
}

// WaitFeed returns once a record after `after` has settled.
func (s *Store) WaitFeed(ctx context.Context, after store.Position) error {
	from, ok := s.feed.from(after)
	if !ok {
		return errOtherFolder
	}
	for {
		settled, _, moved := s.feed.state()
		if settled >= from {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ReadFeed reads the records after `after` up to the settled end: their
// numbers and lists, then the records of the lists watched, all in one
// view of the database. A read from a number the feed no longer keeps
// fails (kept) rather than skip what was swept.
func (s *Store) ReadFeed(ctx context.Context, after store.Position, watched func(store.ListID) bool, maxBytes int) ([]store.Change, store.Position, error) {
	from, ok := s.feed.from(after)
	if !ok {
		return nil, after, errOtherFolder
	}
	// The settled end first: the view then holds every record up to it.
	settled, _, _ := s.feed.state()
	reached := after
	if from > settled {
		return nil, reached, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	if err := s.kept(snap, from); err != nil {
		return nil, reached, err
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: feedKey(from), UpperBound: feedKey(settled + 1)})
	if err != nil {
		return nil, reached, err
	}
	defer it.Close()
	var out []store.Change
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return out, reached, err
		}
		n := binary.BigEndian.Uint64(it.Key()[1:])
		rec := s.feed.record(n)
		if v := it.Value(); len(v) > 8 {
			id, ok := parseListID(v[8:])
			if ok && watched(id) {
				c, err := s.readChange(snap, rec, id, v[8:], n)
				if err != nil {
					return out, reached, err
				}
				if len(out) > 0 && size+store.ChangeBytes(c) > maxBytes {
					return out, reached, nil // the rest next time
				}
				out = append(out, c)
				size += store.ChangeBytes(c)
			}
		}
		reached = store.Position{Record: rec, Item: store.AllItems}
	}
	if err := it.Error(); err != nil {
		return out, reached, err
	}
	return out, store.Position{Record: s.feed.record(settled), Item: store.AllItems}, nil
}

// readChange reads the record n of a list in the view r, which holds its
// head: the two are written, and swept, in one batch.
func (s *Store) readChange(r pebble.Reader, rec string, id store.ListID, list []byte, n uint64) (store.Change, error) {
	v, closer, err := r.Get(changeKey(list, n))
	if err != nil {
		return store.Change{}, fmt.Errorf("reading the change feed's record %d: %w", n, err)
	}
	defer closer.Close()
	return readRecord(rec, id, v)
}

// ListFeed reads the records of one list after `after` up to upTo's, by
// the list's own keys: it looks at no other list's. Like ReadFeed, it
// reads one view, and fails rather than skip what was swept.
func (s *Store) ListFeed(ctx context.Context, l store.List, after, upTo store.Position, maxBytes int) ([]store.Change, store.Position, int, error) {
	from, ok := s.feed.from(after)
	last, ok2 := s.feed.seqOf(upTo.Record)
	if !ok || !ok2 {
		return nil, after, 0, errOtherFolder
	}
	reached := after
	if from > last {
		return nil, reached, 0, nil
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	if err := s.kept(snap, from); err != nil {
		return nil, reached, 0, err
	}
	list := listID(l.ID())
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: changeKey(list, from), UpperBound: changeKey(list, last+1)})
	if err != nil {
		return nil, reached, 0, err
	}
	defer it.Close()
	var out []store.Change
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return out, reached, 0, err
		}
		k := it.Key()
		rec := s.feed.record(binary.BigEndian.Uint64(k[len(k)-8:]))
		c, err := readRecord(rec, l.ID(), it.Value())
		if err != nil {
			return out, reached, 0, err
		}
		if len(out) > 0 && size+store.ChangeBytes(c) > maxBytes {
			return out, reached, 0, nil // the rest next time
		}
		out = append(out, c)
		size += store.ChangeBytes(c)
		reached = store.Position{Record: rec, Item: store.AllItems}
	}
	if err := it.Error(); err != nil {
		return out, reached, 0, err
	}
	return out, upTo, 0, nil
}

// sweepFeed deletes the records older than the retention, a batch at a
// time, and raises the floor past them.
func (s *Store) sweepFeed() error {
	cutoff := s.now().Add(-s.cfg.FeedRetention).UnixNano()
	for {
		settled, floor, _ := s.feed.state()
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: feedKey(floor), UpperBound: feedKey(settled + 1)})
		if err != nil {
			return err
		}
		b := s.db.NewBatch()
		next, n := floor, 0
		for ok := it.First(); ok && n < sweepBatch; ok = it.Next() {
			v := it.Value()
			if len(v) < 8 || int64(binary.BigEndian.Uint64(v)) >= cutoff {
				break
			}
			if err := b.Delete(changeKey(v[8:], binary.BigEndian.Uint64(it.Key()[1:])), nil); err != nil {
				break
			}
			next = binary.BigEndian.Uint64(it.Key()[1:]) + 1
			n++
		}
		err = it.Error()
		it.Close()
		if err == nil && next > floor {
			err = b.DeleteRange(feedKey(floor), feedKey(next), nil)
			if err == nil {
				err = b.Set(feedMetaKey, feedMeta(s.feed.epoch, next), nil)
			}
			if err == nil {
				// The floor rises before the records go, so that no reader
				// is told a position is kept while its records are swept.
				s.feed.mu.Lock()
				s.feed.floor = next
				s.feed.mu.Unlock()
				err = b.Commit(pebble.NoSync)
			}
		}
		b.Close()
		if err != nil || n < sweepBatch {
			return err
		}
		select {
		case <-s.stop:
			return nil
		default:
		}
	}
}
