package embedded_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/listgate/listgate/store/embedded"
)

// A link into the data folder made in a part of the backup's path that
// did not exist, between the check of the path and the write, is not
// followed: the backup fails, and nothing is written in the data
// folder. The link is made by a hook at that moment,
// replacing whatever is there. So for the backup's folder itself, and for
// a backup of a folder no store has open.
func TestBackupFollowsNoLinkMadeAsItBegins(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, dir, nil)
	addOne(t, s)
	// A backup written in the data folder would add a folder there; the
	// store's own files come and go.
	folders := func() []string {
		t.Helper()
		var names []string
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.Type().IsRegular() {
				names = append(names, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	before := folders()
	for _, tc := range []struct {
		name     string
		backup   func(to string) error
		to, link string // the backup's folder; the link made, into the data folder
	}{
		{"a folder above it", s.Backup, "new/deeper/backup", "new"},
		{"the folder itself", s.Backup, "backup", "backup"},
		{"a folder above it, no store open", func(to string) error { return embedded.BackupFolder(dir, to) }, "new/deeper/backup", "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a folder above it, no store open" {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				before = folders()
			}
			outside := t.TempDir()
			to, link := filepath.Join(outside, tc.to), filepath.Join(outside, tc.link)
			restore := embedded.OnTargetChecked(func() {
				if err := os.RemoveAll(link); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(dir, link); err != nil {
					t.Error(err)
				}
			})
			err := tc.backup(to)
			restore()
			if after := folders(); !slices.Equal(after, before) {
				t.Fatalf("the backup to %s, a link made to the data folder meanwhile, wrote there: %v, then %v (backup: %v)", to, before, after, err)
			}
			if err == nil {
				t.Fatalf("the backup to %s, a link made to the data folder meanwhile, succeeded", to)
			}
			t.Logf("the backup to %s: %v", to, err)
		})
	}
}

// A backup to a link to an empty folder outside the data folder is
// written into that folder.
func TestBackupToALinkToAnEmptyFolder(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "data"), nil)
	addOne(t, s)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(empty, link); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(link); err != nil {
		t.Fatal(err)
	}
	if m, err := filepath.Glob(filepath.Join(empty, "MANIFEST-*")); err != nil || len(m) == 0 {
		t.Fatalf("the backup is not in the folder the link leads to: %v, %v", m, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link: %v, %v", fi, err)
	}
}
