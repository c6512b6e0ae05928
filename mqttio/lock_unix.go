//go:build unix

package mqttio

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir (a LOCK file in it) for this
// process, so that two agents never write one log; it returns the release.
func lockDir(dir string) (func() error, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("ingest log %s is in use by another process: %w", dir, err)
	}
	return f.Close, nil
}
