package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// ingressConfig reads devices' readings from the embedded broker, in two
// subtasks that each take the devices whose topics fall to them, and
// counts them per device into an uplink broker (mosquitto), which
// outlives the agent's kills.
const ingressConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
  uplink:
    url: %s
    client_id: ingress
checkpoints:
  interval: 200ms
sources:
  - id: readings
    broker: local
    topics: ["dev/{device}/r"]
    key: device
    value: seq
    parallelism: 2
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
sinks:
  - {id: out, input: counts, broker: uplink, topic: "ingress/{key}"}
`

// TestDevicePubacksSurviveKill9: devices publish QoS 1 readings to the
// embedded broker, one at a time, each after the PUBACK of the one
// before, while the agent is killed with SIGKILL and restarted in place
// twenty times. A device is a paho client with a persistent session: after
// a kill it reconnects and sends again, marked as duplicates, the
// readings whose PUBACK it did not have. Every reading is then counted
// exactly once: none whose PUBACK a device had is lost, and none sent
// again is counted twice (the source knows a redelivery by its
// publisher's client id, packet id and payload).
func TestDevicePubacksSurviveKill9(t *testing.T) {
	run := startIngressRun(t, t.TempDir())
	p := run.start(t)
	run.awaitConnected(t)
	fleet := run.publish(t)
	const kills = 20
	for k := 1; k <= kills; k++ {
		fleet.awaitAcked(t, k*fleet.total()/(kills+1))
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		p = run.start(t)
	}
	run.check(t, p, fleet)
	t.Logf("%d readings acknowledged to their devices and counted once each, over %d kills", fleet.acked.Load(), kills)
}

// ingressRun is an agent's files for ingressConfig, with its uplink
// broker and a watcher of the counts there.
type ingressRun struct {
	bin, file, data string
	port            int
	outputs         *outputWatcher
}

// startIngressRun writes ingressConfig for a data directory in dataIn,
// and starts the uplink broker and the watcher of the counts.
func startIngressRun(t *testing.T, dataIn string) *ingressRun {
	uplink := mosquittotest.Start(t, t.TempDir(), nil)
	r := &ingressRun{bin: cairntest.Build(t, "cairn"), file: filepath.Join(t.TempDir(), "pipeline.yaml"), data: filepath.Join(dataIn, "data"), port: freePort(t)}
	if err := os.WriteFile(r.file, fmt.Appendf(nil, ingressConfig, r.data, r.port, uplink.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	r.outputs = watchOutputs(t, paho.NewClientOptions().AddBroker(uplink.URL).SetClientID("watch"), "ingress/#")
	return r
}

// start starts the agent and waits until its pipeline runs: a SIGTERM
// before it handles signals would end it at once.
func (r *ingressRun) start(t *testing.T) *cairntest.Proc {
	t.Helper()
	p := startAgent(t, r.bin, r.file)
	p.Await(t, regexp.MustCompile(`msg="pipeline running"`), 30*time.Second)
	return p
}

// awaitConnected waits until the agent's clients are connected to both
// brokers.
func (r *ingressRun) awaitConnected(t *testing.T) {
	cairntest.AwaitStatus(t, filepath.Join(r.data, "cairn.sock"), "connected to both brokers", 30*time.Second, func(st api.Status) bool {
		n := 0
		for _, b := range st.Brokers {
			if b.Connected {
				n++
			}
		}
		return n == 2
	})
}

// fleet is devices publishing readings, each to its own topic, one at a
// time, each after the PUBACK of the one before.
type fleet struct {
	devices, readings int
	acked             atomic.Int64 // PUBACKs the devices received
	done              chan struct{}
}

func (f *fleet) total() int { return f.devices * f.readings }

// publish connects the fleet's devices to the embedded broker, as paho
// clients with persistent sessions that reconnect whenever they lose
// their connection, and starts them publishing.
func (r *ingressRun) publish(t *testing.T) *fleet {
	f := &fleet{devices: 4, readings: 500, done: make(chan struct{})}
	var publishing sync.WaitGroup
	for d := range f.devices {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", r.port)).SetClientID(fmt.Sprint("dev-", d)).
			SetStore(pubackStore{paho.NewMemoryStore(), &f.acked}).SetCleanSession(false).
			SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(50 * time.Millisecond).
			SetMaxReconnectInterval(100 * time.Millisecond).SetConnectTimeout(2 * time.Second))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("device %d: %v", d, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		publishing.Add(1)
		go func() {
			defer publishing.Done()
			for seq := 1; seq <= f.readings; seq++ {
				// A publish under way when the agent goes, or made while
				// the device reconnects, is sent again from paho's store
				// under a token of paho's own, which completes this one
				// at once or never: the store counts the PUBACKs.
				c.Publish(fmt.Sprintf("dev/dev-%d/r", d), 1, false, fmt.Sprintf(`{"seq":%d}`, seq)).WaitTimeout(5 * time.Second)
			}
		}()
	}
	go func() {
		publishing.Wait()
		close(f.done)
	}()
	return f
}

// awaitAcked waits until the devices received n PUBACKs.
func (f *fleet) awaitAcked(t *testing.T, n int) {
	t.Helper()
	testwait.For(t, time.Minute, fmt.Sprint(n, " PUBACKs"), func() bool { return f.acked.Load() >= int64(n) })
}

// check waits until every reading of f is acknowledged to its device and
// counted once by the agent p, then stops p with SIGTERM.
func (r *ingressRun) check(t *testing.T, p *cairntest.Proc, f *fleet) {
	t.Helper()
	testwait.Recv(t, f.done, 5*time.Minute, "the devices to have published all their readings")
	f.awaitAcked(t, f.total())
	want := make(map[string]int)
	for d := range f.devices {
		want[fmt.Sprint("dev-", d)] = f.readings
	}
	r.outputs.awaitCounts(t, 2*time.Minute, want, nil)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.Log())
	}
	if n := f.acked.Load(); n != int64(f.total()) {
		t.Fatalf("%d PUBACKs for %d readings", n, f.total())
	}
}

// pubackStore is paho's store for a client that subscribes to nothing,
// counting the PUBACKs the client receives: paho deletes a publish from
// its store once its PUBACK comes, and only then.
type pubackStore struct {
	paho.Store
	acks *atomic.Int64
}

func (s pubackStore) Del(key string) {
	if strings.HasPrefix(key, "o.") && s.Store.Get(key) != nil {
		s.acks.Add(1)
	}
	s.Store.Del(key)
}
