//go:build unix

package datadir

import (
	"errors"
	"os"
	"syscall"
)

func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
}

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }

// links is a file's number of hard links.
func links(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Nlink)
	}
	return 1
}

// owner is the uid that owns st, and whether it is the process's
// effective one.
func owner(st os.FileInfo) (uid int, own bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, true
	}
	return int(s.Uid), int(s.Uid) == os.Geteuid()
}
