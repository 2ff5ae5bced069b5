package embedded

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// Backup writes a checkpoint of the store to the folder to, which must not
// exist or be empty: every write committed before the call, and none that
// began after it ended, as of one moment. The folder is a store of its
// own, which Open (a gateway's --data-dir) opens, and a change feed of its
// own (beginFeed). On the data folder's file system Pebble hard-links its
// immutable tables, so a backup costs little room until the store
// compacts them away; copy it elsewhere to survive the disk. A folder
// inside the data folder is refused, however its path reaches it
// (openTarget).
func (s *Store) Backup(to string) error {
	select {
	case <-s.stop:
		return errors.New("embedded store is closed")
	default:
	}
	t, err := openTarget(s.cfg.Dir, to)
	if err != nil {
		return err
	}
	defer t.close()
	targetChecked()
	return s.checkpoint(to, t.path)
}

// targetChecked runs between the check of a backup's folder and the
// write: nothing, but in a test that changes the folder's path there.
var targetChecked = func() {}

// checkpoint writes the checkpoint asked for at to into path, where
// openTarget checked it may go, and begins its own change feed.
func (s *Store) checkpoint(to, path string) error {
	if err := s.db.Checkpoint(path, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("backing up the embedded store to %s: %w", to, err)
	}
	if err := beginFeed(path); err != nil {
		// A copy that numbered on in the feed of the original would take the
		// original's positions for its own: better none.
		return errors.Join(fmt.Errorf("backing up the embedded store to %s: %w", to, err), os.RemoveAll(path))
	}
	return nil
}

// beginFeed draws a new epoch for the change feed of the checkpoint in
// dir, keeping its floor: a folder restored from it is another feed, in
// which every position of the original is one of another data folder.
// Numbering on after the checkpoint's last record, the copy would give
// the numbers the original gave after it, and take a client's position
// there as its own, skipping what it added before.
func beginFeed(dir string) error {
	db, err := pebble.Open(dir, &pebble.Options{FS: privateFiles, Logger: quietLogger{}, ErrorIfNotExists: true})
	if err != nil {
		return fmt.Errorf("opening the copy to begin its change feed: %w", err)
	}
	epoch, floor, ok, err := readFeedMeta(db)
	if err == nil && ok {
		if _, err = rand.Read(epoch[:]); err == nil {
			err = db.Set(feedMetaKey, feedMeta(epoch, floor), pebble.Sync)
		}
	}
	return errors.Join(err, db.Close())
}

// BackupFolder backs up the store in dir, which no process may have open,
// to the folder to (see Backup). It fails when dir holds no store, and
// refuses before opening it when this process runs as a user other than
// the store's (opening the store writes files into it, and files of
// another user, 0600, the gateway could not read) or when to is inside
// it.
func BackupFolder(dir, to string) error {
	if err := sameUser(dir); err != nil {
		return err
	}
	t, err := openTarget(dir, to)
	if err != nil {
		return err
	}
	defer t.close()
	s, err := Open(Config{Dir: dir, Existing: true})
	if err != nil {
		return err
	}
	targetChecked()
	return errors.Join(s.checkpoint(to, t.path), s.Close())
}

// geteuid is the process's user: os.Geteuid, or another in a test, which
// cannot give a store to another user without root.
var geteuid = os.Geteuid

// sameUser refuses a process whose user is not the store's in dir: the
// owner of its LOCK file, which Pebble creates when it first opens the
// store.
func sameUser(dir string) error {
	owner, ok := lockOwner(filepath.Join(dir, "LOCK"))
	if me := geteuid(); ok && owner != me {
		return fmt.Errorf("the store in %s is user %d's (it owns its LOCK file), and this command runs as user %d: the files it would write there, its user's alone, the gateway could not read; run it as user %d", dir, owner, me, owner)
	}
	return nil
}

// TargetError is Backup's error when the folder to back up to is in the
// way: a file, a folder that is not empty, or one inside the data folder.
type TargetError struct {
	Dir string
	// Resolved and DataDir are set when Dir is inside the data folder:
	// Dir with its links resolved, and the data folder.
	Resolved, DataDir string
}

func (e *TargetError) Error() string {
	switch {
	case e.DataDir == "":
		return fmt.Sprintf("%s exists and is not an empty folder: a backup goes to a new folder, or an empty one", e.Dir)
	case filepath.Clean(e.Dir) != e.Resolved:
		return fmt.Sprintf("%s is %s, inside the data folder %s: a backup goes to a folder outside it", e.Dir, e.Resolved, e.DataDir)
	}
	return fmt.Sprintf("%s is inside the data folder %s: a backup goes to a folder outside it", e.Dir, e.DataDir)
}
