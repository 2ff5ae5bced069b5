//go:build unix

package embedded

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/listgate/listgate/store"
)

// lookingFS notes the mode of each file and folder as the file system
// below privateFS has just made or opened it for writing, before
// privateFS hands it to Pebble: what another user could have opened then.
type lookingFS struct {
	vfs.FS
	mu   sync.Mutex
	seen map[string]os.FileMode
}

func (l *lookingFS) look(name string) {
	info, err := os.Stat(name)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[name] = info.Mode()
}

func (l *lookingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := l.FS.Create(name, category)
	l.look(name)
	return f, err
}

func (l *lookingFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := l.FS.OpenReadWrite(name, category, opts...)
	l.look(name)
	return f, err
}

func (l *lookingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := l.FS.ReuseForWrite(oldname, newname, category)
	l.look(newname)
	return f, err
}

func (l *lookingFS) MkdirAll(dir string, perm os.FileMode) error {
	err := l.FS.MkdirAll(dir, perm)
	l.look(dir)
	return err
}

func (l *lookingFS) Lock(name string) (io.Closer, error) {
	c, err := l.FS.Lock(name)
	l.look(name)
	return c, err
}

// The store's files and folders, and a backup's, are its user's alone
// from the moment they exist, not narrowed after: under a umask of 0,
// which would leave Pebble's own modes (0666, 0755) as they are. Not in
// parallel: the umask is the process's.
func TestFilesArePrivateFromTheStart(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0))
	looking := &lookingFS{FS: vfs.Default, seen: map[string]os.FileMode{}}
	privateFiles = privateFS{looking}
	defer func() { privateFiles = privateFS{vfs.Default} }()

	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: "f", ValueType: store.String, TTL: time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: "u1"}, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Flush(); err != nil { // a table
		t.Fatal(err)
	}
	if err := s.Backup(filepath.Join(t.TempDir(), "backups", "one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	kinds := map[string]bool{}
	for name, mode := range looking.seen {
		want := os.FileMode(fileMode)
		if mode.IsDir() {
			want = os.ModeDir | folderMode
		}
		if mode != want {
			t.Errorf("%s was %v as it was made, want %v", name, mode, want)
		}
		for _, kind := range []string{"LOCK", "MANIFEST", "OPTIONS", ".sst", ".log", "marker.", "data", "one"} {
			if strings.Contains(filepath.Base(name), kind) {
				kinds[kind] = true
			}
		}
	}
	if len(kinds) != 8 {
		t.Errorf("seen made: %v; want a LOCK, MANIFEST, OPTIONS, table, log and marker file, the data folder and the backup's", kinds)
	}
}
