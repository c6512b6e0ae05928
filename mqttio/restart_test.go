package mqttio

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/internal/mosquittotest"
)

// TestMosquittoKeepsPlainNotSharedSubscriptions records what the design
// rests on (docs/DESIGN.md, section 1): across a restart with persistence
// on, mosquitto keeps a persistent session's plain subscriptions and its
// queued messages, but not its shared subscriptions (2.0 saves only the
// plain ones), so what is published after the restart reaches a shared
// subscriber only once it subscribes again. While the broker runs, it
// queues for offline members of a shared subscription their turns of it.
func TestMosquittoKeepsPlainNotSharedSubscriptions(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	sessions := map[string]string{"plain": "t/#", "shared-a": "$share/g/t/#", "shared-b": "$share/g/t/#"}
	for id, filter := range sessions {
		presubscribe(t, broker.URL, id, filter)
	}
	publishAll := func(phase string) {
		c := client(t, broker.URL, "publisher-"+phase, true)
		defer c.Disconnect(100)
		for i := range 4 {
			if tok := c.Publish(fmt.Sprintf("t/%d", i), 1, false, fmt.Sprintf("%s-%d", phase, i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}
	publishAll("before") // every session offline
	if err := broker.Restart(); err != nil {
		t.Fatal(err)
	}
	publishAll("after")
	got := map[string][]string{}
	for id := range sessions {
		got[id] = queued(t, broker.URL, id)
	}
	if want := []string{"before-0", "before-1", "before-2", "before-3", "after-0", "after-1", "after-2", "after-3"}; !slices.Equal(got["plain"], want) {
		t.Errorf("the plain subscriber's session held %v, want %v", got["plain"], want)
	}
	shared := slices.Sorted(slices.Values(append(slices.Clone(got["shared-a"]), got["shared-b"]...)))
	if want := []string{"before-0", "before-1", "before-2", "before-3"}; !slices.Equal(shared, want) {
		t.Errorf("the shared subscribers' sessions held %v and %v, want %v between them: what was queued before the restart, nothing after it",
			got["shared-a"], got["shared-b"], want)
	}
	if len(got["shared-a"]) != 2 {
		t.Errorf("the offline members of a shared subscription were queued %v and %v, want two messages each", got["shared-a"], got["shared-b"])
	}
}

// queued connects to id's persistent session without subscribing and
// returns the payloads its queue held: what arrives before a fence the
// client sends itself, which the broker queues behind them.
func queued(t *testing.T, url, id string) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	fence := make(chan struct{}, 1)
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(false).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			if m.Topic() == "fence/"+id {
				fence <- struct{}{}
				return
			}
			mu.Lock()
			got = append(got, string(m.Payload()))
			mu.Unlock()
		})
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connecting %s: %v", id, tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe("fence/"+id, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if tok := c.Publish("fence/"+id, 1, false, "fence"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	waitFor(t, fence, 10*time.Second, "the fence behind "+id+"'s queue")
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}
