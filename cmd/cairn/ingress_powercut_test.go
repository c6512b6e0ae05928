//go:build linux && (amd64 || arm64)

package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/fusecut"
	"github.com/cairn-edge/cairn/internal/testing/needs"
)

// TestDevicePubacksSurvivePowerCuts is TestDevicePubacksSurviveKill9 with
// the agent's data directory on a file system that loses what was not
// synced (internal/testing/fusecut): twenty times, the agent is killed
// at a random write to it and the power is cut, which undoes a random
// part of each file's writes since its last sync, perhaps tearing the
// last; then the agent starts again on what is left. Every reading is
// still counted exactly once: a PUBACK went out only for what a sync had
// made durable.
func TestDevicePubacksSurvivePowerCuts(t *testing.T) {
	if err := fusecut.Available(); err != nil {
		needs.Missing(t, "FUSE", fmt.Sprintf("%v: the test mounts a FUSE file system (/dev/fuse, as root)", err), "CAIRN_REQUIRE_FUSE")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	backing, mount := t.TempDir(), t.TempDir()
	run := startIngressRun(t, mount)
	mounted := func() *fusecut.FS {
		f, err := fusecut.Mount(backing, mount)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := mounted()
	p := run.start(t)
	run.awaitConnected(t)
	fleet := run.publish(t)
	const cuts = 20
	var kept, lost, torn int
	for c := 1; c <= cuts; c++ {
		fleet.awaitAcked(t, c*fleet.total()/(cuts+1))
		f.Trap(1+rng.IntN(20), func() { p.Signal(syscall.SIGKILL) })
		trapped := true
		select {
		case <-p.Ended():
		case <-time.After(10 * time.Second): // an agent that writes no more
			trapped = false
			p.Signal(syscall.SIGKILL)
		}
		t.Logf("cut %d at %d PUBACKs, killed at a write %v", c, fleet.acked.Load(), trapped)
		var ee *exec.ExitError
		if err := p.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("cut %d: the agent ended with %v, not killed:\n%s", c, err, p.Log())
		}
		k, l, tr, err := f.Cut(rng)
		if err := errors.Join(err, f.Unmount()); err != nil {
			t.Fatalf("cut %d: %v", c, err)
		}
		kept, lost = kept+k, lost+l
		if tr {
			torn++
		}
		f = mounted()
		p = run.start(t)
	}
	run.check(t, p, fleet)
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d readings acknowledged to their devices and counted once each, over %d power cuts: %d writes kept and %d undone by the cuts (%d torn)",
		fleet.acked.Load(), cuts, kept, lost, torn)
	if lost == 0 {
		t.Fatal("no cut undid a write: the test proves nothing")
	}
}
