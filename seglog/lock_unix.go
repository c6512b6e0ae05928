//go:build unix

package seglog

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cairn-edge/cairn/datadir"
)

// LockDir takes an exclusive lock on dir (a LOCK file in it) for this
// process, so that two processes never write the files in it; it returns
// the release. It fails at once if another process holds the lock. A
// LOCK that is a symbolic link, or has another name, is refused
// (datadir.OpenFile).
func LockDir(dir string) (func() error, error) {
	f, err := datadir.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another process: %w", dir, err)
	}
	return f.Close, nil
}
