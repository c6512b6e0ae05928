package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

func TestStatusFilter(t *testing.T) {
	for written, want := range map[string]string{
		"gateways/${GATEWAY}/status":        "gateways/+/status",
		"plant/${SITE}/gw-${N}/cairn":       "plant/+/+/cairn",
		"gateways/gw-07/status":             "gateways/gw-07/status",
		"${PREFIX}/status/${HOSTNAME}/json": "+/status/+/json",
	} {
		if got := StatusFilter(written); got != want {
			t.Errorf("StatusFilter(%q) = %q, want %q", written, got, want)
		}
	}
}

func TestGatewayOf(t *testing.T) {
	for _, tc := range []struct {
		filter, topic, gateway string
		json, ok               bool
	}{
		{"gateways/+/status", "gateways/gw-07/status", "gw-07", false, true},
		{"gateways/+/status", "gateways/gw-07/status/json", "gw-07", true, true},
		{"plant/+/+/status", "plant/north/gw-1/status/json", "north/gw-1", true, true},
		{"gateways/#", "gateways/gw-07/status", "gw-07/status", false, true},
		{"gateways/#", "gateways/gw-07/status/json", "gw-07/status", true, true},
		{"gateways/gw-07/status", "gateways/gw-07/status/json", "gateways/gw-07/status", true, true},
		{"gateways/+/status", "gateways/gw-07/other", "", false, false},
		{"gateways/+/status", "gateways/gw-07/status/json/x", "", false, false},
	} {
		g, json, ok := gatewayOf(tc.filter, tc.topic)
		if ok != tc.ok || ok && (g != tc.gateway || json != tc.json) {
			t.Errorf("gatewayOf(%q, %q) = %q, %v, %v; want %q, %v, %v", tc.filter, tc.topic, g, json, ok, tc.gateway, tc.json, tc.ok)
		}
	}
}

// TestFleetBrokerOf: the fleet view takes the broker with a status topic
// from a gateway's pipeline file, as written, whatever else the file
// needs: its status topic's filter, its password file beside the file,
// an embedded broker's address; and says which to choose when it cannot.
func TestFleetBrokerOf(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mqtt.pw"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	write := func(brokers string) {
		t.Helper()
		if err := os.WriteFile(file, []byte("brokers:\n"+brokers+"sources:\n  - id: s\n    broker: ${UNSET_IN_THIS_SHELL}\n    topics: [x]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("  plant:\n    url: ssl://mqtt.plant:8883\n    username: viewer\n    password_file: mqtt.pw\n    ca_file: ca.pem\n    status_topic: gateways/${GATEWAY}/status\n" +
		"  local:\n    embedded: true\n    listen: 0.0.0.0:18830\n")
	b, err := FleetBrokerOf(file, "")
	if err != nil {
		t.Fatal(err)
	}
	want := FleetBroker{URL: "ssl://mqtt.plant:8883", Username: "viewer", Password: "s3cret", CAFile: filepath.Join(dir, "ca.pem"), Topic: "gateways/+/status"}
	if b != want {
		t.Fatalf("FleetBrokerOf = %+v, want %+v", b, want)
	}
	if s := b.String(); s != "ssl://mqtt.plant:8883 gateways/+/status" || strings.Contains(s, "s3cret") {
		t.Fatalf("String() = %q", s)
	}
	if b, err := FleetBrokerOf(file, "local"); err != nil || b.URL != "tcp://127.0.0.1:18830" || b.Topic != "" {
		t.Fatalf("the embedded broker: %+v, %v", b, err)
	}
	write("  a: {url: 'tcp://a:1883', status_topic: 's/${G}/status'}\n  b: {url: 'tcp://b:1883', status_topic: 't/${G}/status'}\n")
	if _, err := FleetBrokerOf(file, ""); err == nil || !strings.Contains(err.Error(), "brokers a, b have a status_topic: name one with --broker") {
		t.Fatalf("two brokers with a status topic: %v", err)
	}
	if _, err := FleetBrokerOf(file, "c"); err == nil || !strings.Contains(err.Error(), `no broker "c" (brokers: a, b)`) {
		t.Fatalf("no such broker: %v", err)
	}
	write("  a: {url: 'tcp://a:1883'}\n")
	if _, err := FleetBrokerOf(file, ""); err == nil || !strings.Contains(err.Error(), "no broker has a status_topic") {
		t.Fatalf("no status topic: %v", err)
	}
}

// TestWatchFleetAcrossReconnects: the watcher gets the statuses the
// broker keeps as soon as it subscribes, marked retained, and live ones
// after; when its connection is cut it says so, and once back it
// subscribes again and gets what changed meanwhile.
func TestWatchFleetAcrossReconnects(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	gate := mosquittotest.NewGate(t, broker.URL)
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("gateway-simulator"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer pub.Disconnect(100)
	publish := func(topic, payload string) {
		t.Helper()
		if tok := pub.Publish(topic, 1, true, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
	}
	publish("gateways/gw-1/status", "online")
	publish("gateways/gw-1/status/json", `{"v":1,"state":"running"}`)
	publish("other/gw-1/status", "online")

	var mu sync.Mutex
	var msgs []api.FleetMessage
	var links []api.FleetLink
	last := func() (api.FleetMessage, api.FleetLink, int) {
		mu.Lock()
		defer mu.Unlock()
		var m api.FleetMessage
		var l api.FleetLink
		if len(msgs) > 0 {
			m = msgs[len(msgs)-1]
		}
		if len(links) > 0 {
			l = links[len(links)-1]
		}
		return m, l, len(msgs)
	}
	stop, err := WatchFleet(FleetBroker{URL: gate.URL, Topic: "gateways/+/status"}, func(m api.FleetMessage) {
		mu.Lock()
		msgs = append(msgs, m)
		mu.Unlock()
	}, func(l api.FleetLink) {
		mu.Lock()
		links = append(links, l)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testwait.For(t, 10*time.Second, "the retained online and status, and the link up", func() bool {
		_, l, n := last()
		mu.Lock()
		defer mu.Unlock()
		var online, status bool
		for _, m := range msgs { // in either order: two subscriptions
			online = online || !m.JSON && m.Retained && m.Gateway == "gw-1" && string(m.Payload) == "online"
			status = status || m.JSON && m.Retained && m.Gateway == "gw-1" && string(m.Payload) == `{"v":1,"state":"running"}`
		}
		return n == 2 && l.Up && online && status
	})
	publish("gateways/gw-1/status/json", `{"v":1,"state":"stopping"}`)
	testwait.For(t, 10*time.Second, "a live status", func() bool {
		m, _, _ := last()
		return !m.Retained && string(m.Payload) == `{"v":1,"state":"stopping"}`
	})

	gate.Shut()
	testwait.For(t, 20*time.Second, "the link down", func() bool { _, l, _ := last(); return !l.Up && l.Err != "" })
	_, _, before := last()
	publish("gateways/gw-2/status", "offline")
	gate.Open()
	testwait.For(t, 30*time.Second, "the link up again, and gw-2's offline", func() bool {
		_, l, _ := last()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs[before:] {
			if m.Gateway == "gw-2" && string(m.Payload) == "offline" && m.Retained {
				return l.Up
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range msgs {
		if strings.HasPrefix(m.Topic, "other/") {
			t.Fatalf("a message of another topic came: %+v", m)
		}
	}
}
