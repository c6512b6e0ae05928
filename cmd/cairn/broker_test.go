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
	paho "github.com/eclipse/paho.mqtt.golang"
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

// TestEmbeddedBrokerUsers runs an agent whose embedded broker listens on
// every interface and lets in one user: that user's readings are counted;
// an anonymous client, a wrong password and a client claiming the agent's
// own client id are refused, and the agent's clients are not disturbed.
func TestEmbeddedBrokerUsers(t *testing.T) {
	bin := buildCairn(t)
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
	p := startAgent(t, bin, file)
	p.drain()
	socket := filepath.Join(data, "cairn.sock")
	awaitStatus(t, socket, "connected to its own broker", 30*time.Second, func(st api.Status) bool {
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
	awaitStatus(t, socket, "the user's readings counted", 30*time.Second, func(st api.Status) bool {
		dev.Publish("u/d1/t", 1, false, `{"v":1}`).Wait()
		return st.RecordsOut("readings") > 0 && st.Brokers[0].Connected
	})
}
