package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cairn-edge/cairn/seglog"
)

// pidFile names the process that holds a data directory's lock.
const pidFile = "cairn.pid"

// lockDataDir makes this process the only agent on dataDir, before it
// starts anything (a broker, a listener), and notes its pid for the next
// one to name; it returns the release. A second agent fails at once:
// "data directory D is in use by cairn (pid N)".
func lockDataDir(dataDir string) (func() error, error) {
	release, err := seglog.LockDir(dataDir)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("data directory %s: %w (run as the user that owns it)", dataDir, err)
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
		}
		if b, rerr := os.ReadFile(filepath.Join(dataDir, pidFile)); rerr == nil {
			if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil {
				return nil, fmt.Errorf("data directory %s is in use by cairn (pid %d)", dataDir, pid)
			}
		}
		return nil, fmt.Errorf("data directory %s is in use by another cairn: %w", dataDir, err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, pidFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		release()
		return nil, err
	}
	return release, nil
}
