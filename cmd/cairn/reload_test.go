package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

const reloadConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
checkpoints:
  interval: 100ms
sources:
  - id: fleet
    simulator: {devices: 20, rate: 1000}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
  - id: avg
    type: window
    inputs: [fleet]
    key_by: key
    window: {kind: tumbling, size: %s}
    aggregate: avg
sinks:
  - id: counts-out
    input: counts
    broker: local
    topic: e2e/counts/{key}
  - id: avg-out
    input: avg
    broker: local
    topic: e2e/avg/{key}
`

// replaceFile writes data to path the way many editors save: a new file
// renamed over the old one.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestReloadKeepsStateAndRejectsInvalidEdits changes the window of one
// operator in the running agent's file: the agent restarts the graph from a
// final checkpoint, and the unrelated count operator carries on counting
// from where it was. Then an invalid edit is rejected with its position
// while the pipeline keeps running.
func TestReloadKeepsStateAndRejectsInvalidEdits(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	port := freePort(t)
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(reloadConfig, data, port, "200ms")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, file)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the agent's log:\n%s", p.Log())
		}
	})
	p.Await(t, regexp.MustCompile(`embedded MQTT broker listening`), 30*time.Second)

	// Collect the counts published after the reload's checkpoint.
	var mu sync.Mutex
	var reloadedAt uint64 // the final checkpoint before the reload, once it completed
	var after []float64
	c := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID("e2e-watcher"))
	if tok := c.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer c.Disconnect(100)
	c.Subscribe("e2e/counts/#", 1, func(_ paho.Client, m paho.Message) {
		var out struct {
			Value float64 `json:"value"`
		}
		if json.Unmarshal(m.Payload(), &out) != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if reloadedAt != 0 { // arrived after the reload's final checkpoint
			after = append(after, out.Value)
		}
	}).Wait()

	for range 5 {
		p.Await(t, completeLine, 30*time.Second)
	}
	replaceFile(t, file, fmt.Sprintf(reloadConfig, data, port, "300ms"))
	var final uint64
	fmt.Sscan(p.Await(t, finalLine, 30*time.Second)[1], &final)
	mu.Lock()
	reloadedAt = final
	mu.Unlock()
	// The final checkpoint, or a periodic one that completed after it
	// while the stop waited for the brokers to acknowledge the output:
	// the coordinator goes on triggering them until the job ends (under
	// qemu for linux/arm, two did now and then).
	var restored uint64
	fmt.Sscan(p.Await(t, restoreLine, 30*time.Second)[1], &restored)
	if restored < final {
		t.Fatalf("after the reload the agent restored checkpoint %d, older than the final one %d", restored, final)
	}
	for range 5 {
		p.Await(t, completeLine, 30*time.Second)
	}
	mu.Lock()
	if len(after) == 0 {
		mu.Unlock()
		t.Fatal("no counts were published after the reload")
	}
	for _, v := range after {
		if v < 2 {
			mu.Unlock()
			t.Fatalf("a count restarted at %v after the reload: the counts operator lost its state", v)
		}
	}
	mu.Unlock()

	// An invalid edit: reported with its position, the pipeline goes on.
	replaceFile(t, file, strings.Replace(fmt.Sprintf(reloadConfig, data, port, "300ms"), "type: count", "type: tally", 1))
	line := p.Await(t, regexp.MustCompile(`pipeline file changed but is invalid.*`), 30*time.Second)[0]
	if !strings.Contains(line, file+`:14:11: operator \"counts\": unknown type \"tally\"`) {
		t.Fatalf("the rejection does not name the position: %s", line)
	}
	p.Await(t, completeLine, 30*time.Second)
	out, err := exec.Command(bin, "status", "--json", "--data-dir", data).Output()
	if err != nil {
		t.Fatal(err)
	}
	var st api.Status
	if json.Unmarshal(out, &st) != nil || st.State != "running" || !strings.Contains(st.ConfigError, "unknown type") {
		t.Fatalf("status after an invalid edit:\n%s", out)
	}
	want := `pipeline file changed but NOT applied (the running pipeline goes on): ` + file + `:14:11: operator "counts": unknown type "tally"`
	if out, err := exec.Command(bin, "status", "--data-dir", data).Output(); err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("cairn status after an invalid edit: %v, want %q:\n%s", err, want, out)
	}
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	if err := p.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

const logLevelConfig = `agent:
  data_dir: %s
  log_level: %s
checkpoints:
  interval: 100ms
sources:
  - id: fleet
    simulator: {devices: 5, rate: 100}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
`

// TestLogLevel runs the agent at log_level warn, where a healthy agent
// says next to nothing (under qemu, that its first checkpoints were late),
// then reloads the file at debug: from then on the runtime's debug lines
// appear, and no line below warn was written before the reload.
func TestLogLevel(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	replaceFile(t, file, fmt.Sprintf(logLevelConfig, data, "warn"))
	p := cairntest.Start(t, nil, bin, "run", "-c", file)

	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "3 checkpoints", 60*time.Second,
		func(st api.Status) bool { return st.Checkpoints.Completed >= 3 })
	reloaded := time.Now()
	replaceFile(t, file, fmt.Sprintf(logLevelConfig, data, "debug"))
	p.Await(t, regexp.MustCompile(`level=DEBUG msg="checkpoint complete"`), 60*time.Second)
	p.Signal(syscall.SIGTERM)
	p.Await(t, finalLine, 30*time.Second)
	line := regexp.MustCompile(`^time=(\S+) level=(\S+) `)
	for l := range strings.Lines(p.Log()) {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("a line without a time and level: %q\n%s", l, p.Log())
		}
		if at, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || at.Before(reloaded) && m[2] != "WARN" && m[2] != "ERROR" {
			t.Fatalf("a line was logged below warn level before the reload at %v:\n%s", reloaded.Format(time.RFC3339Nano), p.Log())
		}
	}
}
