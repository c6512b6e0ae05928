//go:build torture

package torture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
)

// connect connects a paho client; clean false keeps a persistent session.
func connect(url, id string, clean bool, onMessage paho.MessageHandler) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetCleanSession(clean).
		SetAutoReconnect(!clean).SetConnectRetry(true).SetConnectRetryInterval(100 * time.Millisecond).
		SetMaxReconnectInterval(time.Second).SetOrderMatters(true)
	if onMessage != nil {
		o.SetDefaultPublishHandler(onMessage)
	}
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return nil, fmt.Errorf("connecting %s: %v", id, tok.Error())
	}
	return c, nil
}

// presubscribe creates the persistent QoS 1 session that the agent's
// source subtask will take over, so that the broker queues for it what is
// published before the agent first subscribes.
func presubscribe(url, id, filter string) error {
	c, err := connect(url, id, false, nil)
	if err != nil {
		return err
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe(filter, 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("subscribing %s to %s: %v", id, filter, tok.Error())
	}
	return nil
}

// output is the JSON of a message of the sink (mqttio.Output), with the
// payload left for the pipeline's check to decode.
type output struct {
	ID    string  `json:"id"`
	Key   string  `json:"key"`
	Value float64 `json:"value"`
	// Message is the whole message, which holds a result's details
	// (version 2 of the sinks' output: mqttio.OutputFormat).
	Message json.RawMessage `json:"-"`
}

// fenceTopic is published by the harness after the agent stopped: once the
// consumer sees it, it has seen everything the agent published before.
const fenceTopic = "fence"

// consumer is the validating consumer: a persistent QoS 1 subscriber of
// the sink topics that keeps each message id's first copy, in arrival
// order. It is never the one who loses data: it subscribes before the
// agent first runs and keeps its session across broker restarts.
type consumer struct {
	client paho.Client

	mu      sync.Mutex
	ids     map[string]string // id → the message's body
	outs    []output          // distinct ids, in arrival order
	repeats int               // copies of an id already seen, dropped
	garbled []string          // messages that are not sink output, or that reuse an id for another body
	fence   chan struct{}
}

func startConsumer(url string) (*consumer, error) {
	c := &consumer{ids: make(map[string]string), fence: make(chan struct{})}
	var err error
	if c.client, err = connect(url, "torture-consumer", false, c.receive); err != nil {
		return nil, err
	}
	tok := c.client.SubscribeMultiple(map[string]byte{"out/#": 1, fenceTopic: 1}, c.receive)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		c.client.Disconnect(100)
		return nil, fmt.Errorf("subscribing the consumer: %v", tok.Error())
	}
	return c, nil
}

func (c *consumer) receive(_ paho.Client, m paho.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.Topic() == fenceTopic {
		select {
		case <-c.fence:
		default:
			close(c.fence)
		}
		return
	}
	var o output
	if err := json.Unmarshal(m.Payload(), &o); err != nil || o.ID == "" {
		c.garbled = append(c.garbled, fmt.Sprintf("%s: %q", m.Topic(), m.Payload()))
		return
	}
	if first, ok := c.ids[o.ID]; ok {
		c.repeats++
		if first != string(m.Payload()) {
			c.garbled = append(c.garbled, fmt.Sprintf("id %s came as %s and as %s", o.ID, first, m.Payload()))
		}
		return
	}
	c.ids[o.ID] = string(m.Payload())
	o.Message = bytes.Clone(m.Payload())
	c.outs = append(c.outs, o)
}

// snapshot returns the distinct outputs so far, the number of repeated ids
// dropped and the garbled messages.
func (c *consumer) snapshot() ([]output, int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outs[:len(c.outs):len(c.outs)], c.repeats, append([]string(nil), c.garbled...)
}

func (c *consumer) close() { c.client.Disconnect(100) }

// publisher sends the pipeline's messages at QoS 1 at a steady rate until
// told to stop, and restarts the broker when asked, at a moment when none
// of its own messages is in flight (so the restart tests the agent, not
// the publisher, whose retransmissions would be new messages to the
// broker).
type publisher struct {
	url     string
	rate    int // messages per second
	message func(i int) message
	broker  *mosquittotest.Broker

	restart chan struct{} // a broker restart is wanted
	stop    chan struct{} // publish no more
	done    chan struct{} // closed when the publisher returned

	// Set when done is closed.
	published int // messages the broker acknowledged: 0..published-1
	restarts  int
	err       error
}

func (p *publisher) run() {
	defer close(p.done)
	c, err := connect(p.url, "torture-publisher", true, nil)
	if err != nil {
		p.err = err
		return
	}
	defer func() {
		if c != nil {
			c.Disconnect(100)
		}
	}()
	const tick = 10 * time.Millisecond
	perTick := max(1, p.rate*int(tick)/int(time.Second))
	ticker := time.NewTicker(tick) // the load's pace, not a synchronisation
	defer ticker.Stop()
	var inFlight []paho.Token // of messages published..published+len-1
	// settle waits for the broker's acknowledgements of messages in
	// flight: all of them, or those that are done already.
	settle := func(all bool) error {
		for len(inFlight) > 0 {
			tok := inFlight[0]
			if !all {
				select {
				case <-tok.Done():
				default:
					return nil
				}
			}
			if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				// The broker may or may not have it: the expected output
				// is unknown from here on.
				return fmt.Errorf("publishing message %d: %v", p.published, tok.Error())
			}
			inFlight = inFlight[1:]
			p.published++
		}
		return nil
	}
	defer func() {
		if err := settle(true); p.err == nil {
			p.err = err
		}
	}()
	for {
		select {
		case <-p.restart:
			if p.err = settle(true); p.err != nil {
				return
			}
			c.Disconnect(100)
			if p.err = p.broker.Restart(); p.err != nil {
				return
			}
			p.restarts++
			if c, p.err = connect(p.url, "torture-publisher", true, nil); p.err != nil {
				return
			}
			continue
		case <-p.stop:
			return
		case <-ticker.C:
		}
		for range perTick {
			m := p.message(p.published + len(inFlight))
			inFlight = append(inFlight, c.Publish(m.topic(), 1, false, m.payload()))
		}
		if p.err = settle(false); p.err != nil {
			return
		}
	}
}
