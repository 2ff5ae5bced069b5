// Package store defines what a list store is: the list features it keeps and
// the operations on one entity's list. Backends (store/cql for ScyllaDB and
// Cassandra, store/embedded for a local Pebble database) implement Store and
// prove it with the conformance suite in store/storetest. A store knows
// nothing of GraphQL or of how values are typed; it stores bytes.
package store

import (
	"context"
	"fmt"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// ValueType is the type of a feature's item values.
type ValueType string

const (
	String  ValueType = "STRING"
	Int     ValueType = "INT"
	Float   ValueType = "FLOAT"
	Boolean ValueType = "BOOLEAN"
	Bytes   ValueType = "BYTES"
	JSON    ValueType = "JSON"
)

// Valid reports whether t is one of the value types.
func (t ValueType) Valid() bool {
	switch t {
	case String, Int, Float, Boolean, Bytes, JSON:
		return true
	}
	return false
}

// Feature is a list feature: a named, versioned list per entity, whose items
// live TTL past their timestamps.
type Feature struct {
	EntityType  string
	Name        string
	Version     string
	ValueType   ValueType
	TTL         time.Duration
	Description string
	CreatedAt   time.Time
	// MaxItems caps each list: reads show only its newest MaxItems items,
	// and adds delete the items pushed out (see ShouldTrim). 0: no cap.
	MaxItems int
	// ItemsSince is set when the feature was created again after a
	// deletion: rows written before it (µs since the epoch, the write time
	// CQL keeps per cell) belong to the deleted feature and are never
	// shown. 0 for a feature never re-created, whose reads ask for no
	// write times.
	ItemsSince int64
	// Live says whether its adds are recorded in the change feed, so that
	// subscriptions may follow its lists: recording costs each add a
	// second write, paid only for the features that need it. Features
	// stored before the flag existed read as live.
	Live bool
	// LiveSince is when SetFeatureLive last made it live, each time later
	// than the time before (NextLiveSince), and kept while it is not live;
	// zero when it has been live since its creation (every gateway that
	// knows it records) or never live. Until every gateway has seen the
	// change, one may still add without recording: CheckLiveSince. A
	// subscription whose feature's LiveSince changes ends: the adds in
	// between were not all recorded.
	LiveSince time.Time
}

// Key is the feature key "$entityType#$name|$version".
func (f *Feature) Key() string { return keys.FeatureKey(f.EntityType, f.Name, f.Version) }

// Validate checks everything a feature needs before it is stored, given the
// latest expiry date the backend can store.
func (f *Feature) Validate(now, expiryCap time.Time) error {
	if err := keys.ValidateFeature(f.EntityType, f.Name, f.Version); err != nil {
		return err
	}
	if !f.ValueType.Valid() {
		return fmt.Errorf("%w value type %s: must be one of STRING, INT, FLOAT, BOOLEAN, BYTES, JSON", errkind.Invalid, errkind.Quote(string(f.ValueType)))
	}
	if len(f.Description) > MaxDescriptionLen {
		return fmt.Errorf("%w description: longer than 1024 bytes", errkind.Invalid)
	}
	if f.MaxItems < 0 || f.MaxItems > MaxMaxItems {
		return fmt.Errorf("%w maxItems %d: must be from 1 to %d, or left out for no cap", errkind.Invalid, f.MaxItems, MaxMaxItems)
	}
	return keys.ValidateFeatureTTL(f.TTL, now, expiryCap)
}

// MaxDescriptionLen bounds a feature's description.
const MaxDescriptionLen = 1024

// MaxMaxItems bounds a feature's cap.
const MaxMaxItems = 100_000

// List names one entity's list of a feature.
type List struct {
	Feature  *Feature
	EntityID string
}

// Validate checks the list's identifiers.
func (l List) Validate() error {
	if l.Feature == nil {
		return fmt.Errorf("%w list: no feature", errkind.Invalid)
	}
	return keys.ValidateList(l.Feature.EntityType, l.Feature.Name, l.Feature.Version, l.EntityID)
}

// Item is an item as stored: its item key, timestamp and value bytes.
type Item struct {
	Key       string
	Timestamp int64 // ns since the Unix epoch
	Value     []byte
}

// NewItem is an item to add: a value and its timestamp.
type NewItem struct {
	Timestamp int64 // ns since the Unix epoch
	Value     []byte
}

// Range selects a page of a list, newest first.
type Range struct {
	MinTimestamp int64  // items older than this are left out; 0 keeps all
	MaxTimestamp int64  // items newer than this are left out; 0 keeps all
	Limit        int    // at most this many items, 1..MaxLimit
	After        string // a cursor (an item key): only items older than it
	// Distinct keeps only the newest item of each value within the page.
	Distinct bool
	// MaxScan bounds the rows a page looks at when it may leave rows out
	// (Distinct, or a feature created again): past it the page ends early,
	// with HasMore and End where the next page starts. At least Limit+1.
	MaxScan int
}

// MaxLimit bounds the items of one page.
const MaxLimit = 10_000

// Validate checks a range.
func (r Range) Validate() error {
	if r.Limit < 1 || r.Limit > MaxLimit {
		return fmt.Errorf("%w limit: must be from 1 to 10000", errkind.Invalid)
	}
	if err := (Window{r.MinTimestamp, r.MaxTimestamp}).Validate(); err != nil {
		return err
	}
	if r.After != "" {
		if _, err := keys.ParseItemKey(r.After); err != nil {
			return err
		}
	}
	return nil
}

// Window selects items by timestamp, both bounds inclusive.
type Window struct {
	MinTimestamp int64 // items older than this are left out; 0 keeps all
	MaxTimestamp int64 // items newer than this are left out; 0 keeps all
}

// Validate checks a window.
func (w Window) Validate() error {
	if w.MinTimestamp < 0 {
		return fmt.Errorf("%w minTimestamp: before 1970-01-01", errkind.Invalid)
	}
	if w.MaxTimestamp < 0 {
		return fmt.Errorf("%w maxTimestamp: before 1970-01-01", errkind.Invalid)
	}
	return nil
}

// Page is one page of a list, newest first.
type Page struct {
	Items   []Item
	HasMore bool // more items may follow End
	// End is where the next page starts (its After): the last item's key,
	// or, when the page stopped at its MaxScan, the last key it looked at.
	// "" when the page is empty and nothing follows.
	End string
}

// SincePage is a stretch of a list from a key on, oldest first.
type SincePage struct {
	Items []Item
	// Next is where the next stretch starts (the from of the next call):
	// the key of the first row not looked at. "" when no row follows.
	// Fewer items than asked say nothing of the end: rows a read leaves
	// out (of a deleted feature) count towards its limit.
	Next string
}

// AddResult counts what an add did.
type AddResult struct {
	Added   int // distinct items written
	Expired int // items already expired, not written
}

// Store keeps list features and their lists. Every list operation is made
// of single-partition queries and batches: one query or batch, or, for a
// read that looks at more rows than it returns, a key-only query and the
// fetch of the values it keeps (RemoveValues deletes what it found in
// batches of ten keys).
type Store interface {
	// CreateFeature stores a new feature, or creates a deleted one again
	// (setting ItemsSince, or dropping the old items), errkind.Conflict if
	// it exists.
	CreateFeature(ctx context.Context, f Feature) (Feature, error)
	// Features lists the live features, of one entity type or of all when
	// entityType is "", ordered by key.
	Features(ctx context.Context, entityType string) ([]Feature, error)
	// DeleteFeature deletes one version of a feature; false if it did not
	// exist. Its items are left to expire.
	DeleteFeature(ctx context.Context, entityType, name, version string) (bool, error)
	// SetFeatureLive makes one version of a feature live or not, setting
	// LiveSince when it becomes live; errkind.NotFound if it does not
	// exist. It changes nothing when the feature already is as asked.
	SetFeatureLive(ctx context.Context, entityType, name, version string, live bool) (Feature, error)

	// Items reads one page of a list, newest first (ReadPage).
	Items(ctx context.Context, l List, r Range) (Page, error)
	// Count counts a list's items in a window, looking at no more than
	// maxRows rows (CountItems).
	Count(ctx context.Context, l List, w Window, maxRows int) (int, error)
	// Histogram counts a list's items in each bucket of a window, looking
	// at no more than maxRows rows (HistogramItems).
	Histogram(ctx context.Context, l List, b Buckets, maxRows int) ([]int, error)
	// Find returns, for each value, the key of the newest item at or after
	// minTimestamp holding it, or "", looking at no more than maxRows rows
	// (FindItems).
	Find(ctx context.Context, l List, values [][]byte, minTimestamp int64, maxRows int) ([]string, error)
	// Since reads the items of a list whose keys are at or after from (an
	// item key or a timestamp prefix), oldest first, looking at no more
	// than limit rows, and says where the next call starts (ReadSince).
	Since(ctx context.Context, l List, from string, limit int) (SincePage, error)
	// AddItems writes items into a list, all or nothing, and trims a
	// capped list (ShouldTrim); for a live feature it also records the add
	// in the change feed, and for one that is not it writes nothing more.
	AddItems(ctx context.Context, l List, items []NewItem) (AddResult, error)
	// RemoveValues removes every item of a list in a window holding one
	// of the values, and returns how many there were, looking at no more
	// than maxRows rows (RemoveMatching).
	RemoveValues(ctx context.Context, l List, values [][]byte, w Window, maxRows int) (int, error)
	// RemoveAll empties a list.
	RemoveAll(ctx context.Context, l List) error

	// Follower: every add to a live feature also records a Change.
	Follower

	// ExpiryCap is the latest expiry date the store can keep.
	ExpiryCap() time.Time
	// Limits are the bounds AddItems enforces.
	Limits() Limits
	// Ready reports whether the store answers and its schema is present.
	Ready(ctx context.Context) error
	Close() error
}

// DefaultRecreateWait is how long after its deletion a feature may be
// created again with another value type or cap, by default: the default
// --feature-staleness and 5 s of clock skew.
const DefaultRecreateWait = 65 * time.Second

// CheckRecreate says whether a feature deleted at deletedAt (old, as it
// was) may be created again as f at now. It may at once when it keeps the
// deleted one's value type and cap: a gateway that has not yet seen the
// deletion reads and writes it as it is. Otherwise only once every gateway
// has (wait after the deletion): until then one could write values of the
// old type, or trim to the old cap, under the new feature.
func CheckRecreate(old, f *Feature, deletedAt, now time.Time, wait time.Duration) error {
	if old.ValueType == f.ValueType && old.MaxItems == f.MaxItems {
		return nil
	}
	if left := deletedAt.Add(wait).Sub(now); left > 0 {
		return fmt.Errorf("feature %s: %w: it was deleted %s ago, and comes back with another value type or cap; a gateway that has not yet seen the deletion could still write it as it was: retry in %d s (--feature-staleness and 5 s of clock skew after the deletion), or keep its value type and cap to create it at once",
			f.Key(), errkind.Conflict, now.Sub(deletedAt).Round(time.Second), int(left.Seconds()+0.999))
	}
	return nil
}

// NextLiveSince is the LiveSince of a feature made live at now, whose
// LiveSince was last: to the millisecond, and later than last, so that a
// feature made not live and live again within a millisecond still shows
// the change.
func NextLiveSince(now, last time.Time) time.Time {
	t := now.Truncate(time.Millisecond).UTC()
	if !t.After(last) {
		t = last.Add(time.Millisecond).UTC()
	}
	return t
}

// CheckLiveSince says whether a subscription to f may start at now: a
// feature made live less than wait ago (--feature-staleness and the clock
// skew allowance) may still be added to, without a record, by a gateway
// whose snapshot has not seen the change yet, so a subscription could miss
// an add made after it started.
func CheckLiveSince(f *Feature, now time.Time, wait time.Duration) error {
	if f.LiveSince.IsZero() {
		return nil
	}
	if left := f.LiveSince.Add(wait).Sub(now); left > 0 {
		return fmt.Errorf("feature %s: %w: it was made live %s ago, and a gateway that has not yet seen that could still add to it without recording the add: subscribe in %d s (--feature-staleness and 5 s of clock skew after it was made live)",
			f.Key(), errkind.Conflict, now.Sub(f.LiveSince).Round(time.Second), int(left.Seconds()+0.999))
	}
	return nil
}

// NotLive is the error for a subscription to a feature that is not live.
func NotLive(f *Feature) error {
	return fmt.Errorf("%w feature %s: it is not live, so its adds are not recorded and cannot be followed; make it live with setListFeatureLive(entityType: %q, name: %q, version: %q, live: true) (or create it with live: true)",
		errkind.Invalid, f.Key(), f.EntityType, f.Name, f.Version)
}

// FeatureExists is the error for creating a feature that exists.
func FeatureExists(key string) error {
	return fmt.Errorf("feature %s: %w: it already exists", key, errkind.Conflict)
}
