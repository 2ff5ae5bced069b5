package store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// The change feed. Every add to a live feature (Feature.Live) a store
// acknowledges is also a record of the store's change feed: what the add
// wrote, to which list, at a position; an add to one that is not live is
// not, and costs no more than its items.
// Subscriptions to live lists follow the feed, not the lists: an item is
// delivered because it was added, whatever its timestamp, and a list
// nobody adds to costs nothing to watch. Writers that bypass the store
// write no record, and their items are not delivered.
//
// The feed is read by pulling: a reader asks for the records after a
// position and gets them in the feed's order, up to the feed's settled
// end, where no record can come before one already read. A store never
// calls its reader back.

// ListID names a list in the feed: a feature created again (CreatedAt, ns)
// is another list.
type ListID struct {
	Feature   string // the feature key
	CreatedAt int64
	EntityID  string
}

// ID names the list in the feed.
func (l List) ID() ListID { return ListID{l.Feature.Key(), l.Feature.CreatedAt.UnixNano(), l.EntityID} }

// Has says whether a record of the list r is one of the list l: the same
// feature key and entity, of l's feature as created, or, written by a
// gateway that had not yet seen the feature created again, of an earlier
// one. Such a record is of an add made after the feature was created
// again, whose items the list shows: positions from before a feature was
// created are refused (CheckResume), and a subscription starts after now.
func (l ListID) Has(r ListID) bool {
	return l.Feature == r.Feature && l.EntityID == r.EntityID && r.CreatedAt <= l.CreatedAt
}

// Change is one record of the feed: the items one add wrote to one list,
// oldest first.
type Change struct {
	Record string    // the record's place in the feed (Position.Record)
	At     time.Time // when it was recorded
	List   ListID
	Items  []Item
}

// Position is a place in the feed: just after the item Item of the record
// Record, or, with Item AllItems, just after the whole record. A record is
// named by its store in bytes that order as the feed does, the first its
// kind; a position of another store, or of another feed of the same kind,
// is one the feed does not hold.
type Position struct {
	Record string
	Item   uint32
}

// AllItems is the Item of a position after a whole record.
const AllItems = ^uint32(0)

// After is the position just after the item i of c.
func (c Change) After(i int) Position { return Position{c.Record, uint32(i)} }

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	if p.Record != q.Record {
		return p.Record < q.Record
	}
	return p.Item < q.Item
}

// Before reports whether the item i of the record rec comes after p: not
// yet delivered to a reader at p.
func (p Position) Before(rec string, i int) bool {
	return p.Record < rec || (p.Record == rec && p.Item < uint32(i))
}

// Behind reports whether a reader at p has items of the record rec still
// to read.
func (p Position) Behind(rec string) bool {
	return p.Record < rec || (p.Record == rec && p.Item != AllItems)
}

// String is the position as clients see it: opaque, URL-safe.
func (p Position) String() string {
	b := binary.BigEndian.AppendUint32([]byte(p.Record), p.Item)
	return base64.RawURLEncoding.EncodeToString(b)
}

// The kinds of store: the first byte of each one's records, and their
// length. Defined once here, so that a position of no kind of store, or
// the wrong length for its kind, is malformed (ParsePosition) rather than
// one of another feed.
const (
	CQLPositionKind = 'c'
	CQLRecordLen    = 21 // the kind, the feed's identity (4), a time UUID's ticks (8) and the rest of it (8)

	EmbeddedPositionKind = 'e'
	EmbeddedRecordLen    = 17 // the kind, the data folder's epoch (8), the record's number (8)
)

// recordLen is the length of the records of the kind of store kind; 0 for
// no kind.
func recordLen(kind byte) int {
	switch kind {
	case CQLPositionKind:
		return CQLRecordLen
	case EmbeddedPositionKind:
		return EmbeddedRecordLen
	}
	return 0
}

// maxPositionLen bounds the text of a position a client sends.
const maxPositionLen = 64

// ParsePosition reads a position a client sent (Position.String): one of
// a kind of store, of its length, else errkind.Invalid. Whether the feed
// holds it is the store's to say (CheckPosition).
func ParsePosition(s string) (Position, error) {
	if len(s) > maxPositionLen {
		return Position{}, fmt.Errorf("%w position: longer than %d characters; send the position of an item as it came", errkind.Invalid, maxPositionLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 5 || len(b)-4 != recordLen(b[0]) {
		return Position{}, fmt.Errorf("%w position %s: not a position; send the position of an item as it came", errkind.Invalid, errkind.Quote(s))
	}
	return Position{Record: string(b[:len(b)-4]), Item: binary.BigEndian.Uint32(b[len(b)-4:])}, nil
}

// PositionExpired is the error for a position the feed no longer holds
// every record after (or never did).
func PositionExpired(why string) error {
	return fmt.Errorf("%w: %s; read the list again, then subscribe without a position", errkind.PositionExpired, why)
}

// Follower reads a store's change feed.
type Follower interface {
	// FeedHead is where a subscription starts, and how long after the
	// call it counts as started: a reader starting from the head gets
	// every record of an add begun once that time has passed, and none of
	// one ended before the call. On the embedded store the head is the
	// settled end, started at once; on a cluster it is the clocks' margin
	// ahead of now, started once now is the margin past it (AwaitHead
	// waits for that).
	FeedHead(ctx context.Context) (head Position, startsIn time.Duration, err error)
	// ReadFeed returns the records after `after`, up to the settled end,
	// of the lists watched says yes to, in the feed's order: at least one
	// record if any, and no more once their items pass about maxBytes. It
	// returns the position to read from next, which may be past the last
	// record returned (records of other lists, or none). watched runs on
	// the caller's goroutine, and the store holds no lock while it does.
	// When the feed no longer keeps every record after `after` (past the
	// retention, swept or not) as it reads, it fails with PositionExpired:
	// it never skips a record silently.
	ReadFeed(ctx context.Context, after Position, watched func(ListID) bool, maxBytes int) ([]Change, Position, error)
	// WaitFeed returns once the feed may hold records after `after` (at
	// once if it does; on a store that cannot tell, after its poll
	// interval), or ctx's error.
	WaitFeed(ctx context.Context, after Position) error
	// ListFeed returns the records of one list after `after`, up to and
	// with upTo's record and no further than the settled end, in the
	// feed's order, as ReadFeed does (maxBytes, PositionExpired), the
	// position reached, and how many records of other lists it looked at
	// to find them (what it costs). No record, and `after` reached, means
	// the feed is not settled past `after` yet: WaitFeed, then ask again.
	ListFeed(ctx context.Context, l List, after, upTo Position, maxBytes int) (changes []Change, reached Position, looked int, err error)
	// CheckPosition returns nil when the feed holds every record after p,
	// else PositionExpired (a position of another feed, older than the
	// feed keeps, ahead of it, or after an item of no record it holds).
	CheckPosition(ctx context.Context, p Position) error
	// PositionTime is when the record of p was recorded; false when the
	// feed cannot tell (a position of another feed, or of a record no
	// longer kept).
	PositionTime(p Position) (time.Time, bool)
	// LiveWait is how long after a feature is made live a subscription to
	// it waits (CheckLiveSince, CheckResume), given the fleet's wait
	// (--feature-staleness and the clock skew allowance): on a cluster,
	// wait, since a gateway whose snapshot has not seen the change may
	// still add without a record; 0 on the embedded store, which one
	// process serves and which decides at each add's commit whether its
	// feature is live.
	LiveWait(wait time.Duration) time.Duration
}

// AwaitHead is f's head, once it counts as started (Follower.FeedHead).
func AwaitHead(ctx context.Context, f Follower) (Position, error) {
	head, startsIn, err := f.FeedHead(ctx)
	if err != nil || startsIn <= 0 {
		return head, err
	}
	t := time.NewTimer(startsIn)
	defer t.Stop()
	select {
	case <-t.C:
		return head, nil
	case <-ctx.Done():
		return Position{}, context.Cause(ctx)
	}
}

// CheckResume says whether a subscription to f may resume after a
// position recorded at `at`: not from before f was created (the records
// of that time are of the feature deleted since), nor from before f was
// last made live and every gateway had seen it (wait after LiveSince),
// since the adds of that time were not all recorded.
func CheckResume(f *Feature, at time.Time, wait time.Duration) error {
	if at.Before(f.CreatedAt) {
		return PositionExpired(fmt.Sprintf("feature %s was created at %s, after this position: the adds before were to the feature deleted since", f.Key(),
			f.CreatedAt.UTC().Format(time.RFC3339Nano)))
	}
	if f.LiveSince.IsZero() || !at.Before(f.LiveSince.Add(wait)) {
		return nil
	}
	return PositionExpired(fmt.Sprintf("feature %s was made live at %s, after this position, and not every add of before %s was recorded", f.Key(),
		f.LiveSince.UTC().Format(time.RFC3339), f.LiveSince.Add(wait).UTC().Format(time.RFC3339)))
}

// ChangeOf is the record of an add's writes, its items oldest first (in
// key order), as they are delivered.
func ChangeOf(record string, at time.Time, l List, writes []Write) Change {
	c := Change{Record: record, At: at, List: l.ID(), Items: make([]Item, len(writes))}
	for i, w := range writes {
		c.Items[i] = Item{Key: w.Key, Timestamp: keys.ItemTimestamp(w.Key), Value: w.Value}
	}
	slices.SortFunc(c.Items, func(a, b Item) int { return strings.Compare(a.Key, b.Key) })
	return c
}

// ChangeBytes is what a record's items weigh in a reader's memory: the
// bound of ReadFeed and ListFeed.
func ChangeBytes(c Change) int {
	n := 0
	for _, it := range c.Items {
		n += len(it.Key) + len(it.Value) + ItemOverhead
	}
	return n
}

// ItemOverhead is what an item held in memory weighs beyond its key and
// value.
const ItemOverhead = 64
