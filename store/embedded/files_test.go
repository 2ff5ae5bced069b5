package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/embedded"
)

// addOne gives the store in s a feature and an item: files to look at.
func addOne(t *testing.T, s *embedded.Store) {
	t.Helper()
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: "u1"}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
}

// notPrivate lists what in dir is not its user's alone: folders not 0700,
// files not 0600.
func notPrivate(t *testing.T, dir string) []string {
	t.Helper()
	var wrong []string
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		switch {
		case d.IsDir() && info.Mode().Perm() != 0o700, d.Type().IsRegular() && info.Mode().Perm() != 0o600:
			wrong = append(wrong, path+" "+info.Mode().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Fatalf("%s holds %d entries: no store", dir, n)
	}
	return wrong
}

// A new store's folders, the ones above it that Open makes, and its files
// are its user's alone; so are a backup's.
func TestNewStoreIsItsUsersAlone(t *testing.T) {
	top := filepath.Join(t.TempDir(), "made")
	dir := filepath.Join(top, "data")
	s := open(t, dir, nil)
	addOne(t, s)
	backup := filepath.Join(t.TempDir(), "backups", "one")
	if err := s.Backup(backup); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{top, filepath.Dir(backup)} {
		if wrong := notPrivate(t, d); len(wrong) > 0 {
			t.Errorf("not its user's alone: %s", strings.Join(wrong, ", "))
		}
	}
}

// Opening a folder an earlier release left readable by others takes the
// group's and others' bits off every folder and file in it, and touches
// nothing a link in it leads to.
func TestOpenTightensAnOldFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, dir, nil)
	addOne(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("not the store's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
	// As an earlier release left it.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(path, 0o755)
		case d.Type().IsRegular():
			return os.Chmod(path, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	s, err = embedded.Open(embedded.Config{Dir: dir, Log: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if wrong := notPrivate(t, dir); len(wrong) > 0 {
		t.Errorf("after Open, not its user's alone: %s", strings.Join(wrong, ", "))
	}
	if info, err := os.Stat(outside); err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("the file a link in the folder leads to: %v %v, want it left 0644", info.Mode(), err)
	}
	if log.Len() > 0 {
		t.Errorf("logged %s", log.String())
	}
}

// A backup into the data folder is refused, whatever path names it: the
// folder itself, a folder in it, either through a link to the folder or to
// a folder above it; nothing is written there. Through a link to a folder
// outside it, a backup is made.
func TestBackupRefusesTheDataFolderByAnyPath(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "data")
	s := open(t, dir, nil)
	addOne(t, s)
	links := t.TempDir()
	for name, to := range map[string]string{"data": dir, "top": top, "elsewhere": t.TempDir()} {
		if err := os.Symlink(to, filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, to := range []string{
		dir,
		filepath.Join(dir, "inside"),
		filepath.Join(links, "data"),
		filepath.Join(links, "data", "inside"),
		filepath.Join(links, "data", "new", "deeper"),
		filepath.Join(links, "top", "data", "inside"),
	} {
		err := s.Backup(to)
		var target *embedded.TargetError
		if !errors.As(err, &target) || !strings.Contains(err.Error(), "inside the data folder "+dir) {
			t.Errorf("a backup to %s: %v, want it refused as inside the data folder", to, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "inside")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused backup left %s: %v", filepath.Join(dir, "inside"), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused backup left %s: %v", filepath.Join(dir, "new"), err)
	}
	if err := s.Backup(filepath.Join(links, "elsewhere", "backup")); err != nil {
		t.Fatalf("a backup through a link to a folder outside: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// With no process holding the store, BackupFolder decides as Backup
	// does, before it opens the store.
	err := embedded.BackupFolder(dir, filepath.Join(links, "data", "inside"))
	var target *embedded.TargetError
	if !errors.As(err, &target) {
		t.Errorf("BackupFolder through a link into the data folder: %v, want it refused", err)
	}
	if err := embedded.BackupFolder(dir, filepath.Join(links, "elsewhere", "second")); err != nil {
		t.Fatalf("BackupFolder through a link to a folder outside: %v", err)
	}
}

// listgate backup run as another user than the store's, with no gateway
// serving it, is refused before it opens the store: the files it would
// write there (0600) the gateway could not read. Giving the store to
// another user needs root, so the process seems to run as another one.
func TestBackupFolderRefusesAnotherUser(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, dir, nil)
	addOne(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	owner := os.Geteuid()
	restore := embedded.RunAs(owner + 4242)
	err := embedded.BackupFolder(dir, filepath.Join(t.TempDir(), "backup"))
	restore()
	if want := fmt.Sprintf("run it as user %d", owner); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("BackupFolder as user %d of user %d's store: %v", owner+4242, owner, err)
	}
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Errorf("the refused backup changed the store's folder: %d entries, then %d", len(before), len(after))
	}
}
