package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

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

// dataDirIdentity is what the agent keeps in its data directory, as it
// opened it: each path's device and inode.
type dataDirIdentity map[string][2]uint64

// identify notes the identity of dataDir, its checkpoint store and its
// ingest logs.
func identify(dataDir string) (dataDirIdentity, error) {
	ids := make(dataDirIdentity)
	for _, p := range []string{dataDir, StorePath(dataDir), LogsPath(dataDir)} {
		id, err := identity(p)
		if err != nil {
			return nil, err
		}
		ids[p] = id
	}
	return ids, nil
}

func identity(path string) ([2]uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return [2]uint64{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, nil
}

// changed returns why a path of ids is no longer what was opened (removed,
// or another file in its place), or nil. The agent would otherwise go on
// checkpointing into deleted files, and the next start would find nothing.
func (ids dataDirIdentity) changed() error {
	for p, want := range ids {
		got, err := identity(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("%s was removed under the running agent", p)
		case err != nil:
			return fmt.Errorf("%s cannot be checked: %w", p, err)
		case got != want:
			return fmt.Errorf("%s was replaced under the running agent", p)
		}
	}
	return nil
}

// watch checks ids every interval until ctx is done, and sends the first
// change found to out: the agent then stops, without a final checkpoint
// (its store is gone), with an error that says what to do.
func (ids dataDirIdentity) watch(ctx context.Context, every time.Duration, out chan<- error) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := ids.changed(); err != nil {
			err = fmt.Errorf("data directory: %w: its checkpoints and ingest log are gone, so the agent stops rather "+
				"than checkpoint into deleted files (restart cairn to start from what is left: remote storage if uploads are on)", err)
			select {
			case out <- err:
			case <-ctx.Done():
			}
			return
		}
	}
}
