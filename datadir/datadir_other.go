//go:build !unix

package datadir

import (
	"errors"
	"os"
)

var errLink = errors.New("a symbolic link")

// openNoFollow looks before it opens where there is no O_NOFOLLOW.
func openNoFollow(path string, flag int, perm os.FileMode) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return nil, errLink
	}
	return os.OpenFile(path, flag, perm)
}

func isLoop(err error) bool { return errors.Is(err, errLink) }

func links(os.FileInfo) uint64 { return 1 }

// owner: where there are no uids, every file is the process's own.
func owner(os.FileInfo) (uid int, own bool) { return -1, true }
