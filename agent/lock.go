package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/cairn-edge/cairn/datadir"
	"github.com/cairn-edge/cairn/ingest"
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
	if err := checkEntries(dataDir); err != nil {
		release()
		return nil, err
	}
	if err := writePID(filepath.Join(dataDir, pidFile)); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// entries are what the agent keeps in its data directory: the one list
// of them (TestDataDirHoldsOnlyItsEntries). The checkpoint store is
// checkpoints.db (and checkpoints.db.moving while an earlier store moves
// into it); of an earlier cairn's, it reads checkpoints/ and ingest.db
// to move them. A store set aside, damaged or not cairn's
// (checkpoints.db.damaged-N, .foreign-N), is never written again.
var entries = map[string]datadir.Kind{"LOCK": datadir.File, pidFile: datadir.File, "cairn.sock": datadir.Socket,
	"checkpoint-id": datadir.File, "checkpoints.db": datadir.File, "checkpoints.db.moving": datadir.File, "ingest": datadir.Dir,
	"savepoints": datadir.Dir, savepointMark: datadir.File, savepointMark + ".new": datadir.File, "checkpoints": datadir.Dir, "ingest.db": datadir.File}

// checkEntries refuses a data directory in which one of the entries the
// agent keeps, or one under those that are directories, is a symbolic
// link, a file with more than one name, of another kind than the agent
// keeps there, of another user or one that other users may write
// (datadir.CheckOwnEntry): whoever could write the directory could point the
// agent's stores, and the files it writes as its user (root, perhaps),
// anywhere, or decide what it restores. The directory itself may be a
// link (to another disk, say). The files are also opened without
// following links (datadir.OpenFile), so that none can be put there
// after this check.
func checkEntries(dataDir string) error {
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		if err := datadir.CheckOwnEntry(filepath.Join(dataDir, name), entries[name]); err != nil {
			return fmt.Errorf("data directory %s: %w", dataDir, err)
		}
	}
	return nil
}

// writePID writes this process's pid to path, not following a link there.
func writePID(path string) error {
	f, err := datadir.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, os.Getpid())
	return errors.Join(err, f.Close())
}

// warnIfShared warns of a data directory that other users may write: they
// could remove or replace the agent's stores.
func warnIfShared(dataDir string, log *slog.Logger) {
	if st, err := os.Stat(dataDir); err == nil && st.Mode().Perm()&0o022 != 0 {
		log.Warn("the data directory may be written by other users, who could remove or replace its stores: chmod go-w it",
			"data_dir", dataDir, "mode", st.Mode().Perm().String())
	}
}

// warnIfUnreachable warns when members of the control group (gid) cannot
// reach the socket: when the data directory, or a directory above it,
// lets neither the group nor others search it.
func warnIfUnreachable(dataDir, group string, gid int, log *slog.Logger) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return
	}
	for {
		st, err := os.Stat(dir)
		if err != nil {
			return
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		perm := st.Mode().Perm()
		if ok && perm&0o001 == 0 && (int(sys.Gid) != gid || perm&0o010 == 0) {
			log.Warn("members of the control group cannot reach the control socket: chgrp the directory to the group and chmod g+x it",
				"group", group, "dir", dir, "mode", perm.String(), "dir_gid", sys.Gid)
			return
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
	}
}

// dataDirIdentity is what the agent keeps in its data directory, as it
// opened it: each path's device and inode, the directory first.
type dataDirIdentity []identified

// identified is a path's device and inode.
type identified struct {
	path string
	id   [2]uint64
}

// identify notes the identity of dataDir, its checkpoint store and its
// ingest logs.
func identify(dataDir string) (dataDirIdentity, error) {
	var ids dataDirIdentity
	for _, p := range []string{dataDir, StorePath(dataDir), ingest.Dir(dataDir)} {
		id, err := identity(p)
		if err != nil {
			return nil, err
		}
		ids = append(ids, identified{p, id})
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
// or another file in its place), or nil; the directory is looked at
// first, so that one swapped for another is said to be replaced, not its
// entries removed. The agent would otherwise go on checkpointing into
// deleted files, and the next start would find nothing.
func (ids dataDirIdentity) changed() error {
	for _, want := range ids {
		got, err := identity(want.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("%s was removed under the running agent", want.path)
		case err != nil:
			return fmt.Errorf("%s cannot be checked: %w", want.path, err)
		case got != want.id:
			return fmt.Errorf("%s was replaced under the running agent", want.path)
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
