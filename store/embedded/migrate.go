package embedded

import (
	"bytes"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// oldItemPrefix starts the one entry per item of folders written before
// the k and v entries (items.go): i <partition> <itemKey> → expiry + value.
const oldItemPrefix = 'i'

// migrateBytes bounds the values one batch of a migration moves.
const migrateBytes = 4 << 20

// migrateItems moves the items of a folder written before into the k and
// v entries, a synced batch of about migrateBytes at a time, each of which
// deletes the old entries it moved: one cut short resumes at the next
// Open. Their sweep entries are left: the sweep reads them as they are.
func (s *Store) migrateItems() error {
	old := []byte{oldItemPrefix}
	start, moved := time.Now(), 0
	for {
		n, err := s.migrateBatch(old, successor(old))
		if err != nil {
			return fmt.Errorf("moving the embedded store's items to the layout that reads keys apart from values: %w", err)
		}
		if n == 0 {
			break
		}
		if moved == 0 && s.cfg.Log != nil {
			s.cfg.Log.Info("moving the embedded store's items to the layout that reads keys apart from values, once; the gateway serves when it is done",
				"dir", s.cfg.Dir)
		}
		moved += n
	}
	if moved > 0 && s.cfg.Log != nil {
		s.cfg.Log.Info("moved the embedded store's items", "dir", s.cfg.Dir, "items", moved, "took", time.Since(start))
	}
	return nil
}

// migrateBatch moves the first old entries between lower and upper, up
// to migrateBytes of them, and says how many it moved.
func (s *Store) migrateBatch(lower, upper []byte) (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()
	var first, last []byte
	n := 0
	for ok := it.First(); ok && b.Len() < migrateBytes; ok = it.Next() {
		id, v := it.Key()[1:], it.Value()
		if len(v) < 8 {
			return n, fmt.Errorf("item entry %q: %d bytes, no expiry", it.Key(), len(v))
		}
		if err := b.Set(entry(keyPrefix, id, ""), v[:8], nil); err != nil {
			return n, err
		}
		if err := b.Set(entry(valuePrefix, id, ""), v, nil); err != nil {
			return n, err
		}
		if first == nil {
			first = bytes.Clone(it.Key())
		}
		last = append(last[:0], it.Key()...)
		n++
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	if n == 0 {
		return 0, nil
	}
	// The old entries moved: from the first up to the last, inclusive.
	if err := b.DeleteRange(first, append(last, 0), nil); err != nil {
		return n, err
	}
	return n, b.Commit(pebble.Sync)
}
