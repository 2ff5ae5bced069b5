package embedded

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// Backup writes a checkpoint of the store to the folder to, which must not
// exist or be empty: every write committed before the call, and none that
// began after it ended, as of one moment. The folder is a store of its
// own, which Open (a gateway's --data-dir) opens. On the data folder's
// file system Pebble hard-links its immutable tables, so a backup costs
// little room until the store compacts them away; copy it elsewhere to
// survive the disk.
func (s *Store) Backup(to string) error {
	select {
	case <-s.stop:
		return errors.New("embedded store is closed")
	default:
	}
	if err := emptyFolder(to); err != nil {
		return err
	}
	if err := s.db.Checkpoint(to, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("backing up the embedded store to %s: %w", to, err)
	}
	return nil
}

// BackupFolder backs up the store in dir, which no process may have open,
// to the folder to (see Backup). It fails when dir holds no store.
func BackupFolder(dir, to string) error {
	s, err := Open(Config{Dir: dir, Existing: true})
	if err != nil {
		return err
	}
	return errors.Join(s.Backup(to), s.Close())
}

// TargetError is Backup's error when the folder to back up to is in the
// way: a file, or a folder that is not empty.
type TargetError struct{ Dir string }

func (e *TargetError) Error() string {
	return fmt.Sprintf("%s exists and is not an empty folder: a backup goes to a new folder, or an empty one", e.Dir)
}

// emptyFolder makes sure dir does not exist, removing it if it is an
// empty folder: Pebble checkpoints only into a folder it creates.
func emptyFolder(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backing up to %s: %w", dir, err)
	}
	names, err := f.Readdirnames(1)
	f.Close()
	if !errors.Is(err, io.EOF) || len(names) > 0 {
		return &TargetError{Dir: dir}
	}
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("backing up to %s: %w", dir, err)
	}
	return nil
}
