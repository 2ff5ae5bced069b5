//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package embedded

import (
	"io"
	"os"
	"syscall"
)

// lockHolder returns the id of the process holding Pebble's lock on the
// file name (a POSIX record lock), or 0 when none does or it cannot tell.
// Call it only when this process holds no lock on the file: closing any
// descriptor of a file drops every record lock the process holds on it.
func lockHolder(name string) int {
	f, err := os.Open(name)
	if err != nil {
		return 0
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil || lk.Type == syscall.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}

// lockOwner returns the user id owning the file name, and whether it could
// tell.
func lockOwner(name string) (int, bool) {
	info, err := os.Stat(name)
	if err != nil {
		return 0, false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
