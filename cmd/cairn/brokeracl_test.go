package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
)

// aclConfig is a pipeline on an embedded broker on loopback with two
// users: dev-a, granted its own sensors to publish to and its own
// setpoints, its client id's commands, the outputs and $SYS to read;
// and watcher, granted nothing in particular (any topic but the
// agent's). Readings of sensors/{user}/{device} are counted, the counts
// published to out/cnt/{key}.
const aclConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
    client_id: gw
    status_topic: gw/status
    users:
      - username: dev-a
        password_file: a.pw
        publish: ["sensors/%%u/#"]
        subscribe: ["setpoints/%%u/#", "cmd/%%c", "out/#", "$SYS/#"]
      - {username: watcher, password_file: w.pw}
checkpoints:
  interval: 200ms
sources:
  - id: readings
    broker: local
    topics: ["sensors/{user}/{device}"]
    key: device
    value: v
    dead_letter_topic: gw/dead
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: out/cnt/{key}
`

// TestEmbeddedBrokerACL attacks an agent's embedded broker as a client on
// the plant network would, through the binary: with users listed,
// anonymous clients are refused on loopback too; no client publishes to
// the agent's topics (a retained offline onto its status topic, a fake
// output, a will there), a subscriber to them sees only the agent's
// messages, and the status topic still says online; a user publishes and
// subscribes only where its grants (with %u and %c) say; $SYS is read
// only; and a CONNECT with a password and no user name, or with a will
// topic with a wildcard, is closed without CONNACK. Refused publishes
// are acknowledged, refused filters get 0x80, and cairn status counts
// every refusal.
func TestEmbeddedBrokerACL(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	for name, pw := range map[string]string{"a.pw": "pw-a\n", "w.pw": "pw-w\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pw), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	if err := os.WriteFile(file, fmt.Appendf(nil, aclConfig, data, port), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, file)
	socket := filepath.Join(data, "cairn.sock")
	cairntest.AwaitStatus(t, socket, "connected to its own broker", 30*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].Connected
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dial := func(s mqttraw.Session) *mqttraw.Conn {
		t.Helper()
		c, err := mqttraw.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if code, err := c.Connect(s); err != nil || code != 0 {
			t.Fatalf("%s as %q: CONNACK %d, %v", s.ID, s.User, code, err)
		}
		return c
	}
	// publish publishes at QoS 1 and waits for the PUBACK, which a
	// refused publish gets too.
	publish := func(c *mqttraw.Conn, id uint16, topic, payload string, retain bool) {
		t.Helper()
		if err := c.Publish(id, topic, []byte(payload), 1, retain); err != nil {
			t.Fatal(err)
		}
		if ack, err := c.ReadType(packets.Puback, true); err != nil || ack.PacketID != id {
			t.Fatalf("publish to %s: %v, PUBACK of %d", topic, err, ack.PacketID)
		}
	}
	// retained subscribes to topic and to marker, a topic with a retained
	// message, in one SUBSCRIBE, and returns the retained messages of
	// topic: mochi sends those of each filter in order, so they come
	// before marker's.
	retained := func(c *mqttraw.Conn, id uint16, topic, marker string) []string {
		t.Helper()
		if codes, err := c.SubscribeAck(id, 1, topic, marker); err != nil || codes[0] > 1 || codes[1] > 1 {
			t.Fatalf("subscribing to %s and %s: %v %v", topic, marker, codes, err)
		}
		var got []string
		for {
			pk, err := c.ReadType(packets.Publish, true)
			if err != nil {
				t.Fatal(err)
			}
			if pk.FixedHeader.Qos == 1 {
				c.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
			}
			if pk.TopicName == marker {
				return got
			}
			got = append(got, string(pk.Payload))
		}
	}

	// Anonymous clients: refused on loopback, as users are listed.
	anon, err := mqttraw.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if code, err := anon.Connect(mqttraw.Session{ID: "anon", Clean: true}); err != nil || code != packets.Err3NotAuthorized.Code {
		t.Fatalf("an anonymous client: CONNACK %d, %v; want 5", code, err)
	}

	// A subscriber of the agent's topics, from before the attack.
	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker("tcp://"+addr).SetClientID("watch-out").
		SetUsername("watcher").SetPassword("pw-w"), "out/#")
	var statuses struct {
		sync.Mutex
		heard []string
	}
	subscribeFor(t, paho.NewClientOptions().AddBroker("tcp://"+addr).SetClientID("watch-status").
		SetUsername("watcher").SetPassword("pw-w"), "gw/status", func(b []byte) {
		statuses.Lock()
		defer statuses.Unlock()
		statuses.heard = append(statuses.heard, string(b))
	})

	// The attack on the agent's topics.
	att := dial(mqttraw.Session{ID: "attacker", User: "watcher", Password: "pw-w", Clean: true})
	publish(att, 1, "gw/status", "offline", true)
	publish(att, 2, "out/cnt/dev1", `{"key":"dev1","value":1e9}`, false)
	publish(att, 3, "out/cnt/a/b", `{"key":"a/b","value":1e9}`, true)
	publish(att, 4, "gw/dead", "forged", false)
	publish(att, 5, "$SYS/broker/fake", "forged", true)
	publish(att, 6, "setpoints/dev-a/sp", "21.5", false) // granted: no lists
	will, err := mqttraw.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer will.Close()
	if code, err := will.Connect(mqttraw.Session{ID: "will", User: "watcher", Password: "pw-w", Clean: true, WillTopic: "gw/status", WillPayload: []byte("offline"), WillRetain: true}); err != nil || code != packets.Err3NotAuthorized.Code {
		t.Fatalf("a will on the status topic: CONNACK %d, %v; want 5", code, err)
	}

	// dev-a: its grants.
	dev := dial(mqttraw.Session{ID: "dev-a-1", User: "dev-a", Password: "pw-a", Clean: true})
	codes, err := dev.SubscribeAck(1, 1, "setpoints/dev-a/#", "setpoints/dev-b/#", "cmd/dev-a-1", "cmd/other", "#")
	if want := []byte{1, 0x80, 1, 0x80, 0x80}; err != nil || !slices.Equal(codes, want) {
		t.Fatalf("dev-a's SUBACK %v (%v), want %v", codes, err, want)
	}
	publish(dev, 2, "sensors/dev-b/dev2", `{"v":1}`, false) // not granted
	publish(dev, 3, "sensors/dev-a/dev1", `{"v":1}`, false)
	slashed := dial(mqttraw.Session{ID: "dev/a", User: "dev-a", Password: "pw-a", Clean: true})
	if codes, err := slashed.SubscribeAck(1, 1, "cmd/dev/a", "cmd/+/a"); err != nil || !slices.Equal(codes, []byte{0x80, 0x80}) {
		t.Fatalf("a client id with / subscribing to its commands: SUBACK %v (%v), want 0x80s", codes, err)
	}
	// What the watcher published where dev-a may read reaches it.
	pub := dial(mqttraw.Session{ID: "setter", User: "watcher", Password: "pw-w", Clean: true})
	publish(pub, 1, "setpoints/dev-a/sp", "22", false)
	publish(pub, 2, "cmd/dev-a-1", "reboot", false)
	for _, want := range []string{"22", "reboot"} {
		pk, err := dev.ReadType(packets.Publish, true)
		if err != nil || string(pk.Payload) != want {
			t.Fatalf("dev-a read %q (%v), want %q", pk.Payload, err, want)
		}
		if pk.FixedHeader.Qos == 1 {
			dev.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
		}
	}

	// Protocol violations: closed without CONNACK.
	for _, s := range []mqttraw.Session{
		{ID: "nouser", Password: "pw-w", Clean: true},
		{ID: "wildwill", User: "watcher", Password: "pw-w", Clean: true, WillTopic: "gw/#", WillPayload: []byte("x")},
	} {
		c, err := mqttraw.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if code, err := c.Connect(s); !errors.Is(err, io.EOF) {
			t.Errorf("CONNECT of %s: CONNACK %d, %v; want the connection closed", s.ID, code, err)
		}
		c.Close()
	}

	// The count of dev-a's reading, and then a checkpoint more: the
	// reading refused before it would have been counted by then.
	st := cairntest.AwaitStatus(t, socket, "dev-a's reading counted", 30*time.Second, func(st api.Status) bool {
		outputs.mu.Lock()
		defer outputs.mu.Unlock()
		return len(outputs.values["dev1"]) > 0
	})
	cairntest.AwaitStatus(t, socket, "two checkpoints more", 30*time.Second, func(s api.Status) bool {
		return s.Checkpoints.Completed >= st.Checkpoints.Completed+2
	})
	outputs.mu.Lock()
	for _, o := range outputs.all {
		if o.Value != 1 || o.Key != "dev1" {
			t.Errorf("the output subscriber heard %+v: only the agent's count of dev1, 1, was published", o)
		}
	}
	outputs.mu.Unlock()
	publish(pub, 3, "setpoints/dev-a/marker", "marker", true)
	if got := retained(dial(mqttraw.Session{ID: "late", User: "watcher", Password: "pw-w", Clean: true}), 1, "gw/status", "setpoints/dev-a/marker"); !slices.Equal(got, []string{"online"}) {
		t.Errorf("the status topic retains %q, want online", got)
	}
	statuses.Lock()
	if slices.Contains(statuses.heard, "offline") {
		t.Errorf("the status subscriber heard %q", statuses.heard)
	}
	statuses.Unlock()
	reader := dial(mqttraw.Session{ID: "dev-a-2", User: "dev-a", Password: "pw-a", Clean: true})
	for _, topic := range []string{"$SYS/broker/fake", "out/cnt/a/b"} {
		if got := retained(reader, uint16(len(topic)), topic, "setpoints/dev-a/marker"); len(got) > 0 {
			t.Errorf("%s retains %q", topic, got)
		}
	}

	// Every refusal counted, in the status and in cairn status.
	want := map[string]int64{
		"embedded broker refused a client: failed login":                                            1,
		"embedded broker dropped a message: a topic only the agent publishes to":                    4,
		"embedded broker dropped a message: a $SYS topic, which only the broker publishes to":       1,
		"embedded broker dropped a message: a topic not granted to the client":                      1,
		"embedded broker refused a client's CONNECT: a will to a topic only the agent publishes to": 1,
		"embedded broker refused a topic filter: not granted to the client":                         5,
		"embedded broker closed a client's connection: a CONNECT with a password and no user name":  1,
		"embedded broker closed a client's connection: a will topic with a wildcard":                1,
	}
	st = cairntest.AwaitStatus(t, socket, "the refusals counted", 10*time.Second, func(st api.Status) bool { return len(st.Brokers) == 1 })
	for what, n := range want {
		if got := st.Brokers[0].Refused[what]; got != n {
			t.Errorf("refused %q: %d, want %d (all: %v)", what, got, n, st.Brokers[0].Refused)
		}
	}
	out, err := exec.Command(bin, "status", "-c", file).Output()
	if err != nil || !regexp.MustCompile(`(?m)^  refused 4: dropped a message: a topic only the agent publishes to$`).Match(out) {
		t.Errorf("cairn status: %v\n%s", err, out)
	}
	if t.Failed() {
		t.Log(p.Log())
	}
}
