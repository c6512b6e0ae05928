package localrecovery_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/localrecovery"
)

var (
	crashKills = flag.Int("crash.kills", 50, "SIGKILLs per crash test run")
	crashSeed  = flag.Uint64("crash.seed", 0, "seed of the crash test (0: from the clock)")
)

// Workload of the crash tests: about 0.3 s per uninterrupted run.
const (
	crashRecords = 60_000
	crashKeys    = 300
	crashPerTick = 100 // records per millisecond per source subtask
)

// helperRun is one start of the helper process.
type helperRun struct {
	killed bool   // ended by SIGKILL
	stderr string // what it logged
}

// startHelper runs the helper on dir with extra environment; if killAfter
// is positive, it is killed with SIGKILL after that long.
func startHelper(t *testing.T, dir string, killAfter time.Duration, env ...string) helperRun {
	t.Helper()
	// Every start opens a file that bbolt's check finds whole: a kill
	// never leaves a damaged one.
	if err := localrecovery.CheckFile(filepath.Join(dir, "checkpoints.db")); err != nil {
		t.Fatalf("the store's file after a kill: %v", err)
	}
	return runHelperProcess(t, dir, killAfter, env...)
}

// runHelperProcess runs the helper as startHelper does, without checking
// the store's file first.
func runHelperProcess(t *testing.T, dir string, killAfter time.Duration, env ...string) helperRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir,
		fmt.Sprintf("CAIRN_RECORDS=%d", crashRecords), fmt.Sprintf("CAIRN_KEYS=%d", crashKeys),
		fmt.Sprintf("CAIRN_PER_TICK=%d", crashPerTick))
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if killAfter > 0 {
		timer := time.AfterFunc(killAfter, func() { cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return helperRun{stderr: stderr.String()}
	case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
		return helperRun{killed: true, stderr: stderr.String()}
	}
	t.Fatalf("helper failed: %v\n%s", err, stderr.String())
	return helperRun{}
}

// checkResult compares dir's result with the failure-free reference.
func checkResult(t *testing.T, dir string) {
	t.Helper()
	got, err := readResult(filepath.Join(dir, "result"))
	if err != nil {
		t.Fatal(err)
	}
	want := referenceSums(helperInput(crashRecords, crashKeys))
	if len(got) != len(want) {
		t.Fatalf("result has %d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s: sum %v, want %v (records lost or counted twice)", k, got[k], w)
		}
	}
	os.Remove(filepath.Join(dir, "result"))
}

var failpoints = []string{"blob-chunk", "blob-written", "before-completion", "after-completion", "retention"}

// TestCrashRestartEqualsFailureFree kills the helper again and again, at
// random moments and at the store's failpoints, restarting it on the same
// data directory each time; every run that reaches the end of the input
// must report exactly the failure-free sums. Then the next cycle starts on
// an empty directory.
func TestCrashRestartEqualsFailureFree(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, mode := range []struct {
		name string
		env  []string
	}{{"full", nil}, {"incremental", []string{"CAIRN_INCREMENTAL=1"}},
		{"unaligned", []string{"CAIRN_CHECKPOINT_MODE=unaligned", "CAIRN_INCREMENTAL=1", "CAIRN_SPIN=20000"}}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			kills, finished, restored := 0, 0, 0
			byPoint := map[string]int{}
			replayed := 0
			// The first kill is at the first checkpoint's completion, and
			// says how long one takes to complete here (under -race, on a
			// loaded machine, a second and more): random kills fall up to
			// twice that and 300 ms after a start, so that most find a
			// checkpoint to restore.
			began := time.Now()
			if run := startHelper(t, dir, 0, append(mode.env, "CAIRN_FAILPOINT=after-completion:1")...); run.killed {
				kills++
				byPoint["after-completion"]++
			} else {
				t.Fatal("the helper finished before its first checkpoint completed")
			}
			window := 300*time.Millisecond + 2*time.Since(began)
			for kills < (*crashKills+2)/3 {
				var run helperRun
				if rng.IntN(2) == 0 {
					fp := failpoints[rng.IntN(len(failpoints))]
					run = startHelper(t, dir, 0, append(mode.env, fmt.Sprintf("CAIRN_FAILPOINT=%s:%d", fp, 1+rng.IntN(6)))...)
					if run.killed {
						byPoint[fp]++
					}
				} else {
					run = startHelper(t, dir, 5*time.Millisecond+time.Duration(rng.Int64N(int64(window))), mode.env...)
					if run.killed {
						byPoint["random"]++
					}
				}
				restored += strings.Count(run.stderr, "restoring checkpoint")
				replayed += inFlightRestored(run.stderr)
				if run.killed {
					kills++
					continue
				}
				finished++
				checkResult(t, dir)
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			run := startHelper(t, dir, 0, mode.env...)
			restored += strings.Count(run.stderr, "restoring checkpoint")
			checkResult(t, dir)
			t.Logf("%d kills %v (random ones within %v of a start), %d cycles reached the end, %d starts restored a checkpoint, %d records replayed from channel state",
				kills, byPoint, window.Round(time.Millisecond), finished+1, restored, replayed)
			if restored == 0 {
				t.Fatal("no start restored a checkpoint: the test proves nothing")
			}
			if mode.name == "unaligned" && replayed == 0 && kills >= 10 {
				t.Fatal("no restore brought back records in flight: unaligned checkpoints were not exercised")
			}
		})
	}
}

var inFlightLine = regexp.MustCompile(`msg="restoring checkpoint" .*in_flight_records=(\d+)`)

// inFlightRestored sums the records in flight that a run's restores
// brought back.
func inFlightRestored(stderr string) int {
	n := 0
	for _, m := range inFlightLine.FindAllStringSubmatch(stderr, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// interrupted runs the helper until the store has completed a few
// checkpoints, killing it at the third completion record. Its input is
// paced ten times slower (about 3 s) so that a slow disk's fsyncs cannot
// make it end first; the pace is not part of the state.
func interrupted(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if run := startHelper(t, dir, 0, "CAIRN_FAILPOINT=after-completion:3", fmt.Sprintf("CAIRN_PER_TICK=%d", crashPerTick/10)); !run.killed {
		t.Fatal("the helper finished before its third checkpoint")
	}
	return dir
}

// TestRestartSkipsFlippedCheckpoint flips a bit in the newest
// checkpoint's state: its chunk fails its checksum, the restore says so
// and falls back to the checkpoint before, and the final state is exact.
func TestRestartSkipsFlippedCheckpoint(t *testing.T) {
	dir := interrupted(t)
	id, err := localrecovery.FlipNewestBlob(filepath.Join(dir, "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	run := startHelper(t, dir, 0)
	if !strings.Contains(run.stderr, fmt.Sprintf(`msg="checkpoint cannot be restored; trying an older one" id=%d`, id)) || !strings.Contains(run.stderr, "fails its checksum") {
		t.Fatalf("the helper did not say checkpoint %d was damaged:\n%s", id, run.stderr)
	}
	if !strings.Contains(run.stderr, fmt.Sprintf(`msg="restoring checkpoint" id=%d`, id-1)) {
		t.Fatalf("the helper did not restore checkpoint %d:\n%s", id-1, run.stderr)
	}
	checkResult(t, dir)
}

// TestRestartAfterDamage damages the store's file as bit rot in a page
// header or a copy cut short would: the start sets it aside, moves what
// of it verifies into a new file, restores the newest of that, and the
// final state is exact.
func TestRestartAfterDamage(t *testing.T) {
	for _, damage := range []string{"leaf", "truncated"} {
		t.Run(damage, func(t *testing.T) {
			dir := interrupted(t)
			path := filepath.Join(dir, "checkpoints.db")
			var err error
			if damage == "truncated" {
				err = localrecovery.TruncateHalf(path)
			} else {
				err = localrecovery.FlipPage(path, damage)
			}
			if err != nil {
				t.Fatal(err)
			}
			if localrecovery.CheckFile(path) == nil {
				t.Fatal("the check finds no damage")
			}
			run := runHelperProcess(t, dir, 0)
			if !strings.Contains(run.stderr, "checkpoint store is damaged; it is set aside") {
				t.Fatalf("the helper did not report the damaged store:\n%s", run.stderr)
			}
			if _, err := os.Stat(path + ".damaged-1"); err != nil {
				t.Fatalf("the damaged file is not kept aside: %v", err)
			}
			checkResult(t, dir)
		})
	}
}
