package mqttio

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// statusWatcher subscribes to a status topic and its JSON sibling and
// keeps what comes, in order.
type statusWatcher struct {
	mu   sync.Mutex
	got  []string // "topic payload"
	last map[string]string
}

func watchStatus(t *testing.T, url, topic string) *statusWatcher {
	t.Helper()
	w := &statusWatcher{last: map[string]string{}}
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("watch-%d", time.Now().UnixNano())))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	if tok := c.Subscribe(topic+"/#", 1, func(_ paho.Client, m paho.Message) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.got = append(w.got, m.Topic()+" "+string(m.Payload()))
		w.last[m.Topic()] = string(m.Payload())
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	return w
}

func (w *statusWatcher) lastOf(topic string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[topic]
}

func (w *statusWatcher) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// TestStatusPublisher: statuses go to the JSON topic, retained; while
// the broker is out of reach only the newest set waits, and goes once it
// is back; Close publishes the last status and then offline.
func TestStatusPublisher(t *testing.T) {
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	gate := mosquittotest.NewGate(t, broker.URL)
	const topic = "plant/gw-1/status"
	cc := ClientConfig{Broker: gate.URL, ClientID: "gw-1", StatusTopic: topic, KeepAlive: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	p, err := cc.StartStatus("-status")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			p.Close(nil, time.Second)
		}
	}()
	w := watchStatus(t, broker.URL, topic)
	p.Publish([]byte(`{"n":1}`))
	testwait.For(t, 10*time.Second, "status 1 and online", func() bool {
		return w.lastOf(topic+"/json") == `{"n":1}` && w.lastOf(topic) == "online"
	})

	gate.Shut()
	testwait.For(t, 10*time.Second, "the client to see its connection cut", func() bool { return !p.client.IsConnectionOpen() })
	p.Publish([]byte(`{"n":2}`))
	p.Publish([]byte(`{"n":3}`))
	gate.Open()
	testwait.For(t, 20*time.Second, "status 3 after the reconnection", func() bool { return w.lastOf(topic+"/json") == `{"n":3}` })
	for _, m := range w.all() {
		if m == topic+`/json {"n":2}` {
			t.Fatalf("status 2, replaced while the broker was away, was published: %q", w.all())
		}
	}
	// Retained: a newcomer gets the newest at once.
	if late := watchStatus(t, broker.URL, topic); !testwait.Poll(10*time.Second, func() bool { return late.lastOf(topic+"/json") == `{"n":3}` }) {
		t.Fatalf("a later subscriber got %q", late.all())
	}

	n := len(w.all())
	p.Close([]byte(`{"n":4,"state":"stopped"}`), 5*time.Second)
	closed = true
	testwait.For(t, 10*time.Second, "the last status and offline", func() bool {
		got := w.all()[n:]
		return len(got) >= 2 && got[len(got)-2] == topic+`/json {"n":4,"state":"stopped"}` && got[len(got)-1] == topic+" offline"
	})
}
