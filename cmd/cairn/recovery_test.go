package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const recoveryConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
checkpoints:
  interval: 100ms
sources:
  - id: fleet
    simulator: {devices: 20, rate: 500}
operators:
  - id: avg
    type: window
    inputs: [fleet]
    key_by: key
    parallelism: 2
    window: {kind: tumbling, size: 200ms}
    aggregate: avg
sinks:
  - id: out
    input: avg
    broker: local
    topic: recovery/{key}
`

// runUntilCheckpoints starts an agent on config, waits for n checkpoints
// to complete and stops it with SIGTERM; it returns the final
// checkpoint's id.
func runUntilCheckpoints(t *testing.T, bin, config string, n int, args ...string) uint64 {
	t.Helper()
	p := startAgent(t, bin, config, args...)
	for range n {
		p.await(t, completeLine, 30*time.Second)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	id, _ := strconv.ParseUint(p.await(t, finalLine, 30*time.Second)[1], 10, 64)
	p.drain()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.log)
	}
	return id
}

// TestLostStoreIsNotSilent deletes a stopped agent's checkpoint store: the
// next start refuses, naming the ids that were taken and the flag; with
// --accept-state-loss it starts empty, and its ids go on above the old
// ones (I6), as they do after the store is truncated to half, when an
// older checkpoint restores.
func TestLostStoreIsNotSilent(t *testing.T) {
	bin := buildCairn(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	config := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(recoveryConfig, data, freePort(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	taken := runUntilCheckpoints(t, bin, config, 3)

	if err := os.RemoveAll(filepath.Join(data, "checkpoints")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-c", config).CombinedOutput()
	want := fmt.Sprintf("checkpoints up to id %d were taken on this data directory", taken)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "--accept-state-loss") {
		t.Fatalf("start without the store: %v, want exit status 1 saying %q and naming the flag:\n%s", err, want, out)
	}

	p := startAgent(t, bin, config, "--accept-state-loss")
	p.await(t, regexp.MustCompile(`msg="accepting lost state: starting with empty state"`), 30*time.Second)
	if id, _ := strconv.ParseUint(p.await(t, completeLine, 30*time.Second)[1], 10, 64); id <= taken {
		t.Fatalf("first checkpoint after the loss is %d, not above the %d taken before", id, taken)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	taken, _ = strconv.ParseUint(p.await(t, finalLine, 30*time.Second)[1], 10, 64)
	p.drain()
	p.cmd.Wait()
	taken = max(taken, runUntilCheckpoints(t, bin, config, 5))

	// Truncated to half: the newest checkpoints are gone, an older one
	// restores, and no id is taken twice.
	segs, err := filepath.Glob(filepath.Join(data, "checkpoints", "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment files: %v", err)
	}
	last := segs[len(segs)-1]
	fi, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	p = startAgent(t, bin, config)
	restored, _ := strconv.ParseUint(p.await(t, restoreLine, 30*time.Second)[1], 10, 64)
	next, _ := strconv.ParseUint(p.await(t, completeLine, 30*time.Second)[1], 10, 64)
	if restored >= taken || next <= taken {
		t.Fatalf("after truncation: restored %d, next checkpoint %d; want an older one than %d, and ids above it", restored, next, taken)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.await(t, finalLine, 30*time.Second)
	p.drain()
	p.cmd.Wait()
}
