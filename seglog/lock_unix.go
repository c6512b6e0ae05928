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
// LOCK that is a symbolic link, has another name, or that datadir's owner
// rule refuses, is refused (datadir.OpenFile).
func LockDir(dir string) (func() error, error) {
	return lock(dir, os.O_RDWR|os.O_CREATE)
}

// LockDirToRead is LockDir for a process that only reads dir, such as
// root reading a stopped agent's dead letters: it opens the LOCK the
// agent made read-only, creating nothing (a file root made there would
// be another user's to the agent, which would refuse it), so the owner
// rule, which is about what the agent writes, does not apply. No LOCK
// fails with fs.ErrNotExist: no agent has run on dir.
func LockDirToRead(dir string) (func() error, error) {
	return lock(dir, os.O_RDONLY)
}

// lock opens dir's LOCK with flag and takes the lock on it (flock takes
// an exclusive lock on a file opened only to read too).
func lock(dir string, flag int) (func() error, error) {
	f, err := datadir.OpenFile(filepath.Join(dir, "LOCK"), flag, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another process: %w", dir, err)
	}
	return f.Close, nil
}
