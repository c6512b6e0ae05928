package localrecovery

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// ErrNothingRestored is wrapped by the error of a restore whose every
// candidate was damaged.
var ErrNothingRestored = errors.New("no checkpoint could be restored")

// Candidate is a completed checkpoint a job may restore.
type Candidate struct {
	Manifest *checkpoint.Manifest
	// Store holds the checkpoint's state: the job's own store, a
	// savepoint, a device's uploads in remote storage. The runtime
	// continues the chains, and the output numbering, only of a
	// checkpoint in its own store (the same Store value).
	Store checkpoint.Store
	// held, if set, holds the blobs Choose read to verify the candidate.
	held *held
}

// Candidates returns the candidates of ms, completed checkpoints newest
// first, all held by store.
func Candidates(store checkpoint.Store, ms []*checkpoint.Manifest) []Candidate {
	cs := make([]Candidate, len(ms))
	for i, m := range ms {
		cs[i] = Candidate{Manifest: m, Store: store}
	}
	return cs
}

// Reader is the store to read c's state from: for the candidate Choose
// verified, one that serves the blobs Choose read from memory, each once
// (a blob is forgotten once served, and a second read of it reads Store
// again); for any other, Store. Only its ReadState is for use.
func (c Candidate) Reader() checkpoint.Store {
	if c.held != nil {
		return c.held
	}
	return c.Store
}

// held is a store that serves blobs read before from memory, each once,
// and reads the rest from the store it wraps.
type held struct {
	checkpoint.Store
	mu    sync.Mutex
	blobs map[checkpoint.StateHandle][]byte
}

// ReadState implements checkpoint.Store: the blob behind h, from memory
// the first time if it is held, and forgotten there.
func (s *held) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	s.mu.Lock()
	data, ok := s.blobs[h]
	delete(s.blobs, h)
	s.mu.Unlock()
	if ok {
		return data, nil
	}
	return s.Store.ReadState(h)
}

// Verify reads every blob of m's state from store, which verifies each
// one's size and checksum (checkpoint.Store.ReadState), and returns the
// first failure, or nil: whether m can be restored, as far as its stored
// bytes go. It is the check of `cairn checkpoints --verify` and of Choose.
func Verify(store checkpoint.Store, m *checkpoint.Manifest) error {
	_, err := read(store, m, false)
	return err
}

// read reads and verifies every blob of m's state from store, as Verify
// does, and returns them by handle if keep is set.
func read(store checkpoint.Store, m *checkpoint.Manifest, keep bool) (map[checkpoint.StateHandle][]byte, error) {
	var blobs map[checkpoint.StateHandle][]byte
	if keep {
		blobs = make(map[checkpoint.StateHandle][]byte)
	}
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			data, err := store.ReadState(h)
			if err != nil {
				return nil, err
			}
			if keep {
				blobs[h] = data
			}
		}
	}
	return blobs, nil
}

// Fallback tries cands in order and returns the index of the first that
// try takes, or -1 when cands is empty. It falls back to the next only
// past damage (checkpoint.ErrCorrupt, graph.ErrCorruptSnapshot), logging
// each one it skips; any other failure (remote storage unreachable, a
// changed graph) is returned at once, for an older checkpoint would
// restore older state for no good reason, and a retry tries this one
// again (invariant I9). When every candidate is damaged, the error wraps
// ErrNothingRestored and the damage of each.
func Fallback(cands []Candidate, log *slog.Logger, try func(Candidate) error) (int, error) {
	var errs []error
	for i, c := range cands {
		err := try(c)
		if err == nil {
			return i, nil
		}
		id := c.Manifest.ID
		errs = append(errs, fmt.Errorf("checkpoint %d: %w", id, err))
		if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, graph.ErrCorruptSnapshot) {
			return -1, fmt.Errorf("checkpoint %d cannot be restored: %w", id, err)
		}
		log.Error("checkpoint cannot be restored; trying an older one", "id", id, "err", err)
	}
	if len(errs) > 0 {
		return -1, fmt.Errorf("%w: %w", ErrNothingRestored, errors.Join(errs...))
	}
	return -1, nil
}
