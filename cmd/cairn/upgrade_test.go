package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
)

// upgradeConfig is the pipeline that wrote testdata/upgrade: counts per
// device of readings from mosquitto, checkpoints only when asked.
const upgradeConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: upgrade
checkpoints:
  interval: 1h
sources:
  - id: readings
    broker: local
    topics: ["upgrade/{device}/t"]
    key: device
    value: seq
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: "upgrade/count/{key}"
`

// TestUpgradeKeepsTheIngestLog starts this cairn on a data directory that
// the cairn before the segmented ingest log left when it was killed
// (testdata/upgrade, written by 03e3c0f): 150 readings over 5 devices in
// its bbolt ingest log (ingest.db), and checkpoint 1, taken after the
// first 100. The agent moves the log into segment files, restores the
// checkpoint and replays the 50 readings after it from the moved log: a
// subscriber sees each device's count go 1..30 without a gap or a repeat,
// and on to 31 with one more reading each.
func TestUpgradeKeepsTheIngestLog(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"checkpoints.db", "ingest.db"} {
		b, err := os.ReadFile(filepath.Join("testdata", "upgrade", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, fmt.Appendf(nil, upgradeConfig, data, broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}

	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(broker.URL).SetClientID("upgrade-watcher"), "upgrade/count/#")

	p := startAgent(t, bin, file)
	p.Await(t, regexp.MustCompile(`msg="ingest log moved to segment files`), 30*time.Second)
	if m := p.Await(t, restoreLine, 30*time.Second); m[1] != "1" {
		t.Fatalf("restored checkpoint %s, want 1", m[1])
	}
	if _, err := os.Stat(filepath.Join(data, "ingest.db")); !os.IsNotExist(err) {
		t.Fatalf("ingest.db is still there after the move: %v", err)
	}
	socket := filepath.Join(data, "cairn.sock")
	cairntest.AwaitStatus(t, socket, "the 50 readings after the checkpoint replayed", time.Minute,
		func(st api.Status) bool { return st.RecordsOut("readings") == 50 && st.IngestLag == 0 })

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("upgrade-feeder"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("feeder: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	cairntest.AwaitStatus(t, socket, "the source's subscription", time.Minute, func(st api.Status) bool {
		// A reading of a sixth device until one gets through: the source
		// subscribes once connected.
		pub.Publish("upgrade/probe/t", 1, false, `{"seq":0}`)
		return st.RecordsOut("readings") > 50
	})
	for i := 150; i < 155; i++ {
		if tok := pub.Publish(fmt.Sprintf("upgrade/d%d/t", i%5), 1, false, fmt.Sprintf(`{"seq":%d}`, i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	// The sink publishes what a checkpoint holds once it completes: take
	// one until the new readings are in one.
	outputs.awaitCounts(t, time.Minute, map[string]int{"d0": 31, "d1": 31, "d2": 31, "d3": 31, "d4": 31}, func() {
		if out, err := exec.Command(bin, "checkpoint", "-c", file).CombinedOutput(); err != nil {
			t.Fatalf("cairn checkpoint: %v\n%s", err, out)
		}
	})
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}
