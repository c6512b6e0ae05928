//go:build linux && (amd64 || arm64)

package localrecovery_test

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/fusecut"
	"github.com/cairn-edge/cairn/internal/testing/needs"
	"github.com/cairn-edge/cairn/localrecovery"
)

var (
	powercutCuts = flag.Int("powercut.cuts", 20, "power cuts of the bbolt power-cut test")
	powercutSeed = flag.Uint64("powercut.seed", 0, "seed of the power-cut test (0: from the clock)")
)

// TestPowerCut runs a writer of checkpoints on the store through a file
// system that loses what was not synced (internal/testing/fusecut, with
// internal/testing/powercut's semantics: what was synced, then a prefix of the
// writes after, perhaps torn), kills it with SIGKILL at a random write
// and cuts the power, again and again on the same store. After each cut
// the file passes bbolt's check, and holds every checkpoint whose
// Complete returned (the newest of them, or a newer one), each with its
// chain, whose state reads back as written; ids go on above it. A long
// run: -powercut.cuts=2000.
func TestPowerCut(t *testing.T) {
	if err := fusecut.Available(); err != nil {
		needs.Missing(t, "FUSE", fmt.Sprintf("%v: the test mounts a FUSE file system (/dev/fuse, as root)", err), "CAIRN_REQUIRE_FUSE")
	}
	seed := *powercutSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -powercut.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	backing := t.TempDir()
	path := filepath.Join(backing, "checkpoints.db")
	var acked, kept, lost, torn, unacked int
	var last uint64 // the newest checkpoint whose Complete returned
	for cut := range *powercutCuts {
		mount := t.TempDir()
		f, err := fusecut.Mount(backing, mount)
		if err != nil {
			t.Fatal(err)
		}
		newest, err := writeUntilKilled(t, f, filepath.Join(mount, "checkpoints.db"), 1+rng.IntN(80))
		if err != nil {
			f.Unmount()
			t.Fatalf("cut %d: %v", cut, err)
		}
		if newest > last {
			acked += int(newest - last)
			last = newest
		}
		k, l, tr, err := f.Cut(rng)
		kept, lost = kept+k, lost+l
		if tr {
			torn++
		}
		if err := errors.Join(err, f.Unmount()); err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if err := localrecovery.CheckFile(path); err != nil {
			t.Fatalf("cut %d (seed %d): the file after the cut: %v", cut, seed, err)
		}
		got := checkAfterCut(t, path, last)
		if got > last {
			unacked++ // completed, and cut before it said so
			last = got
		}
	}
	t.Logf("%d cuts: %d checkpoints acknowledged, each there after the cut; %d writes kept and %d undone by the cuts (%d torn); %d times the newest checkpoint was one not yet acknowledged",
		*powercutCuts, acked, kept, lost, torn, unacked)
	if acked == 0 || lost == 0 {
		t.Fatal("no checkpoint was acknowledged, or no cut undid a write: the test proves nothing")
	}
}

// writeUntilKilled runs the writer on the store at path, in f, kills it
// at its writes-th write to the file system (or after 10 s), and returns
// the newest checkpoint it said completed (0: none).
func writeUntilKilled(t *testing.T, f *fusecut.FS, path string, writes int) (uint64, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), storeEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	newest := uint64(0)
	read := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "completed "); ok {
				id, _ := strconv.ParseUint(n, 10, 64)
				newest = max(newest, id)
			}
		}
		read <- sc.Err()
	}()
	kill := func() { cmd.Process.Signal(syscall.SIGKILL) }
	f.Trap(writes, kill)
	timer := time.AfterFunc(10*time.Second, kill) // a writer that writes no more
	defer timer.Stop()
	rerr := <-read
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return 0, fmt.Errorf("the writer ended with %v, not killed:\n%s", err, stderr.String())
	}
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return 0, rerr
	}
	return newest, nil
}

// checkAfterCut opens the store at path after a cut: its newest
// checkpoint is at least last, and every retained one reads back as the
// writer wrote it. It returns the newest.
func checkAfterCut(t *testing.T, path string, last uint64) uint64 {
	t.Helper()
	s, err := localrecovery.Open(path, localrecovery.Options{Retain: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, err := s.Completed()
	if err != nil {
		t.Fatal(err)
	}
	if last > 0 && (len(ms) == 0 || ms[0].ID < last) {
		t.Fatalf("checkpoint %d completed before the cut; after it the store holds %v", last, ids(ms))
	}
	for _, m := range ms {
		for _, a := range m.Subtasks {
			for _, h := range a.Handles() {
				data, err := s.ReadState(h)
				if err != nil {
					t.Fatalf("checkpoint %d: %v", m.ID, err)
				}
				if string(data) != string(writerState(h.Key, int(h.Size))) {
					t.Fatalf("checkpoint %d: %s reads back other bytes", m.ID, h.Key)
				}
			}
		}
	}
	if id, _ := s.LastID(); len(ms) > 0 && id < ms[0].ID {
		t.Fatalf("last id %d below the newest checkpoint %d", id, ms[0].ID)
	}
	if len(ms) == 0 {
		return 0
	}
	return ms[0].ID
}

func ids(ms []*checkpoint.Manifest) []uint64 {
	var out []uint64
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
