package embedded_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// feedOf is a live list of a new feature of s, and its feed's head.
func feedOf(t *testing.T, s *embedded.Store, name string) (store.List, store.Position) {
	t.Helper()
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: name, ValueType: store.String, TTL: time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	head, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return store.List{Feature: &f, EntityID: "u1"}, head
}

// addValues adds each value to l, an add each.
func addValues(t *testing.T, s *embedded.Store, l store.List, vals ...string) {
	t.Helper()
	for _, v := range vals {
		if _, err := s.AddItems(context.Background(), l, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte(v)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads l's records after `after`, up to the settled end.
func readAll(t *testing.T, s *embedded.Store, l store.List, after store.Position) ([]string, store.Position, error) {
	t.Helper()
	var got []string
	for {
		changes, reached, err := s.ReadFeed(context.Background(), after, func(id store.ListID) bool { return id == l.ID() }, 1<<20)
		if err != nil {
			return got, reached, err
		}
		for _, c := range changes {
			for _, it := range c.Items {
				got = append(got, string(it.Value))
			}
		}
		if !after.Less(reached) {
			return got, reached, nil
		}
		after = reached
	}
}

// A backup is a change feed of its own: a folder restored from it refuses
// every position of the original, of before the backup or after it, as
// of another data folder, so that no client resumes there after a
// position the copy gives to other records; and its own positions work.
// So for a backup of a folder no store has open.
func TestBackupBeginsAFeedOfItsOwn(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, dir, nil)
	l, before := feedOf(t, s, "f")
	addValues(t, s, l, "A1")
	_, atA1, err := readAll(t, s, l, before)
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	addValues(t, s, l, "B1")
	_, atB1, err := readAll(t, s, l, atA1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stopped := filepath.Join(t.TempDir(), "stopped")
	if err := embedded.BackupFolder(dir, stopped); err != nil {
		t.Fatal(err)
	}

	for _, copy := range []struct {
		dir       string
		positions []store.Position
	}{{backup, []store.Position{before, atA1, atB1}}, {stopped, []store.Position{before, atA1, atB1}}} {
		r := open(t, copy.dir, nil)
		// As reported: adds to the copy, then a client resumes there after
		// a position of the original.
		addValues(t, r, l, "B2", "B3", "B4")
		for _, p := range copy.positions {
			if err := r.CheckPosition(ctx, p); !errors.Is(err, errkind.PositionExpired) || !strings.Contains(err.Error(), "not one of this gateway's data folder") {
				t.Errorf("%s: CheckPosition of the original's %v: %v, want PositionExpired of another data folder", copy.dir, p, err)
			}
			if got, _, err := readAll(t, r, l, p); !errors.Is(err, errkind.PositionExpired) {
				t.Errorf("%s: the feed after the original's %v: %v, %v; want PositionExpired", copy.dir, p, got, err)
			}
		}
		head, err := store.AwaitHead(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		addValues(t, r, l, "C")
		if got, _, err := readAll(t, r, l, head); err != nil || strings.Join(got, ",") != "C" {
			t.Errorf("%s: the feed after its own head: %v, %v; want C", copy.dir, got, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A number given to a record whose add failed is never given again, even
// by a restart whose clock is behind the last run's: a head handed out at
// that number skips no record added after it.
func TestNumbersAreNotGivenTwice(t *testing.T) {
	dir := t.TempDir()
	then := time.Now()
	s, err := embedded.Open(embedded.Config{Dir: dir, Now: func() time.Time { return then }})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := feedOf(t, s, "f")
	addValues(t, s, l, "A")
	if err := s.GiveUpANumber(); err != nil {
		t.Fatal(err)
	}
	head, err := store.AwaitHead(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, func() time.Time { return then.Add(-10 * time.Minute) })
	if err := s.CheckPosition(context.Background(), head); err != nil {
		t.Fatalf("the head handed out before the restart: %v", err)
	}
	addValues(t, s, l, "B")
	if got, _, err := readAll(t, s, l, head); err != nil || strings.Join(got, ",") != "B" {
		t.Fatalf("after the head handed out at a number given up, then a restart: %v, %v; want B", got, err)
	}
}

// A record's number is when its add was numbered, in ns, not how many adds
// came before it: another tenant's adds do not show in one's positions.
func TestPositionsSayWhenNotHowMany(t *testing.T) {
	s := open(t, t.TempDir(), nil)
	mine, head := feedOf(t, s, "mine")
	others, _ := feedOf(t, s, "others")
	for range 300 {
		addValues(t, s, others, "o")
	}
	before := time.Now()
	addValues(t, s, mine, "m")
	after := time.Now()
	changes, _, err := s.ReadFeed(context.Background(), head, func(id store.ListID) bool { return id == mine.ID() }, 1<<20)
	if err != nil || len(changes) != 1 {
		t.Fatalf("ReadFeed = %v, %v", changes, err)
	}
	n, ok := s.RecordNumber(changes[0].After(0))
	if !ok || n < uint64(before.UnixNano()) || n > uint64(after.UnixNano()) {
		t.Fatalf("the record's number %d (%v), want the time of its add, within [%d, %d]", n, ok, before.UnixNano(), after.UnixNano())
	}
}

// A catch-up whose next records the sweep deleted fails, PositionExpired,
// even by a clock that says they are still kept (set back): the sweep
// raised the floor past them.
func TestCatchUpFailsOnceItsRecordsAreSwept(t *testing.T) {
	var offset atomic.Int64
	s := open(t, t.TempDir(), func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	ctx := context.Background()
	l, head := feedOf(t, s, "f")
	addValues(t, s, l, "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9")
	end, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	at := head
	for range 4 {
		changes, reached, _, err := s.ListFeed(ctx, l, at, end, 1)
		if err != nil || len(changes) != 1 {
			t.Fatalf("ListFeed after %v: %v, %v", at, changes, err)
		}
		at = reached
	}
	offset.Store(int64(embedded.DefaultFeedRetention + time.Minute))
	if err := s.SweepFeed(); err != nil {
		t.Fatal(err)
	}
	offset.Store(0)
	if changes, _, _, err := s.ListFeed(ctx, l, at, end, 1<<20); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("the rest of the catch-up, swept: %d records, %v; want PositionExpired", len(changes), err)
	}
	if got, _, err := readAll(t, s, l, at); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("the feed after the swept records: %v, %v; want PositionExpired", got, err)
	}
	if err := s.CheckPosition(ctx, at); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("CheckPosition after the swept records: %v", err)
	}
	if err := s.CheckPosition(ctx, end); err != nil {
		t.Fatalf("CheckPosition of the end, after which nothing was swept: %v", err)
	}
}
