package localrecovery

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cairn-edge/cairn/checkpoint"
)

// Device is one device's uploads in remote storage (remote.Device): a
// read-only store of its checkpoints, and the device's name.
type Device interface {
	checkpoint.Store
	Name() string
}

// Sources are where a job's state may come from.
type Sources struct {
	// Savepoint, if set, is a savepoint to start from, with the store
	// that holds its state: the only candidate, restored or the start
	// fails, whatever AcceptStateLoss says.
	Savepoint *Candidate
	// Local is the job's own store (runtime.Options.Store).
	Local checkpoint.Store
	// Own and From, set when remote storage is on, are this device's
	// uploads and those of the device it restores from
	// (restore_from_device); From is Own when it is nil or none is named.
	Own, From Device
	// AcceptStateLoss starts with the newest candidate whose state
	// verifies, skipping each one that fails for whatever reason, or with
	// empty state, where without it the start fails or is refused
	// (cairn run --accept-state-loss).
	AcceptStateLoss bool
	// Logger receives what is skipped and where the state comes from;
	// default slog.Default.
	Logger *slog.Logger
}

// Choice is what a job restores.
type Choice struct {
	// Candidates are for runtime.Options.Restore, newest first: the
	// chosen one, whose state verified and is held for the runtime to
	// read (Candidate.Reader), then the older ones of its store, which
	// the runtime falls back to past damage its decoding finds. None: the
	// job starts with empty state.
	Candidates []Candidate
	// Source says where they are: "local", "remote" or "savepoint";
	// "local" when there are none.
	Source string
}

// Choose chooses what a job restores, in the order of the package doc:
// it verifies the candidates newest first until one verifies, falling
// back past damage only (Fallback), and turns to remote storage, if it is
// on, when no local one verifies. It fails the start when every
// candidate is damaged (ErrNothingRestored) or one cannot be read for
// another reason, and refuses it when there is no candidate at all while
// Local shows that checkpoints were taken (its LastID: they were deleted,
// truncated or damaged away); with AcceptStateLoss it starts with what
// verifies, or empty, instead. A damaged ingest log is the sources' to
// refuse (mqttio.SourceConfig.AcceptStateLoss).
func Choose(s Sources) (Choice, error) {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Savepoint != nil {
		return s.first([]Candidate{*s.Savepoint}, "savepoint", false)
	}
	ms, err := s.Local.Completed()
	if err != nil {
		return Choice{}, err
	}
	c, err := s.first(Candidates(s.Local, ms), "local", s.AcceptStateLoss)
	if s.Own == nil || len(c.Candidates) > 0 || err != nil && !errors.Is(err, ErrNothingRestored) {
		return s.orNothing(c, err, len(ms) > 0)
	}
	from, uploaded, rerr := s.uploads()
	if rerr != nil {
		return Choice{}, fmt.Errorf("no local checkpoint to restore, and remote storage cannot be read: %w", rerr)
	}
	if len(uploaded) == 0 {
		if len(ms) == 0 {
			s.Logger.Info("no checkpoint to restore, locally or in remote storage", "device", from.Name())
		}
		return s.orNothing(c, err, len(ms) > 0) // damaged local ones fail the start (I9)
	}
	s.Logger.Info("no local checkpoint to restore; restoring from remote storage", "device", from.Name(), "newest", uploaded[0].ID)
	c, err = s.first(Candidates(from, uploaded), "remote", s.AcceptStateLoss)
	return s.orNothing(c, err, true)
}

// first verifies cands in order, strictly (Fallback) or, accepting lost
// state, skipping each that fails, and chooses the first that verifies,
// holding what was read of it; none is an empty Choice.
func (s Sources) first(cands []Candidate, source string, accept bool) (Choice, error) {
	var blobs map[checkpoint.StateHandle][]byte
	verify := func(c Candidate) (err error) {
		blobs, err = read(c.Store, c.Manifest, true)
		return err
	}
	var i int
	var err error
	if accept {
		i = s.skipping(cands, verify)
	} else {
		i, err = Fallback(cands, s.Logger, verify)
	}
	if i < 0 {
		return Choice{}, err
	}
	chosen := cands[i:]
	chosen[0].held = &held{Store: chosen[0].Store, blobs: blobs}
	return Choice{Candidates: chosen, Source: source}, nil
}

// skipping returns the index of the first of cands that verify takes,
// or -1, skipping each that fails, whatever the failure, with a warning:
// Fallback for a start that accepts lost state.
func (s Sources) skipping(cands []Candidate, verify func(Candidate) error) int {
	for i, c := range cands {
		err := verify(c)
		if err == nil {
			return i
		}
		s.Logger.Warn("accepting lost state: checkpoint skipped", "id", c.Manifest.ID, "err", err)
	}
	return -1
}

// orNothing returns c and err, what the last candidates tried came to,
// unless nothing was chosen and nothing failed: then the job starts with
// empty state, or is refused a start that would silently lose what Local
// shows was taken. seen says whether there were candidates.
func (s Sources) orNothing(c Choice, err error, seen bool) (Choice, error) {
	if err != nil || len(c.Candidates) > 0 {
		return c, err
	}
	c.Source = "local"
	taken, err := s.Local.LastID()
	if s.AcceptStateLoss {
		if taken > 0 || seen {
			s.Logger.Warn("accepting lost state: starting with empty state", "ids_continue_above", taken)
		}
		return c, nil
	}
	if err != nil || taken == 0 {
		return c, err
	}
	return c, fmt.Errorf("no checkpoint to restore, but checkpoints up to id %d were taken on this data directory: "+
		"their state is lost (the checkpoint store was deleted, truncated or damaged). Put the store back from a copy, "+
		"or start with empty state anyway: cairn run --accept-state-loss", taken)
}

// uploads raises Local's id counter above every id this device uploaded
// (invariant I6), then lists the uploads a remote restore reads, newest
// first: this device's own, or where it has none, those of the device it
// restores from. A device's own past comes first: after it took over
// from another and uploaded checkpoints of its own, those are newer than
// anything the other left.
func (s Sources) uploads() (Device, []*checkpoint.Manifest, error) {
	last, err := s.Own.LastID()
	if err == nil {
		err = s.Local.SaveLastID(last)
	}
	if err != nil {
		return s.Own, nil, err
	}
	ms, err := s.Own.Completed()
	if err != nil || len(ms) > 0 || s.From == nil || s.From == s.Own {
		return s.Own, ms, err
	}
	ms, err = s.From.Completed()
	return s.From, ms, err
}
