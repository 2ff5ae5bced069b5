package store

import (
	"fmt"
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
		return nil, 0, fmt.Errorf("%w add: %d items, more than the %d one call may add", errkind.Invalid, len(items), lim.MaxAddItems)
	}
	size := len(l.Feature.Key()) + len(l.EntityID)
	for i, it := range items {
		if len(it.Value) > lim.MaxValueBytes {
			return nil, 0, fmt.Errorf("%w item %d: value of %d bytes, more than the %d allowed", errkind.Invalid, i, len(it.Value), lim.MaxValueBytes)
		}
		size += keys.ItemKeyLen + len(it.Value) + rowOverhead
	}
	if size > lim.MaxAddBytes {
		return nil, 0, fmt.Errorf("%w add: %d bytes, more than the %d one call may write; split it", errkind.Invalid, size, lim.MaxAddBytes)
	}
	writes := make([]Write, 0, len(items))
	seen := make(map[string]struct{}, len(items))
	expired := 0
	for i, it := range items {
		ttl, live, err := keys.ItemTTL(it.Timestamp, l.Feature.TTL, now, expiryCap)
		if err != nil {
			return nil, 0, fmt.Errorf("item %d: %w", i, err)
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
