//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris)

package embedded

// lockHolder cannot tell the process holding the lock here.
func lockHolder(string) int { return 0 }

// lockOwner cannot tell a file's owner here.
func lockOwner(string) (int, bool) { return 0, false }
