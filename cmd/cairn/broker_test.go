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

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
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
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	metricsPort := freePort(t)
	if err := os.WriteFile(file, fmt.Appendf(nil, brokerDownConfig, data, metricsPort, broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, file)
	p.Await(t, regexp.MustCompile(`level=WARN msg="MQTT connect failed; retrying" broker=plant url=`+regexp.QuoteMeta(broker.URL)+` client=down-\S+ failures=1 err=".*refused`), 20*time.Second)
	socket := filepath.Join(data, "cairn.sock")
	// Both clients (source and sink) tried: the sink's may start after
	// the source's first failure.
	st := cairntest.AwaitStatus(t, socket, "the broker shown down", 20*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].LastError != "" && st.Brokers[0].Clients == 2
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
	cairntest.AwaitStatus(t, socket, "the broker shown connected", 30*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].Connected && st.Brokers[0].ConnectedClients == 2
	})
	if m := metrics(); !strings.Contains(m, "\ncairn_mqtt_connected{broker=\"plant\"} 1\n") {
		t.Fatalf("metrics once the broker is up:\n%s", m)
	}
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}

// TestEmbeddedBrokerUsers runs an agent whose embedded broker listens on
// every interface and lets in one user: that user's readings are counted;
// an anonymous client, a wrong password and a client claiming the agent's
// own client id are refused, and the agent's clients are not disturbed.
func TestEmbeddedBrokerUsers(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file, pwFile := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "dev.pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	config := fmt.Sprintf("agent:\n  data_dir: %s\nbrokers:\n  local:\n    embedded: true\n    listen: 0.0.0.0:%d\n    client_id: gw\n"+
		"    users:\n      - {username: dev, password_file: dev.pw}\n"+
		"sources:\n  - id: readings\n    broker: local\n    topics: [\"u/{device}/t\"]\n    key: device\n    value: v\n"+
		"operators:\n  - id: counts\n    type: count\n    inputs: [readings]\n    key_by: key\n", data, port)
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	startAgent(t, bin, file)
	socket := filepath.Join(data, "cairn.sock")
	cairntest.AwaitStatus(t, socket, "connected to its own broker", 30*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].Connected
	})
	url := fmt.Sprintf("tcp://127.0.0.1:%d", port)
	connect := func(id, user, password string) (paho.Client, error) {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(id).SetUsername(user).SetPassword(password).SetAutoReconnect(false))
		tok := c.Connect()
		if !tok.WaitTimeout(10 * time.Second) {
			t.Fatalf("%s: no answer", id)
		}
		return c, tok.Error()
	}
	for _, c := range []struct{ id, user, password string }{
		{"anonymous", "", ""}, {"guesser", "dev", "guess"}, {"gw-readings-0", "dev", "s3cret"},
	} {
		if cl, err := connect(c.id, c.user, c.password); err == nil {
			cl.Disconnect(0)
			t.Fatalf("client %s as %q/%q let in", c.id, c.user, c.password)
		}
	}
	dev, err := connect("dev-1", "dev", "s3cret")
	if err != nil {
		t.Fatalf("the user: %v", err)
	}
	defer dev.Disconnect(0)
	cairntest.AwaitStatus(t, socket, "the user's readings counted", 30*time.Second, func(st api.Status) bool {
		dev.Publish("u/d1/t", 1, false, `{"v":1}`).Wait()
		return st.RecordsOut("readings") > 0 && st.Brokers[0].Connected
	})
}

const parallelRestartConfig = `agent:
  data_dir: %s
brokers:
  plant:
    url: %s
    client_id: restart
checkpoints:
  interval: 100ms
sources:
  - id: readings
    broker: plant
    topics: ["restart/{device}/t"]
    parallelism: 2
    key: device
    value: seq
sinks:
  - id: out
    input: readings
    broker: plant
    topic: "restart/out/{key}"
`

// TestParallelSourceAcrossBrokerRestart runs a source of parallelism 2
// whose broker, a mosquitto with persistence, restarts; readings are
// published before, while the agent is cut off from the restarted broker
// (a gate holds its connections), and after. The sink's output, after
// dropping repeated ids, is every reading once, each device's in the
// order published.
func TestParallelSourceAcrossBrokerRestart(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	gate := mosquittotest.NewGate(t, broker.URL)
	bin := cairntest.Build(t, "cairn")
	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(broker.URL).SetClientID("restart-watcher").
		SetCleanSession(false).SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(100*time.Millisecond).
		SetMaxReconnectInterval(200*time.Millisecond), "restart/out/#")
	// The sessions a run before this one would have left: the agent's
	// input from the first reading on.
	for i := range 2 {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID(fmt.Sprintf("restart-readings-%d", i)).SetCleanSession(false))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		if tok := c.Subscribe("restart/+/t", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		c.Disconnect(100)
	}
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	replaceFile(t, file, fmt.Sprintf(parallelRestartConfig, data, gate.URL))
	p := startAgent(t, bin, file)

	const devices, perPhase = 10, 200
	seq := map[string]int{}
	publish := func() {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("restart-publisher"))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
		defer c.Disconnect(100)
		for i := range perPhase {
			dev := fmt.Sprintf("d%d", i%devices)
			if tok := c.Publish("restart/"+dev+"/t", 1, false, fmt.Sprintf(`{"seq":%d}`, seq[dev])); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatal(tok.Error())
			}
			seq[dev]++
		}
	}
	all := func(values map[string][]float64) bool {
		for dev, n := range seq {
			if len(values[dev]) < n {
				return false
			}
		}
		return true
	}
	publish()
	outputs.await(t, time.Minute, "the readings before the restart", all)
	publish() // perhaps in flight at the restart
	gate.Shut()
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	publish() // the agent cut off
	gate.Open()
	publish()
	outputs.await(t, time.Minute, "every reading", all)
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
	outputs.read(func(values map[string][]float64) {
		for dev, n := range seq {
			vs := values[dev]
			for i, v := range vs {
				if v != float64(i) || len(vs) != n {
					t.Fatalf("device %s: %d readings out, %v, want 0..%d in order", dev, len(vs), vs, n-1)
				}
			}
		}
	})
}
