package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

const stopConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: stop
checkpoints:
  interval: 100ms
sources:
  - {id: readings, broker: local, topics: ["stop/{device}/t"], key: device}
operators:
  - {id: counts, type: count, inputs: [readings], key_by: key}
sinks:
  - {id: out, input: counts, broker: local, topic: "stop/out/{key}"}
`

var (
	savepointStartLine = regexp.MustCompile(`msg="starting from a savepoint" path=\S+ checkpoint=(\d+)`)
	ignoredLine        = regexp.MustCompile(`msg="ignoring --from-savepoint: the savepoint was restored before, and a checkpoint completed since; restoring that" path=\S+ savepoint=(\d+) checkpoint=(\d+)`)
)

// TestStopWithSavepointThenRestoreItOnce: `cairn stop --savepoint NAME`
// holds the sources, writes the savepoint NAME in the data directory's
// savepoints, publishes what it holds and ends the agent with status 0;
// a start with --from-savepoint FILE
// restores it; killed with -9 once a checkpoint completed and started
// again with the flag still given (as a unit would), the agent restores
// that checkpoint, not the savepoint, and says so; killed before one
// completed, it restores the savepoint again. Every reading is counted
// once throughout.
func TestStopWithSavepointThenRestoreItOnce(t *testing.T) {
	r := newBrokerRun(t, "stop", stopConfig)
	counts := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("stop-watcher"), "stop/out/#")
	feed := func(from, to int) {
		for i := from; i < to; i++ {
			if tok := r.pub.Publish(fmt.Sprintf("stop/d%d/t", i%4), 1, false, `{}`); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}
	want := func(n int) map[string]int { return map[string]int{"d0": n, "d1": n, "d2": n, "d3": n} }
	first := startAgent(t, r.bin, r.file)
	cairntest.AwaitStatus(t, r.socket, "the source's subscription", time.Minute, func(st api.Status) bool {
		r.pub.Publish("stop/probe/t", 1, false, `not json`) // a dead letter, so counts are the readings'
		return st.DeadLetters > 0
	})
	feed(0, 100)
	cairntest.AwaitStatus(t, r.socket, "the readings read", time.Minute, func(st api.Status) bool { return st.RecordsOut("readings") == 100 })

	file := filepath.Join(r.data, "savepoints", "before-upgrade.cairn")
	out, err := exec.Command(r.bin, "stop", "--savepoint", "before-upgrade.cairn", "-c", r.file).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != file {
		t.Fatalf("cairn stop --savepoint: %v\n%s", err, out)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the agent stopped with %v, want status 0", err)
	}
	counts.awaitCounts(t, 10*time.Second, want(25), nil) // published before it exited
	sp, _ := strconv.ParseUint(regexp.MustCompile(`savepoint written" id=(\d+)`).FindStringSubmatch(first.Log())[1], 10, 64)

	second := startAgent(t, r.bin, r.file, "--from-savepoint", file)
	if got := second.Await(t, savepointStartLine, time.Minute)[1]; got != fmt.Sprint(sp) {
		t.Fatalf("started from savepoint %s, want %d", got, sp)
	}
	second.Await(t, restoreLine, time.Minute)
	feed(100, 200)
	counts.awaitCounts(t, time.Minute, want(50), nil)
	second.Await(t, completeLine, time.Minute)
	if err := second.Kill(); err != nil {
		t.Fatal(err)
	}

	third := startAgent(t, r.bin, r.file, "--from-savepoint", file)
	ignored := third.Await(t, ignoredLine, time.Minute)
	restored, _ := strconv.ParseUint(third.Await(t, restoreLine, time.Minute)[1], 10, 64)
	if ignored[1] != fmt.Sprint(sp) || restored <= sp || ignored[2] != fmt.Sprint(restored) {
		t.Fatalf("ignored savepoint %s for checkpoint %s, restored %d; want the savepoint %d ignored for the checkpoint restored", ignored[1], ignored[2], restored, sp)
	}
	feed(200, 300)
	counts.awaitCounts(t, time.Minute, want(75), nil)
	if err := third.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}

	// On another data directory, killed before any checkpoint completed
	// (none is taken unless asked), the flag restores the savepoint again.
	dir := t.TempDir()
	never := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(never, fmt.Appendf(nil, strings.Replace(stopConfig, "interval: 100ms", "interval: 1h", 1), filepath.Join(dir, "data"), r.broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		p := startAgent(t, r.bin, never, "--from-savepoint", file)
		p.Await(t, savepointStartLine, time.Minute)
		if got := p.Await(t, restoreLine, time.Minute)[1]; got != fmt.Sprint(sp) {
			t.Fatalf("restored %s, want the savepoint's %d again", got, sp)
		}
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
	}
}
