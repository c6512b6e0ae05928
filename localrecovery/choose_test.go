package localrecovery

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/checkpoint"
)

// device is remote storage's uploads of one device, in memory.
type device struct {
	*checkpoint.MemStore
	name string
}

func (d device) Name() string { return d.name }

// putChecked completes checkpoint id in store with one subtask's state; damaged,
// its handle names other bytes than those stored.
func putChecked(t *testing.T, store checkpoint.Store, id uint64, damaged bool) *checkpoint.Manifest {
	t.Helper()
	task := checkpoint.TaskID{Operator: "count", Subtask: 0}
	h, err := store.PutState(id, task, slices.Values([][]byte{fmt.Appendf(nil, "state %d", id)}))
	if err != nil {
		t.Fatal(err)
	}
	if damaged {
		h.CRC32C ^= 1
	}
	m := &checkpoint.Manifest{ID: id, Subtasks: []checkpoint.Ack{{Task: task, ID: id, State: h}}}
	if err := store.Complete(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// chosenIDs lists the ids of c's candidates.
func chosenIDs(c Choice) []uint64 {
	var out []uint64
	for _, cand := range c.Candidates {
		out = append(out, cand.Manifest.ID)
	}
	return out
}

// TestChooseOrder: a savepoint, when given, is all there is; else the
// newest local checkpoint that verifies; if none does, this device's
// uploads, else those of the device it restores from, after the local id
// counter is raised above this device's uploads (I6). Damage is skipped
// and logged, every other failure fails the start, and a start with
// nothing to restore where checkpoints were taken is refused unless the
// loss is accepted (I9).
func TestChooseOrder(t *testing.T) {
	type setup struct {
		// checkpoints, oldest first: damaged or not; own or other set
		// turns remote storage on
		local, savepoint, own, other []bool
		accept                       bool
		taken                        uint64 // the local id counter
	}
	for _, c := range []struct {
		name       string
		setup      setup
		source     string
		want       []uint64 // candidates' ids
		err        string   // a part of the error
		nothing    bool     // the error wraps ErrNothingRestored
		said       string   // a part of the log
		lastIDOver uint64   // the local id counter after, at least
	}{
		{name: "savepoint first", setup: setup{local: []bool{false}, savepoint: []bool{false}}, source: "savepoint", want: []uint64{100}},
		{name: "damaged savepoint", setup: setup{local: []bool{false}, savepoint: []bool{true}, accept: true}, nothing: true, err: "checkpoint 100"},
		{name: "newest local", setup: setup{local: []bool{false, false}, own: []bool{false}}, source: "local", want: []uint64{2, 1}},
		{name: "older local past damage", setup: setup{local: []bool{false, true}, own: []bool{false}}, source: "local", want: []uint64{1},
			said: `msg="checkpoint cannot be restored; trying an older one" id=2`},
		{name: "own uploads", setup: setup{local: []bool{true}, own: []bool{false, false}, other: []bool{false}}, source: "remote", want: []uint64{11, 10},
			said: `msg="no local checkpoint to restore; restoring from remote storage" device=gw-a newest=11`, lastIDOver: 11},
		{name: "the other device's uploads", setup: setup{other: []bool{false, true}}, source: "remote", want: []uint64{20},
			said: "device=gw-b newest=21"},
		{name: "damaged local, no uploads", setup: setup{local: []bool{true}, own: []bool{}}, nothing: true,
			said: `msg="checkpoint cannot be restored; trying an older one" id=1`},
		{name: "nothing", setup: setup{}, source: "local"},
		{name: "nothing where some were taken", setup: setup{taken: 7}, err: "checkpoints up to id 7 were taken on this data directory"},
		{name: "nothing anywhere", setup: setup{own: []bool{}}, source: "local",
			said: `msg="no checkpoint to restore, locally or in remote storage" device=gw-b`},
		{name: "accepted loss", setup: setup{local: []bool{true}, accept: true}, source: "local",
			said: `msg="accepting lost state: starting with empty state" ids_continue_above=1`},
		{name: "accepted loss, an older one", setup: setup{local: []bool{false, true}, own: []bool{true}, accept: true}, source: "local", want: []uint64{1},
			said: `msg="accepting lost state: checkpoint skipped" id=2`},
		{name: "accepted loss, remote", setup: setup{local: []bool{true}, own: []bool{false, true}, accept: true}, source: "remote", want: []uint64{10}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			local := checkpoint.NewMemStore(0)
			local.SaveLastID(c.setup.taken)
			s := Sources{Local: local, AcceptStateLoss: c.setup.accept, Logger: slog.New(slog.NewTextHandler(&log, nil))}
			for i, bad := range c.setup.local {
				putChecked(t, local, uint64(1+i), bad)
			}
			for _, bad := range c.setup.savepoint {
				sp := checkpoint.NewMemStore(0)
				s.Savepoint = &Candidate{Manifest: putChecked(t, sp, 100, bad), Store: sp}
			}
			if c.setup.own != nil || c.setup.other != nil {
				own, other := device{checkpoint.NewMemStore(0), "gw-a"}, device{checkpoint.NewMemStore(0), "gw-b"}
				for i, bad := range c.setup.own {
					putChecked(t, own, uint64(10+i), bad)
				}
				for i, bad := range c.setup.other {
					putChecked(t, other, uint64(20+i), bad)
				}
				s.Own, s.From = own, other
			}
			got, err := Choose(s)
			switch {
			case c.err == "" && !c.nothing && err != nil:
				t.Fatalf("Choose: %v\n%s", err, log.String())
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("Choose: %v, want an error saying %q", err, c.err)
			case c.nothing != errors.Is(err, ErrNothingRestored):
				t.Fatalf("Choose: %v; wraps ErrNothingRestored: want %v", err, c.nothing)
			case err == nil && (got.Source != c.source || !slices.Equal(chosenIDs(got), c.want)):
				t.Fatalf("Choose: %s %v, want %s %v\n%s", got.Source, chosenIDs(got), c.source, c.want, log.String())
			case !strings.Contains(log.String(), c.said):
				t.Fatalf("the log does not say %q:\n%s", c.said, log.String())
			}
			if last, _ := local.LastID(); last < c.lastIDOver {
				t.Fatalf("local id counter %d, want at least %d", last, c.lastIDOver)
			}
		})
	}
}

// unreachable fails every read as a network does, not as damage does.
type unreachable struct{ device }

func (unreachable) ReadState(checkpoint.StateHandle) ([]byte, error) {
	return nil, errors.New("dial tcp 10.0.0.9:443: i/o timeout")
}

// TestChooseFallsBackOnlyPastDamage: an upload that cannot be read for
// another reason than damage fails the start, rather than restore an
// older checkpoint; accepting lost state, it is skipped.
func TestChooseFallsBackOnlyPastDamage(t *testing.T) {
	own := device{checkpoint.NewMemStore(0), "gw-a"}
	putChecked(t, own, 10, false)
	putChecked(t, own, 11, false)
	for _, accept := range []bool{false, true} {
		s := Sources{Local: checkpoint.NewMemStore(0), Own: unreachable{own}, AcceptStateLoss: accept, Logger: slog.New(slog.DiscardHandler)}
		got, err := Choose(s)
		if !accept && (err == nil || !strings.Contains(err.Error(), "checkpoint 11 cannot be restored: dial tcp")) {
			t.Fatalf("Choose: %v, %v; want checkpoint 11's read error", chosenIDs(got), err)
		}
		if accept && (err != nil || len(got.Candidates) != 0) {
			t.Fatalf("accepting lost state: Choose: %v, %v; want empty state", chosenIDs(got), err)
		}
	}
}
