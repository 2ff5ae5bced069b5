package embedded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The store's files hold every list's values: they are its user's alone,
// from the moment they exist. Pebble makes folders 0755 and files 0666,
// less the umask (0644 under the usual 022). privateFS makes each folder
// it creates 0700 and each file 0600 as it is created: a file is made
// 0600 first, and Pebble then opens it as it is, so that no other user
// could open it in between. tighten takes the group's and others' bits
// off what is there already. A wrapping file system rather than a umask
// set at start: it holds in every process that opens a store (the
// gateway, listgate backup, tests) and changes nothing else those
// processes create.
const (
	folderMode = 0o700
	fileMode   = 0o600
)

// privateFS is Pebble's file system, making what it creates private.
// Link, Rename and ReuseForWrite keep a file's mode, so they need nothing.
type privateFS struct{ vfs.FS }

// privateFiles is the operating system's files, made private.
var privateFiles vfs.FS = privateFS{vfs.Default}

// Create makes name a new, empty file, removing one there (as Pebble's
// Create does, so that a file hard-linked elsewhere is left whole).
func (p privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	err := createPrivate(name)
	for errors.Is(err, fs.ErrExist) {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		err = createPrivate(name)
	}
	if err != nil {
		return nil, err
	}
	return p.FS.OpenReadWrite(name, category)
}

func (p privateFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := createPrivate(name); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return p.FS.OpenReadWrite(name, category, opts...)
}

func (p privateFS) MkdirAll(dir string, _ os.FileMode) error {
	return p.FS.MkdirAll(dir, folderMode)
}

// Lock makes the lock file first only when there is none: closing a
// descriptor of a file this process has locked would drop the lock
// (fcntl's locks belong to the process), and one that exists was made
// private when it was made, or by tighten.
func (p privateFS) Lock(name string) (io.Closer, error) {
	if err := createPrivate(name); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return p.FS.Lock(name)
}

func (p privateFS) Unwrap() vfs.FS { return p.FS }

// createPrivate makes name an empty file, its user's alone; fs.ErrExist
// when there is one.
func createPrivate(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	return f.Close()
}

// tighten takes the group's and others' bits off the data folder dir and
// every folder and file in it, as an earlier release left them. It follows
// no symbolic link inside dir. What it cannot change (a folder of another
// user: the mount point of a volume, say) it leaves, and logs: the files
// this process creates there are still its own alone. A folder that does
// not exist yet has nothing to tighten.
func tighten(dir string, log *slog.Logger) {
	root, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var failed []error
	if err == nil {
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				failed = append(failed, err)
				return nil
			}
			if err := tightenEntry(path, d); err != nil {
				failed = append(failed, err)
			}
			return nil
		})
	}
	if err != nil {
		failed = append(failed, err)
	}
	if len(failed) > 0 && log != nil {
		log.Warn(fmt.Sprintf("%d entries of the embedded store's folder could not be made its user's alone (folders 0700, files 0600): make them so, or run the gateway as their owner", len(failed)),
			"data_dir", dir, "first", failed[0].Error())
	}
}

// tightenEntry takes the group's and others' bits off one folder or
// file; other kinds of entry (the backup socket, a link) it leaves.
func tightenEntry(path string, d fs.DirEntry) error {
	if !d.IsDir() && !d.Type().IsRegular() {
		return nil
	}
	info, err := d.Info()
	if err != nil {
		return err
	}
	if info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	return os.Chmod(path, info.Mode()&^0o077)
}
