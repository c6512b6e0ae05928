package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/procfs"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

const idleConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
checkpoints:
  interval: 100ms
  incremental: true
sources:
  - id: readings
    broker: local
    topics: ["e2e/{device}/t"]
    key: device
    value: v
operators:
  - id: total
    type: sum
    inputs: [readings]
    key_by: key
    parallelism: 2
`

// TestIdleAgentWritesNothing runs the real binary: once its input stops
// and a checkpoint holds what it read, its checkpoints go on completing,
// each the same as that one, and the agent writes nothing, by its own
// count or the kernel's.
func TestIdleAgentWritesNothing(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, port := filepath.Join(dir, "data"), freePort(t)
	config := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(idleConfig, data, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, bin, config)
	agent.Await(t, regexp.MustCompile(`msg="pipeline running"`), 30*time.Second)
	feed(t, bin, data, port, 100)
	socket := filepath.Join(data, "cairn.sock")
	// The readings are read: a checkpoint begun from now on holds them (one
	// may be under way, begun before).
	var fed uint64
	if c := remoteStatus(t, bin, data).Checkpoints.LastCompleted; c != nil {
		fed = c.ID
	}
	st := cairntest.AwaitStatus(t, socket, "a checkpoint that changed nothing", 30*time.Second, func(st api.Status) bool {
		c := st.Checkpoints.LastCompleted
		return st.IngestLag == 0 && c != nil && c.ID >= fed+2 && c.SameAs != 0
	})
	kernel, err := procfs.WriteBytes(agent.Pid())
	if err != nil {
		t.Fatal(err)
	}
	idle := cairntest.AwaitStatus(t, socket, "ten more checkpoints", 30*time.Second, func(s api.Status) bool {
		return s.Checkpoints.Completed >= st.Checkpoints.Completed+10
	})
	kernelIdle, err := procfs.WriteBytes(agent.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if last := idle.Checkpoints.LastCompleted; last.SameAs != st.Checkpoints.LastCompleted.SameAs || last.ID <= st.Checkpoints.LastCompleted.ID {
		t.Fatalf("checkpoint %+v after %+v: want a later one, the same as the same one", last, st.Checkpoints.LastCompleted)
	}
	if idle.Disk.WrittenBytes != st.Disk.WrittenBytes || idle.Disk.Syncs != st.Disk.Syncs || kernelIdle != kernel {
		t.Fatalf("over %d idle checkpoints the agent wrote %d bytes and synced %d times by its count, wrote %d bytes by the kernel's",
			idle.Checkpoints.Completed-st.Checkpoints.Completed, idle.Disk.WrittenBytes-st.Disk.WrittenBytes, idle.Disk.Syncs-st.Disk.Syncs, kernelIdle-kernel)
	}
}
