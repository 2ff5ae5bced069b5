package embedded_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
)

// A count, a search that finds nothing and a distinct page's key scan
// read keys alone: over a list of 32 KiB values they read the blocks they
// read over one of 8-byte values, and at most the two values next to the
// keys' range in the table that holds both.
func TestKeyOnlyReadsReadNoValues(t *testing.T) {
	const n, size = 500, 32 << 10
	small := keyOnlyReads(t, n, 8)
	large := keyOnlyReads(t, n, size)
	for name, got := range large {
		if got > small[name]+2*size {
			t.Errorf("%s over %d items of 32 KiB read %d bytes of blocks; of 8 bytes, %d", name, n, got, small[name])
		}
	}
}

// keyOnlyReads makes a store with a list of n items of size bytes, and
// returns the bytes of blocks each key-only read of it reads.
func keyOnlyReads(t *testing.T, n, size int) map[string]int64 {
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	values := make([][]byte, 26) // random: values as hard to compress as real ones
	for i := range values {
		values[i] = make([]byte, size)
		rand.Read(values[i])
	}
	now := time.Now()
	items := make([]store.NewItem, n)
	for i := range items {
		items[i] = store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Millisecond).UnixNano(), Value: values[i%26]}
	}
	for start := 0; start < n; start += 100 {
		if _, err := s.AddItems(ctx, l, items[start:min(start+100, n)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	reads := map[string]func() error{
		"count": func() error {
			c, err := s.Count(ctx, l, store.Window{}, 10_000)
			if err == nil && c != n {
				err = fmt.Errorf("count %d, want %d", c, n)
			}
			return err
		},
		"search": func() error {
			found, err := s.Find(ctx, l, [][]byte{[]byte("absent")}, 0, 10_000)
			if err == nil && found[0] != "" {
				err = fmt.Errorf("found %q", found[0])
			}
			return err
		},
		"distinct page": func() error {
			p, err := s.Items(ctx, l, store.Range{Limit: 30, Distinct: true, MaxScan: 1000})
			if err == nil && len(p.Items) != 26 {
				err = fmt.Errorf("%d items, want 26", len(p.Items))
			}
			return err
		},
	}
	read := map[string]int64{}
	for name, r := range reads {
		before := s.BlockBytesRead()
		if err := r(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		read[name] = s.BlockBytesRead() - before
		t.Logf("%s over %d items of %d bytes: %d bytes of blocks", name, n, size, read[name])
	}
	return read
}

// oldItem is an item as folders written before kept it: one entry, its
// expiry and value, and its sweep entry naming it.
func oldItem(t *testing.T, b *pebble.Batch, l store.List, itemKey string, expiry uint64, value []byte) {
	t.Helper()
	k := append([]byte{'i'}, l.Feature.Key()...)
	k = append(append(append(k, 0), l.EntityID...), 0)
	k = append(k, itemKey...)
	v := binary.BigEndian.AppendUint64(nil, expiry)
	if err := b.Set(k, append(v, value...), nil); err != nil {
		t.Fatal(err)
	}
	x := binary.BigEndian.AppendUint64([]byte{'x'}, expiry)
	if err := b.Set(append(x, k...), nil, nil); err != nil {
		t.Fatal(err)
	}
}

// A folder of the layout before, with one entry per item, opens: Open
// moves its items (logging it), which then read, count, expire, are swept,
// and back up as any others.
func TestOpenMovesTheOldLayout(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var offset time.Duration
	clock := func() time.Time { return time.Now().Add(offset) }

	// The feature by the store itself, the items by hand as the old code
	// wrote them: 3,000 of 4 KiB, in more than one batch of the move.
	s, err := embedded.Open(embedded.Config{Dir: dir, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	now := time.Now()
	const n = 3000
	b := db.NewBatch()
	for i := range n {
		v := []byte(fmt.Sprintf("%04d", i) + strings.Repeat("v", 4<<10))
		ttl := 2 * time.Hour
		if i%3 == 0 {
			ttl = time.Hour // these expire first
		}
		oldItem(t, b, l, keys.ItemKey(now.Add(-time.Duration(i)*time.Millisecond).UnixNano(), v), uint64(now.Add(ttl).Unix()), v)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	s, err = embedded.Open(embedded.Config{Dir: dir, Now: clock, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !strings.Contains(log.String(), "moved the embedded store's items") || !strings.Contains(log.String(), "items=3000") {
		t.Errorf("Open's log: %s", log.String())
	}
	if c, err := s.Count(ctx, l, store.Window{}, 10_000); err != nil || c != n {
		t.Fatalf("Count after the move = %d, %v; want %d", c, err, n)
	}
	p, err := s.Items(ctx, l, store.Range{Limit: 2})
	if err != nil || len(p.Items) != 2 || !strings.HasPrefix(string(p.Items[1].Value), "0001") {
		t.Fatalf("Items after the move = %+v, %v", p, err)
	}
	if ttl, err := s.ItemTTL(ctx, l, p.Items[1].Key); err != nil || ttl <= time.Hour {
		t.Fatalf("ItemTTL of an item moved = %v, %v", ttl, err)
	}

	// A backup of it opens with the items.
	backup := filepath.Join(t.TempDir(), "backup")
	if err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	restored := open(t, backup, nil)
	if c, err := restored.Count(ctx, l, store.Window{}, 10_000); err != nil || c != n {
		t.Fatalf("Count in the backup = %d, %v; want %d", c, err, n)
	}

	// The sweep reclaims the expired third by the old sweep entries.
	offset = time.Hour + time.Minute
	if swept, err := s.Sweep(); err != nil || swept != n/3 {
		t.Fatalf("Sweep = %d, %v; want %d", swept, err, n/3)
	}
	if rows, err := s.Rows(ctx, l); err != nil || rows != n-n/3 {
		t.Fatalf("rows after the sweep = %d, %v; want %d", rows, err, n-n/3)
	}

	// Opened again, there is nothing left to move.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	s, err = embedded.Open(embedded.Config{Dir: dir, Now: clock, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if log.Len() > 0 {
		t.Errorf("a second Open logged: %s", log.String())
	}
	if c, err := s.Count(ctx, l, store.Window{}, 10_000); err != nil || c != n-n/3 {
		t.Fatalf("Count when opened again = %d, %v; want %d", c, err, n-n/3)
	}
}

type quiet struct{}

func (quiet) Infof(string, ...any)         {}
func (quiet) Errorf(string, ...any)        {}
func (quiet) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
