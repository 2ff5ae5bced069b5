//go:build !linux

package embedded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Elsewhere than on Linux the folder a backup goes to is checked by its
// path, with its links resolved, and made by Pebble: a link made in a
// missing part of the path between the check and the write is followed.

// target is the folder a checkpoint is written to.
type target struct {
	path string // what Pebble is given: to with its links resolved
}

func (t *target) close() {}

// openTarget checks the folder a backup of the data folder dataDir to
// `to` goes into, and removes it if it is an empty folder: Pebble
// checkpoints only into a folder it makes.
func openTarget(dataDir, to string) (*target, error) {
	data, err := os.Stat(dataDir)
	if err != nil {
		return nil, fmt.Errorf("the data folder: %w", err)
	}
	path, err := resolveLinks(to)
	if err != nil {
		return nil, fmt.Errorf("backing up to %s: %w", to, err)
	}
	if within(path, data) {
		return nil, &TargetError{Dir: to, Resolved: path, DataDir: dataDir}
	}
	if err := emptyFolder(to, path); err != nil {
		return nil, err
	}
	return &target{path: path}, nil
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

// emptyFolder makes sure path (the folder to, its links resolved) does
// not exist, removing it if it is an empty folder.
func emptyFolder(to, path string) error {
	f, err := os.Open(path)
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
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("backing up to %s: %w", to, err)
	}
	return nil
}
