package runtime

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
)

// simulate runs the topology of seed in mode with up to crashes crashes,
// scheduling with a random source derived from seed and salt. Even seeds
// take incremental snapshots.
func simulate(seed, salt uint64, mode checkpoint.Mode, crashes int) (keyedState, *simulator, error) {
	return simulateWith(&simulator{mode: mode}, seed, salt, crashes)
}

// simulateWith runs s, whose mode and alignment timeout are set.
func simulateWith(s *simulator, seed, salt uint64, crashes int) (keyedState, *simulator, error) {
	s.rng = rand.New(rand.NewPCG(seed, salt))
	s.incremental = seed%2 == 0
	if s.build == nil {
		s.build = randomTopology(seed)
	}
	s.store = checkpoint.NewMemStore(2)
	if err := s.run(crashes); err != nil {
		return nil, s, err
	}
	st, err := s.state()
	return st, s, err
}

// seeds returns the seeds to run: -sim.seed alone, or -sim.seeds of them.
func seeds() []uint64 {
	if *simSeed != 0 {
		return []uint64{*simSeed}
	}
	out := make([]uint64, *simSeeds)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// multiInput reports whether some subtask of the topology has more than one
// input channel: only such subtasks can duplicate in at-least-once mode.
func multiInput(seed uint64) bool {
	p := build(randomTopology(seed)(), taskConfig{mode: checkpoint.ExactlyOnce, batchSize: 1}, &simulator{})
	for _, ins := range p.inputs {
		if len(ins) > 1 {
			return true
		}
	}
	return false
}

func TestSimulationExactlyOnceEqualsFailureFree(t *testing.T) {
	exactlyOnce(t, func() *simulator { return &simulator{mode: checkpoint.ExactlyOnce} })
}

// TestSimulationUnalignedEqualsFailureFree: unaligned checkpoints, whose
// records in flight are restored and replayed, are exactly-once too.
func TestSimulationUnalignedEqualsFailureFree(t *testing.T) {
	replayed, early := exactlyOnce(t, func() *simulator { return &simulator{mode: checkpoint.Unaligned} })
	if len(seeds()) >= 50 && replayed == 0 {
		t.Fatal("no restore replayed channel state: unaligned checkpoints were not exercised")
	}
	if len(seeds()) >= 50 && early == 0 {
		t.Fatal("no credit went back before its batch was processed: the inbox's capture was not exercised")
	}
}

// TestSimulationUnalignedKeepsWatermarksInFlight: after a restore from an
// unaligned checkpoint, every record meets the event time it met in a
// failure-free run, as it must for a window's lateness to be exactly-once:
// the watermarks in flight among the records are channel state too, in
// their places, and a source that restored its watermark with nothing
// left to read still ends its downstream's windows.
func TestSimulationUnalignedKeepsWatermarksInFlight(t *testing.T) {
	var replayed, restores int
	for _, seed := range seeds() {
		want, _, err := simulateWith(&simulator{mode: checkpoint.ExactlyOnce, build: witnessTopology(seed), readSize: 1}, seed, 1, 0)
		if err != nil {
			t.Fatalf("seed %d, reference run: %v (rerun with -sim.seed=%d)", seed, err, seed)
		}
		got, s, err := simulateWith(&simulator{mode: checkpoint.Unaligned, build: witnessTopology(seed), readSize: 1}, seed, 2, 3)
		if err != nil {
			t.Fatalf("seed %d: %v (rerun with -sim.seed=%d)", seed, err, seed)
		}
		if d := got.diff(want, false); d != "" {
			t.Fatalf("seed %d: after %d crashes and %d restores, records met other watermarks than in a failure-free run (rerun with -sim.seed=%d):\n%s",
				seed, s.crashes, s.restores, seed, d)
		}
		replayed, restores = replayed+s.replayed, restores+s.restores
	}
	if len(seeds()) >= 50 && (replayed == 0 || restores == 0) {
		t.Fatalf("%d restores replayed %d records of channel state: nothing was in flight", restores, replayed)
	}
}

// TestSimulationAlignmentTimeoutEqualsFailureFree: alignments that time
// out and switch to unaligned midway are exactly-once too.
func TestSimulationAlignmentTimeoutEqualsFailureFree(t *testing.T) {
	replayed, _ := exactlyOnce(t, func() *simulator {
		return &simulator{mode: checkpoint.ExactlyOnce, alignmentTimeout: time.Millisecond}
	})
	if len(seeds()) >= 50 && replayed == 0 {
		t.Fatal("no restore replayed channel state: no alignment timed out")
	}
}

// exactlyOnce checks that runs of the simulators that newSim makes, with
// crashes, end in the state of a failure-free exactly-once run; it returns
// how many records were replayed from channel state, and how many batches
// gave their credit back early.
func exactlyOnce(t *testing.T, newSim func() *simulator) (replayed, early int) {
	var crashes, restores, completed, reused, elided int
	for _, seed := range seeds() {
		want, _, err := simulate(seed, 1, checkpoint.ExactlyOnce, 0)
		if err != nil {
			t.Fatalf("seed %d, reference run: %v (rerun with -sim.seed=%d)", seed, err, seed)
		}
		got, s, err := simulateWith(newSim(), seed, 2, 3)
		if err != nil {
			t.Fatalf("seed %d: %v (rerun with -sim.seed=%d)", seed, err, seed)
		}
		if d := got.diff(want, false); d != "" {
			t.Fatalf("seed %d: after %d crashes and %d restores, state differs from a failure-free run (rerun with -sim.seed=%d):\n%s",
				seed, s.crashes, s.restores, seed, d)
		}
		crashes, restores, completed, replayed = crashes+s.crashes, restores+s.restores, completed+s.completed, replayed+s.replayed
		reused, elided, early = reused+s.reused, elided+s.elided, early+s.early
	}
	t.Logf("%d seeds: %d crashes, %d restores from a completed checkpoint, %d checkpoints completed (%d without a record of their own), "+
		"%d snapshots not stored again, %d records replayed from channel state, %d credits back before processing",
		len(seeds()), crashes, restores, completed, elided, reused, replayed, early)
	if len(seeds()) >= 50 && (restores == 0 || completed == 0) {
		t.Fatalf("the simulation never restored from a checkpoint: it proves nothing")
	}
	if len(seeds()) >= 50 && (reused == 0 || elided == 0) {
		t.Fatalf("no snapshot was stored once for two checkpoints, or no checkpoint completed without a record: unchanged state was not exercised")
	}
	return replayed, early
}

func TestSimulationAtLeastOnceLosesNothing(t *testing.T) {
	duplicated := 0
	for _, seed := range seeds() {
		want, _, err := simulate(seed, 1, checkpoint.ExactlyOnce, 0)
		if err != nil {
			t.Fatalf("seed %d, reference run: %v", seed, err)
		}
		got, _, err := simulate(seed, 2, checkpoint.AtLeastOnce, 3)
		if err != nil {
			t.Fatalf("seed %d: %v (rerun with -sim.seed=%d)", seed, err, seed)
		}
		if d := got.diff(want, true); d != "" {
			t.Fatalf("seed %d: at-least-once lost records (rerun with -sim.seed=%d):\n%s", seed, seed, d)
		}
		if got.diff(want, false) == "" {
			continue
		}
		duplicated++
		if !multiInput(seed) {
			t.Fatalf("seed %d: at-least-once duplicated records although no subtask has two input channels:\n%s", seed, got.diff(want, false))
		}
	}
	t.Logf("%d seeds: at-least-once counted records twice in %d", len(seeds()), duplicated)
	if len(seeds()) >= 100 && duplicated == 0 {
		t.Fatalf("at-least-once never duplicated a record: the modes were not shown to differ")
	}
}
