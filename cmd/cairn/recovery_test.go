package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/boltcheck"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/mqttio"
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
		p.Await(t, completeLine, 30*time.Second)
	}
	p.Signal(syscall.SIGTERM)
	id, _ := strconv.ParseUint(p.Await(t, finalLine, 30*time.Second)[1], 10, 64)
	if err := p.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.Log())
	}
	return id
}

// TestLostStoreIsNotSilent deletes a stopped agent's checkpoint store: the
// next start refuses, naming the ids that were taken and the flag; with
// --accept-state-loss it starts empty, and its ids go on above the old
// ones (I6). A store truncated to half is set aside as damaged, and what
// of it verifies restores, or, where nothing does, the start refuses
// naming the flag; never empty, and no id is taken twice. Each start
// finds a file that bbolt's check finds whole, but the damaged one.
func TestLostStoreIsNotSilent(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	config := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(recoveryConfig, data, freePort(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	taken := runUntilCheckpoints(t, bin, config, 3)

	store := filepath.Join(data, "checkpoints.db")
	if err := boltcheck.Check(store); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(store); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "run", "-c", config).CombinedOutput()
	want := fmt.Sprintf("checkpoints up to id %d were taken on this data directory", taken)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "--accept-state-loss") {
		t.Fatalf("start without the store: %v, want exit status 1 saying %q and naming the flag:\n%s", err, want, out)
	}

	p := startAgent(t, bin, config, "--accept-state-loss")
	p.Await(t, regexp.MustCompile(`msg="accepting lost state: starting with empty state"`), 30*time.Second)
	if id, _ := strconv.ParseUint(p.Await(t, completeLine, 30*time.Second)[1], 10, 64); id <= taken {
		t.Fatalf("first checkpoint after the loss is %d, not above the %d taken before", id, taken)
	}
	p.Signal(syscall.SIGTERM)
	taken, _ = strconv.ParseUint(p.Await(t, finalLine, 30*time.Second)[1], 10, 64)
	p.Wait()
	taken = max(taken, runUntilCheckpoints(t, bin, config, 5))

	// Truncated to half: the file is damaged; an older checkpoint
	// restores, or the start refuses; no id is taken twice.
	if err := boltcheck.Check(store); err != nil {
		t.Fatal(err)
	}
	if err := boltcheck.CutToHalf(store); err != nil {
		t.Fatal(err)
	}
	// Listing the stopped agent's checkpoints says the store is damaged,
	// and changes nothing.
	before, _ := os.ReadFile(store)
	var stderr strings.Builder
	cmd := exec.Command(bin, "checkpoints", "--data-dir", data)
	cmd.Stderr = &stderr
	if listed, _ := cmd.Output(); !strings.Contains(stderr.String(), "the checkpoint store is damaged") {
		t.Fatalf("cairn checkpoints on a truncated store:\n%s%s", listed, stderr.String())
	}
	if after, _ := os.ReadFile(store); string(after) != string(before) {
		t.Fatal("cairn checkpoints changed the store's file")
	}
	p = startAgent(t, bin, config)
	p.Await(t, regexp.MustCompile(`msg="checkpoint store is damaged; it is set aside`), 30*time.Second)
	outcome := p.Await(t, regexp.MustCompile(`msg="restoring checkpoint" id=(\d+)|checkpoints up to id (\d+) were taken on this data directory`), 30*time.Second)
	if _, err := os.Stat(store + ".damaged-1"); err != nil {
		t.Fatalf("the damaged file is not kept aside: %v", err)
	}
	if outcome[2] != "" { // nothing of the file verified
		if n, _ := strconv.ParseUint(outcome[2], 10, 64); n != taken || !strings.Contains(p.Log(), "--accept-state-loss") {
			t.Fatalf("a start on a truncated store refused without naming the %d ids taken and the flag:\n%s", taken, p.Log())
		}
		if err := p.Wait(); err == nil {
			t.Fatal("the refused start exited 0")
		}
		t.Log("nothing of the truncated store verified: the start refused, naming the flag")
		return
	}
	restored, _ := strconv.ParseUint(outcome[1], 10, 64)
	next, _ := strconv.ParseUint(p.Await(t, completeLine, 30*time.Second)[1], 10, 64)
	if restored >= taken || next <= taken {
		t.Fatalf("after truncation: restored %d, next checkpoint %d; want an older one than %d, and ids above it", restored, next, taken)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	p.Wait()
}

const fallbackConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: fb
checkpoints:
  interval: 1h
sources:
  - id: readings
    broker: local
    topics: ["fb/{device}/t"]
    key: device
    value: v
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: fb/out/{key}
  - id: tally
    input: counts
    broker: local
    topic: fb/tally/{key}
`

// TestFallbackRepublishesUnderTheSameIDs: the newest checkpoint of the
// store is damaged (a flipped bit), the agent falls back to an older one
// and replays the ingest log from there; the outputs it publishes again
// carry exactly the ids they had the first time, so a consumer that drops
// repeated ids sees each once (issue 17, case 3); a second sink of the
// same records publishes them under ids of its own (case 4). Then its
// ingest log is deleted: the start refuses, and starts when told to.
func TestFallbackRepublishesUnderTheSameIDs(t *testing.T) {
	r := newBrokerRun(t, "fb", fallbackConfig)
	bin, data, config := r.bin, r.data, r.file
	out := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("fb-out"), "fb/out/#")
	tally := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("fb-tally"), "fb/tally/#")
	p := r.start(t)
	r.awaitSubscribed(t, "readings", "fb/+/t")
	pub := r.pub
	// The input spreads over checkpoints, taken when asked for, each once
	// the source read every reading published (the records it read are
	// the readings alone: awaitSubscribed publishes nothing); the last
	// readings only the final checkpoint of the stop holds, so that the
	// one before it, to which the restart falls back, does not.
	const readings, checkpointed = 604, 600
	for i := range readings {
		if tok := pub.Publish(fmt.Sprintf("fb/d%d/t", i%4), 1, false, fmt.Sprintf(`{"v": %d}`, i)); tok.Wait() && tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		if i%100 == 99 && i < checkpointed {
			cairntest.AwaitStatus(t, r.socket, "the readings read", 30*time.Second, func(st api.Status) bool { return st.RecordsOut("readings") == int64(i+1) })
			if out, err := exec.Command(bin, "checkpoint", "-c", config).CombinedOutput(); err != nil {
				t.Fatalf("cairn checkpoint: %v\n%s", err, out)
			}
		}
	}
	cairntest.AwaitStatus(t, r.socket, "every reading read", 30*time.Second, func(st api.Status) bool { return st.RecordsOut("readings") == readings })
	p.Signal(syscall.SIGTERM)
	final, _ := strconv.ParseUint(p.Await(t, finalLine, 30*time.Second)[1], 10, 64)
	if err := p.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	// A stop publishes what its final checkpoint holds before it exits.
	first := out.awaitAll(t, 30*time.Second, "every reading's count", func(m []mqttio.Output) bool {
		return slices.ContainsFunc(m, func(o mqttio.Output) bool { return o.Key == "d3" && o.Value == readings/4 })
	})
	byID := make(map[string]mqttio.Output)
	for _, o := range first {
		if prev, ok := byID[o.ID]; ok && prev != o {
			t.Fatalf("id %s came as %+v and as %+v", o.ID, prev, o)
		}
		byID[o.ID] = o
	}
	// Two sinks of the same records: the same outputs, and no id in common.
	tallied := tally.awaitAll(t, 30*time.Second, "the second sink's outputs", func(m []mqttio.Output) bool { return len(m) >= len(first) })
	for _, o := range tallied {
		if _, ok := byID[o.ID]; ok {
			t.Fatalf("sinks out and tally both published id %s", o.ID)
		}
	}

	// Damage the newest checkpoint: the restore falls back to the one
	// before.
	store := filepath.Join(data, "checkpoints.db")
	if err := boltcheck.Check(store); err != nil {
		t.Fatal(err)
	}
	if err := boltcheck.FlipNewest(store); err != nil {
		t.Fatal(err)
	}
	p = r.start(t)
	restored, _ := strconv.ParseUint(p.Await(t, restoreLine, 30*time.Second)[1], 10, 64)
	if restored >= final {
		t.Fatalf("restored %d, not older than the final %d", restored, final)
	}
	// The replay, of the readings after the checkpoint restored, publishes
	// again at its first checkpoint, up to the last count of the first run.
	cairntest.AwaitStatus(t, r.socket, "the replay read", 30*time.Second, func(st api.Status) bool { return st.RecordsOut("readings") == readings-checkpointed })
	if out, err := exec.Command(bin, "checkpoint", "-c", config).CombinedOutput(); err != nil {
		t.Fatalf("cairn checkpoint: %v\n%s", err, out)
	}
	last := first[len(first)-1]
	again := out.awaitAll(t, 60*time.Second, "the replay to reach the last output", func(m []mqttio.Output) bool {
		return slices.ContainsFunc(m[len(first):], func(o mqttio.Output) bool { return o.Key == last.Key && o.Value == last.Value })
	})[len(first):]
	for _, o := range again {
		if was, ok := byID[o.ID]; !ok || was != o {
			t.Fatalf("after falling back from %d to %d, %+v was published; the first time its id had %+v (found %v)", final, restored, o, was, ok)
		}
	}
	t.Logf("fell back from checkpoint %d to %d; %d outputs published again under their first ids", final, restored, len(again))
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	p.Wait()

	// The ingest log deleted: the messages acknowledged after the last
	// checkpoint went with it, and the start says so.
	if err := os.RemoveAll(filepath.Join(data, "ingest", "log-readings%2F0")); err != nil {
		t.Fatal(err)
	}
	out2, err := exec.Command(bin, "run", "-c", config).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out2), "ingest log readings/0 is empty, but the checkpoint restored had read it") {
		t.Fatalf("start without the ingest log: %v, want exit status 1 naming the log:\n%s", err, out2)
	}
	p = startAgent(t, bin, config, "--accept-state-loss")
	p.Await(t, regexp.MustCompile(`msg="accepting lost state"`), 30*time.Second)
	cairntest.AwaitStatus(t, r.socket, "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	if out, err := exec.Command(bin, "checkpoint", "-c", config).CombinedOutput(); err != nil {
		t.Fatalf("cairn checkpoint after accepting the loss: %v\n%s", err, out)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	if err := p.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}
