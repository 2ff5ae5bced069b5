package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// Limits bound what one call may write. Every backend enforces them before
// anything is sent, so an oversized call fails whole instead of partly.
type Limits struct {
	// MaxAddItems bounds the items of one add.
	MaxAddItems int
	// MaxAddBytes bounds the bytes of one add (keys, values and per-row
	// overhead). A single-partition mutation must stay under half a
	// commitlog segment (16 MiB by default) on Cassandra and ScyllaDB.
	MaxAddBytes int
	// MaxValueBytes bounds one value. Cassandra refuses to index a value of
	// 65,535 bytes or more, so a larger one would fail under RemoveByIndex.
	MaxValueBytes int
}

// DefaultLimits are safe on a stock Cassandra or ScyllaDB node.
var DefaultLimits = Limits{MaxAddItems: 10_000, MaxAddBytes: 8 << 20, MaxValueBytes: 32 << 10}

// rowOverhead approximates the bytes a row adds to a mutation beyond its key
// and value (clustering prefix, cell headers, TTL and timestamp).
const rowOverhead = 32

// Write is one item as a backend writes it.
type Write struct {
	Key   string // item key
	Value []byte
	TTL   int32 // seconds, never 0
}

// PrepareAdd turns the items of an add into the writes a backend sends: it
// validates the list and every timestamp, drops items already expired
// (counting them), merges items that are the same item (same timestamp and
// value), and checks the call against the limits. An error means nothing may
// be written.
func PrepareAdd(l List, items []NewItem, now, expiryCap time.Time, lim Limits) ([]Write, int, error) {
	if err := l.Validate(); err != nil {
		return nil, 0, err
	}
	if len(items) > lim.MaxAddItems {
		return nil, 0, fmt.Errorf("%w items: %d items, more than the %d one call may add (--max-add-items)", errkind.Invalid, len(items), lim.MaxAddItems)
	}
	size := len(l.Feature.Key()) + len(l.EntityID)
	for i, it := range items {
		if len(it.Value) > lim.MaxValueBytes {
			return nil, 0, fmt.Errorf("%w items[%d]: value of %d bytes, more than the %d allowed (--max-value-bytes)", errkind.Invalid, i, len(it.Value), lim.MaxValueBytes)
		}
		size += keys.ItemKeyLen + len(it.Value) + rowOverhead
	}
	if size > lim.MaxAddBytes {
		return nil, 0, fmt.Errorf("%w items: %d bytes, more than the %d one call may write; split it", errkind.Invalid, size, lim.MaxAddBytes)
	}
	writes := make([]Write, 0, len(items))
	seen := make(map[string]struct{}, len(items))
	expired := 0
	for i, it := range items {
		ttl, live, err := keys.ItemTTL(it.Timestamp, l.Feature.TTL, now, expiryCap)
		if err != nil {
			return nil, 0, fmt.Errorf("items[%d]: %w", i, err)
		}
		if !live {
			expired++
			continue
		}
		k := keys.ItemKey(it.Timestamp, it.Value)
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		writes = append(writes, Write{Key: k, Value: it.Value, TTL: ttl})
	}
	return writes, expired, nil
}

// A capped list is trimmed by the adds: an add that trims reads the keys of
// the list's newest MaxItems visible rows (one key-only query) and deletes,
// in its own batch, every row below the newest MaxItems of those and of its
// own items (one range delete, item_key < boundary). Reading MaxItems keys
// on every add would cost an add as much as the cap, so an add of n items
// trims with probability n/TrimSlack: a list is trimmed about once every
// TrimSlack items added, holds MaxItems + TrimSlack rows on average just
// before a trim, and more than MaxItems + k·TrimSlack with probability
// about e^-k. Reads never show the rows past the cap (ReadPage ranks
// them), so the slack costs space, never correctness.

// TrimSlack is how many items past its cap a list takes, on average,
// before an add trims it: an eighth of the cap, at least 16.
func TrimSlack(maxItems int) int { return max(maxItems/8, 16) }

// ShouldTrim tells an add of n items to a list whether to trim it.
func ShouldTrim(f *Feature, n int) bool {
	return f.MaxItems > 0 && rand.IntN(TrimSlack(f.MaxItems)) < n
}

// TrimBoundary is the key below which every row of a capped list is past
// its cap once an add writes added (its item keys): the MaxItems-th newest
// of the keys of top (the list's newest visible keys, newest first, from
// NewestKeys) and added. "" when the list stays within its cap.
func TrimBoundary(f *Feature, top []string, added []Write) string {
	merged := make([]string, 0, len(top)+len(added))
	merged = append(merged, top...)
	for _, w := range added {
		merged = append(merged, w.Key)
	}
	slices.Sort(merged)
	merged = slices.Compact(merged)
	if len(merged) <= f.MaxItems {
		return ""
	}
	return merged[len(merged)-f.MaxItems]
}

// NewestKeys reads, with scan, the keys of a capped list's newest MaxItems
// visible rows, newest first.
func NewestKeys(ctx context.Context, l List, scan Scanner) ([]string, error) {
	v := &view{f: l.Feature}
	s, _ := v.scanFor(region{})
	s.Limit = math.MaxInt32
	v.rankLimit(&s)
	var top []string
	err := scan(ctx, s, func(row Row) bool {
		ok, end := v.visible(row)
		if ok {
			top = append(top, row.Key)
		}
		return !end
	})
	return top, err
}
