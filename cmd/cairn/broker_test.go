package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/mosquittotest"
)

const brokerDownConfig = `agent:
  data_dir: %s
  metrics: 127.0.0.1:%d
brokers:
  plant:
    url: %s
    client_id: down
sources:
  - id: readings
    broker: plant
    topics: ["down/{device}/t"]
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
    broker: plant
    topic: "down/count/{key}"
`

// TestBrokerAwayAtStartIsSeen starts the agent while its broker is down:
// the first failed connect is logged at WARN at once with the broker's
// name and the reason; status (JSON and human) and metrics say the broker
// is not connected, with the error; once the broker is up, they say it
// is.
func TestBrokerAwayAtStartIsSeen(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	broker.Stop()
	bin := buildCairn(t)
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	metricsPort := freePort(t)
	if err := os.WriteFile(file, fmt.Appendf(nil, brokerDownConfig, data, metricsPort, broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, file)
	p.await(t, regexp.MustCompile(`level=WARN msg="MQTT connect failed; retrying" broker=plant url=`+regexp.QuoteMeta(broker.URL)+` client=down-\S+ failures=1 err=".*refused`), 20*time.Second)
	p.drain()
	socket := filepath.Join(data, "cairn.sock")
	st := awaitStatus(t, socket, "the broker shown down", 20*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].LastError != ""
	})
	if b := st.Brokers[0]; b.ID != "plant" || b.Connected || b.Clients != 2 || b.ConnectedClients != 0 || !strings.Contains(b.LastError, "refused") {
		t.Fatalf("status brokers %+v, want plant with its 2 clients down and the error", st.Brokers)
	}
	out, err := exec.Command(bin, "status", "-c", file).Output()
	if err != nil || !regexp.MustCompile(`(?m)^broker plant: NOT CONNECTED \(0 of 2 clients\) for \d+s; last error \d+s ago: .*refused`).Match(out) {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	metrics := func() string {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := metrics(); !strings.Contains(m, "\ncairn_mqtt_connected{broker=\"plant\"} 0\n") {
		t.Fatalf("metrics while the broker is down:\n%s", m)
	}

	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, socket, "the broker shown connected", 30*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].Connected && st.Brokers[0].ConnectedClients == 2
	})
	if m := metrics(); !strings.Contains(m, "\ncairn_mqtt_connected{broker=\"plant\"} 1\n") {
		t.Fatalf("metrics once the broker is up:\n%s", m)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}
