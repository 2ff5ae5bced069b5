package store

import (
	"slices"
	"strings"
	"time"

	"github.com/listgate/listgate/store/keys"
)

// The change feed. Every add a store acknowledges is also a record of the
// store's change feed, written after its items: what the add wrote, to
// which list, and when. Subscriptions to live lists follow the feed, not
// the lists: an item is delivered because it was added, whatever its
// timestamp, and a list nobody adds to costs nothing to watch. Writers that
// bypass the store write no record, and their items are not delivered.

// ListID names a list in the feed: a feature created again (CreatedAt, ns)
// is another list.
type ListID struct {
	Feature   string // the feature key
	CreatedAt int64
	EntityID  string
}

// ID names the list in the feed.
func (l List) ID() ListID { return ListID{l.Feature.Key(), l.Feature.CreatedAt.UnixNano(), l.EntityID} }

// Change is one record of the feed: the items one add wrote to one list,
// oldest first.
type Change struct {
	ID    string    // unique per record
	At    time.Time // when it was recorded, on the clock the feed orders records by
	List  ListID
	Items []Item
}

// Follower reads a store's change feed.
type Follower interface {
	// FeedNow is the time on the clock the feed orders records by.
	FeedNow() time.Time
	// Follow has fn called with each record of a time at or after since
	// (by FeedNow's clock) of a list wants says yes to, once, the records
	// of one list in the order the feed keeps them (a record that becomes
	// readable late comes late), until stop is called; stop returns once
	// fn is called no more. A record wants said no to is asked about again
	// while it may still be read. Neither may block.
	Follow(since time.Time, wants func(ListID) bool, fn func(Change)) (stop func())
}

// ChangeOf is the record of an add's writes, its items oldest first (in
// key order), as they are delivered.
func ChangeOf(id string, at time.Time, l List, writes []Write) Change {
	c := Change{ID: id, At: at, List: l.ID(), Items: make([]Item, len(writes))}
	for i, w := range writes {
		c.Items[i] = Item{Key: w.Key, Timestamp: keys.ItemTimestamp(w.Key), Value: w.Value}
	}
	slices.SortFunc(c.Items, func(a, b Item) int { return strings.Compare(a.Key, b.Key) })
	return c
}
