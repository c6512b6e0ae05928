package recovery

import (
	"errors"
	"fmt"
	"log/slog"

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

// Verify reads every blob of m's state from store, which verifies each
// one's size and checksum (checkpoint.Store.ReadState), and returns the
// first failure, or nil: whether m can be restored, as far as its stored
// bytes go.
func Verify(store checkpoint.Store, m *checkpoint.Manifest) error {
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			if _, err := store.ReadState(h); err != nil {
				return err
			}
		}
	}
	return nil
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
