package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// On Linux the folder a backup goes to is checked, and made, through file
// descriptors: the nearest folder of its path that exists is opened, and
// where it really is (the folders above it, by "..") is compared with the
// data folder; the missing folders below it are made one at a time
// relative to the one above, and opened without following a link; and
// Pebble is given a path through /proc/self/fd, which the kernel resolves
// to the folder checked, whatever names that led to it become meanwhile.
// A link made in a missing part of the path between the check and the
// write, into the data folder, is refused, or leads nowhere.

// target is the folder a checkpoint is written to: the entry name, not
// there yet, of the folder dir, held open until close.
type target struct {
	dir  int
	path string // what Pebble is given
}

func (t *target) close() { unix.Close(t.dir) }

// openTarget checks and opens the folder a backup of the data folder
// dataDir to `to` goes into, making the folders missing above it, and
// removing it if it is an empty folder: Pebble checkpoints only into a
// folder it makes. A `to` that is itself a link is taken as the folder it
// leads to.
func openTarget(dataDir, to string) (*target, error) {
	var data unix.Stat_t
	if err := unix.Stat(dataDir, &data); err != nil {
		return nil, fmt.Errorf("the data folder: %w", &fs.PathError{Op: "stat", Path: dataDir, Err: err})
	}
	path, err := filepath.Abs(to)
	if err != nil {
		return nil, fmt.Errorf("backing up to %s: %w", to, err)
	}
	t, link, err := openTargetPath(&data, dataDir, to, path)
	if err != nil || !link {
		return t, err
	}
	if path, err = filepath.EvalSymlinks(path); err != nil {
		return nil, fmt.Errorf("backing up to %s: %w", to, err)
	}
	t, link, err = openTargetPath(&data, dataDir, to, path)
	if err == nil && link {
		return nil, fmt.Errorf("backing up to %s: it became another link as the backup began", to)
	}
	return t, err
}

// openTargetPath is openTarget of path, `to` made absolute; link is true,
// with no target (nothing open), when path's last part is a link.
func openTargetPath(data *unix.Stat_t, dataDir, to, path string) (t *target, link bool, err error) {
	dir, missing, err := openNearest(filepath.Dir(path))
	if err != nil {
		return nil, false, fmt.Errorf("backing up to %s: %w", to, err)
	}
	defer func() {
		if t == nil {
			unix.Close(dir)
		}
	}()
	name := filepath.Base(path)
	if in, err := inside(dir, data); err != nil || in {
		if err == nil {
			err = &TargetError{Dir: to, Resolved: filepath.Join(append(append([]string{fdPath(dir)}, missing...), name)...), DataDir: dataDir}
		}
		return nil, false, err
	}
	for _, part := range missing {
		next, err := makeFolder(dir, part)
		if err != nil {
			return nil, false, fmt.Errorf("backing up to %s: %s: %w", to, part, err)
		}
		unix.Close(dir)
		dir = next
		if same(dir, data) {
			return nil, false, &TargetError{Dir: to, Resolved: fdPath(dir), DataDir: dataDir}
		}
	}
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return nil, false, fmt.Errorf("backing up to %s: %w", to, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, true, nil
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, false, &TargetError{Dir: to}
	case st.Dev == data.Dev && st.Ino == data.Ino:
		return nil, false, &TargetError{Dir: to, Resolved: filepath.Join(fdPath(dir), name), DataDir: dataDir}
	default:
		// rmdir removes a folder only when it is empty.
		if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return nil, false, &TargetError{Dir: to}
		} else if err != nil {
			return nil, false, fmt.Errorf("backing up to %s: %w", to, err)
		}
	}
	return &target{dir: dir, path: "/proc/self/fd/" + strconv.Itoa(dir) + "/" + name}, false, nil
}

// openNearest opens the nearest folder of path that exists, following
// links as any open does (where it leads is checked after), and says the
// parts of path below it, which do not exist.
func openNearest(path string) (int, []string, error) {
	var missing []string
	for {
		dir, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			return dir, missing, nil
		}
		parent := filepath.Dir(path)
		if !errors.Is(err, unix.ENOENT) || parent == path {
			return -1, nil, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		missing = append([]string{filepath.Base(path)}, missing...)
		path = parent
	}
}

// makeFolder makes the folder name in dir, its user's alone, and opens
// it, following no link: a link made there meanwhile is refused. One
// made meanwhile as a folder is taken.
func makeFolder(dir int, name string) (int, error) {
	if err := unix.Mkdirat(dir, name, folderMode); err == nil {
		if err := unix.Fsync(dir); err != nil {
			return -1, err
		}
	} else if !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	next, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return -1, errors.New("made a link or a file as the backup began; a backup follows no link made meanwhile")
	}
	return next, err
}

// inside reports whether the folder dir, or one it is in, is the data
// folder, as the kernel finds the folders above it.
func inside(dir int, data *unix.Stat_t) (bool, error) {
	cur, err := unix.Openat(dir, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(cur) }()
	for {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return false, err
		}
		if st.Dev == data.Dev && st.Ino == data.Ino {
			return true, nil
		}
		parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		var up unix.Stat_t
		if err := unix.Fstat(parent, &up); err != nil {
			unix.Close(parent)
			return false, err
		}
		unix.Close(cur)
		cur = parent
		if up.Dev == st.Dev && up.Ino == st.Ino {
			return false, nil // the root
		}
	}
}

// same reports whether the folder dir is the data folder.
func same(dir int, data *unix.Stat_t) bool {
	var st unix.Stat_t
	return unix.Fstat(dir, &st) == nil && st.Dev == data.Dev && st.Ino == data.Ino
}

// fdPath is where the kernel says the folder dir is, for messages.
func fdPath(dir int) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(dir))
	if err != nil {
		return "?"
	}
	return p
}
