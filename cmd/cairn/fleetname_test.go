package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestFleetStatusNamesEachGateway runs three agents of one pipeline file,
// on one host, whose client_id is ${GATEWAY}: the fleet status of each
// names it by its client id, as docs/fleet.md says, not by the host they
// share.
func TestFleetStatusNamesEachGateway(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	var mu sync.Mutex
	agents := make(map[string]string) // gateway (from the topic) → agent field
	c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("fleet-names").
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			var g api.GatewayStatus
			if err := json.Unmarshal(m.Payload(), &g); err != nil {
				t.Errorf("%s: %q: %v", m.Topic(), m.Payload(), err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			agents[strings.Split(m.Topic(), "/")[1]] = g.Agent
		}))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	if tok := c.Subscribe("gateways/+/status/json", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	dir := t.TempDir()
	names := []string{"gw-1", "gw-2", "gw-3"}
	for _, name := range names {
		g := &fleetGateway{name: name, file: filepath.Join(dir, name, "pipeline.yaml")}
		if err := os.Mkdir(filepath.Dir(g.file), 0o700); err != nil {
			t.Fatal(err)
		}
		g.write(t, broker.URL, fastScore)
		g.start(t, bin)
	}
	want := map[string]string{"gw-1": "gw-1", "gw-2": "gw-2", "gw-3": "gw-3"}
	var got map[string]string
	testwait.For(t, time.Minute, "a status of each gateway", func() bool {
		mu.Lock()
		defer mu.Unlock()
		got = maps.Clone(agents)
		return len(got) == len(names)
	})
	if !maps.Equal(got, want) {
		t.Fatalf("gateway → agent %v; want each named by its client id, %v", got, want)
	}
	t.Logf("agents named %v", slices.Sorted(maps.Values(got)))
}
