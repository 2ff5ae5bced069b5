package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Item layout. Identifiers never hold 0x00 (keys validates them), so it
// separates their parts. An item is two entries: a read that looks at keys
// alone (a count, a search, a distinct page, a cap's ranking) reads the
// small one, in blocks that hold no values, and costs the same whatever
// the values weigh.
//
//	k <partition> <itemKey>            →  expiry (8 bytes, unix s)
//	v <partition> <itemKey>            →  expiry (8 bytes) + value
//	x <expiry (8 bytes)> <k entry key> →  (empty): the sweep's index
//
// where a list's partition is <featureKey> 00 <entityID> 00. Both entries
// of an item are written and deleted in one batch. Folders written before
// hold one entry per item (i <partition> <itemKey> → expiry + value),
// which Open moves to this layout (migrate.go); their sweep entries name
// the i entry, and the sweep reads past the prefix.
const (
	keyPrefix    = 'k'
	valuePrefix  = 'v'
	expiryPrefix = 'x'
)

// partition is the part of an item's keys that names its list.
func partition(l store.List) []byte {
	fk := l.Feature.Key()
	p := make([]byte, 0, 2+len(fk)+len(l.EntityID)+keys.ItemKeyLen)
	p = append(p, fk...)
	p = append(p, 0)
	p = append(p, l.EntityID...)
	return append(p, 0)
}

// entry is the key of an item's entry of kind prefix: id is a partition
// and item key, or a bound of them.
func entry(prefix byte, id []byte, itemKey string) []byte {
	k := make([]byte, 0, 1+len(id)+len(itemKey))
	k = append(append(k, prefix), id...)
	return append(k, itemKey...)
}

func expiryOf(v []byte) int64 { return int64(binary.BigEndian.Uint64(v)) }

// putItem writes an item's two entries and its sweep entry into b.
func putItem(b *pebble.Batch, list []byte, itemKey string, expiry uint64, value []byte) error {
	exp := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), expiry)
	k := entry(keyPrefix, list, itemKey)
	if err := b.Set(k, exp, nil); err != nil {
		return err
	}
	if err := b.Set(entry(valuePrefix, list, itemKey), append(exp, value...), nil); err != nil {
		return err
	}
	return b.Set(expiryKey(expiry, k), nil, nil)
}

// deleteItem deletes an item's two entries in b; its sweep entry finds
// nothing.
func deleteItem(b *pebble.Batch, id []byte) error {
	if err := b.Delete(append([]byte{keyPrefix}, id...), nil); err != nil {
		return err
	}
	return b.Delete(append([]byte{valuePrefix}, id...), nil)
}

// deleteItems deletes, in b, the entries of the items from start up to end
// (partitions and item keys, or prefixes of them).
func deleteItems(b *pebble.Batch, start, end []byte) error {
	for _, prefix := range []byte{keyPrefix, valuePrefix} {
		if err := b.DeleteRange(entry(prefix, start, ""), entry(prefix, end, ""), nil); err != nil {
			return err
		}
	}
	return nil
}

func expiryKey(expiry uint64, entryKey []byte) []byte {
	k := binary.BigEndian.AppendUint64(append(make([]byte, 0, 9+len(entryKey)), expiryPrefix), expiry)
	return append(k, entryKey...)
}

// scanner reads a list's rows, newest first, skipping expired items: the
// k entries when the scan reads keys alone, else the v entries. The
// embedded store drops a deleted feature's items when it is created again,
// so no feature of its own has ItemsSince and no scan asks for write
// times. It stops, with the context's error, once the context ends.
func (s *Store) scanner(l store.List) store.Scanner {
	return func(ctx context.Context, sc store.Scan, fn func(store.Row) bool) error {
		prefix := byte(keyPrefix)
		if sc.Values {
			prefix = valuePrefix
		}
		p := entry(prefix, partition(l), "")
		lower := append(bytes.Clone(p), sc.From...)
		upper := append(bytes.Clone(p), keys.MaxItemKey...)
		if sc.Before != "" {
			upper = append(bytes.Clone(p), sc.Before...)
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return fmt.Errorf("reading list items: %w", err)
		}
		defer it.Close()
		defer s.countBlocks(it)
		now := s.now().Unix()
		n := 0
		first, next := it.Last, it.Prev
		if sc.Ascending {
			first, next = it.First, it.Next
		}
		looked := 0
		defer func() { s.rows.Read(ctx, n, sc.Values) }()
		// Past its first checkEvery rows, a scan reads checkEvery at a
		// time in its turn.
		turn := s.turns.Turn()
		defer turn.End()
		for ok := first(); ok && n < sc.Limit; ok = next() {
			if looked%checkEvery == 0 {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if looked > 0 {
					if err := turn.Next(ctx); err != nil {
						return err
					}
				}
			}
			looked++
			v := it.Value()
			if expiryOf(v) <= now {
				continue
			}
			n++
			row := store.Row{Key: string(it.Key()[len(p):])}
			if sc.Values {
				row.Value = bytes.Clone(v[8:])
			}
			if !fn(row) {
				break
			}
		}
		return it.Error()
	}
}

// checkEvery is how many rows (expired ones too) a scan reads between two
// looks at its context.
const checkEvery = 256

// countBlocks adds the bytes of the blocks it read to the store's count
// (BlockBytesRead in tests).
func (s *Store) countBlocks(it *pebble.Iterator) {
	s.blockBytes.Add(int64(it.Stats().InternalStats.BlockBytes))
}

// fetcher reads rows of a list by key, with their values.
func (s *Store) fetcher(l store.List) store.Fetcher {
	return func(ctx context.Context, ks []string, fn func(store.Row) bool) error {
		id := partition(l)
		now := s.now().Unix()
		n := 0
		defer func() { s.rows.Read(ctx, n, true) }()
		for _, k := range ks {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, closer, err := s.db.Get(entry(valuePrefix, id, k))
			if errors.Is(err, pebble.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading list items: %w", err)
			}
			live := expiryOf(v) > now
			row := store.Row{Key: k, Value: bytes.Clone(v[8:])}
			closer.Close()
			if !live {
				continue
			}
			n++
			if !fn(row) {
				break
			}
		}
		return nil
	}
}

// ItemTTL reports the seconds an item has left (for tests).
func (s *Store) ItemTTL(_ context.Context, l store.List, itemKey string) (time.Duration, error) {
	v, closer, err := s.db.Get(entry(keyPrefix, partition(l), itemKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, fmt.Errorf("item %s: %w", itemKey, errkind.NotFound)
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	left := expiryOf(v) - s.now().Unix()
	if left <= 0 {
		return 0, fmt.Errorf("item %s: %w", itemKey, errkind.NotFound)
	}
	return time.Duration(left) * time.Second, nil
}

// Rows counts the live rows of a list's partition, shown or not (for
// tests).
func (s *Store) Rows(ctx context.Context, l store.List) (int, error) {
	n := 0
	err := s.scanner(l)(ctx, store.Scan{Limit: math.MaxInt32}, func(store.Row) bool { n++; return true })
	return n, err
}

// Sweep deletes expired items and returns how many it reclaimed, in
// batches of sweepBatch entries, so that a sweep after a long downtime
// never builds one batch of every item expired meanwhile. It stops early
// when the store closes.
func (s *Store) Sweep() (int, error) {
	now := uint64(s.now().Unix())
	upper := binary.BigEndian.AppendUint64([]byte{expiryPrefix}, now+1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{expiryPrefix}, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	n, entries := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		// The entry's prefix is k, or i in a folder written before.
		expiry, id := binary.BigEndian.Uint64(k[1:9]), k[10:]
		swept, err := s.sweepItem(b, id, expiry)
		if err != nil {
			return n, err
		}
		if swept {
			n++
		}
		if err := b.Delete(k, nil); err != nil {
			return n, err
		}
		if entries++; entries == sweepBatch {
			if err := b.Commit(pebble.NoSync); err != nil {
				return n, err
			}
			b.Close()
			b, entries = s.db.NewBatch(), 0
			select {
			case <-s.stop:
				return n, nil
			default:
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	return n, b.Commit(pebble.NoSync)
}

// sweepItem deletes, in b, the item id (partition and item key) when it
// still expires at expiry: one added again since has a later expiry and a
// sweep entry of its own.
func (s *Store) sweepItem(b *pebble.Batch, id []byte, expiry uint64) (bool, error) {
	v, closer, err := s.db.Get(append([]byte{keyPrefix}, id...))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	same := uint64(expiryOf(v)) == expiry
	closer.Close()
	if !same {
		return false, nil
	}
	return true, deleteItem(b, id)
}

// sweepBatch bounds the expiry entries one batch of a sweep deletes.
const sweepBatch = 1000
