package embedded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// Backup writes a checkpoint of the store to the folder to, which must not
// exist or be empty: every write committed before the call, and none that
// began after it ended, as of one moment. The folder is a store of its
// own, which Open (a gateway's --data-dir) opens. On the data folder's
// file system Pebble hard-links its immutable tables, so a backup costs
// little room until the store compacts them away; copy it elsewhere to
// survive the disk. A folder inside the data folder is refused, however
// its path reaches it (backupTarget).
func (s *Store) Backup(to string) error {
	select {
	case <-s.stop:
		return errors.New("embedded store is closed")
	default:
	}
	target, err := backupTarget(s.cfg.Dir, to)
	if err != nil {
		return err
	}
	return s.checkpoint(to, target)
}

// checkpoint writes the checkpoint asked for at to into target, to with
// its links resolved: it is written where backupTarget looked.
func (s *Store) checkpoint(to, target string) error {
	if err := emptyFolder(to, target); err != nil {
		return err
	}
	if err := s.db.Checkpoint(target, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("backing up the embedded store to %s: %w", to, err)
	}
	return nil
}

// BackupFolder backs up the store in dir, which no process may have open,
// to the folder to (see Backup). It fails when dir holds no store, and
// refuses before opening it when to is inside it or when this process
// runs as a user other than the store's: opening the store writes files
// into it, and files of another user (0600) the gateway could not read.
func BackupFolder(dir, to string) error {
	target, err := backupTarget(dir, to)
	if err != nil {
		return err
	}
	if err := sameUser(dir); err != nil {
		return err
	}
	s, err := Open(Config{Dir: dir, Existing: true})
	if err != nil {
		return err
	}
	return errors.Join(s.checkpoint(to, target), s.Close())
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

// backupTarget is the folder a backup to `to` is written to: to with its
// links resolved. It is refused when that folder, or one it is in, is the
// data folder dir itself, whatever path names it: through a link, or a
// mount of it elsewhere. A backup there would be written into the live
// store, and be part of the next backup.
func backupTarget(dir, to string) (string, error) {
	data, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("the data folder: %w", err)
	}
	target, err := resolveLinks(to)
	if err != nil {
		return "", fmt.Errorf("backing up to %s: %w", to, err)
	}
	if within(target, data) {
		return "", &TargetError{Dir: to, Resolved: target, DataDir: dir}
	}
	return target, nil
}

// resolveLinks makes path absolute and resolves every symbolic link of the
// nearest folder of it that exists; the rest of it does not exist yet.
func resolveLinks(path string) (string, error) {
	existing, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(resolved, rest), nil
}

// within reports whether the folder path (its links resolved), or one it
// is in, is folder: the same file, by whatever path.
func within(path string, folder os.FileInfo) bool {
	for {
		if fi, err := os.Stat(path); err == nil && os.SameFile(fi, folder) {
			return true
		}
		parent := filepath.Dir(path)
		if parent == path {
			return false
		}
		path = parent
	}
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

// emptyFolder makes sure target (the folder to, its links resolved) does
// not exist, removing it if it is an empty folder: Pebble checkpoints only
// into a folder it creates.
func emptyFolder(to, target string) error {
	f, err := os.Open(target)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backing up to %s: %w", to, err)
	}
	names, err := f.Readdirnames(1)
	f.Close()
	if !errors.Is(err, io.EOF) || len(names) > 0 {
		return &TargetError{Dir: to}
	}
	if err := os.Remove(target); err != nil {
		return fmt.Errorf("backing up to %s: %w", to, err)
	}
	return nil
}
