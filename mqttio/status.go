package mqttio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// StatusJSONTopic is where an agent publishes its status as JSON: beside
// statusTopic, which carries online and offline (ClientConfig.StatusTopic)
// and so keeps the plain words a consumer of it may expect.
func StatusJSONTopic(statusTopic string) string { return statusTopic + "/json" }

// StatusPublisher publishes an agent's status, retained at QoS 1, to
// StatusJSONTopic of its client's status topic, over a client of its own
// (which, as every client with a status topic, says online when it
// connects and has offline as its last will). Only the newest status
// matters: one set while the client is away or a publish is in flight
// replaces the one before and is published after it, once.
type StatusPublisher struct {
	client paho.Client
	gate   *resumeGate
	topic  string // the status topic
	log    *slog.Logger

	mu      sync.Mutex
	newest  []byte
	version uint64 // of newest: how many were set
	pending bool   // newest is not published yet
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// statusRetry is how soon a publish that failed, or that waits for the
// client to be ready, is tried again.
const statusRetry = 250 * time.Millisecond

// statusPublishTimeout bounds the wait for the broker's acknowledgement
// of one status.
const statusPublishTimeout = 10 * time.Second

// StartStatus connects a client with id suffix suffix to publish statuses
// to StatusJSONTopic(c.StatusTopic), which must be set. It does not wait
// for the broker: statuses set meanwhile wait for it.
func (c ClientConfig) StartStatus(suffix string) (*StatusPublisher, error) {
	if c.StatusTopic == "" {
		return nil, errors.New("no status topic")
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	p := &StatusPublisher{topic: c.StatusTopic, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	cl, gate, err := c.connect(suffix, func(paho.Client) {
		p.mu.Lock()
		p.pending = p.newest != nil // a new session may have lost what was in flight
		p.mu.Unlock()
		p.poke()
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	p.client, p.gate = cl, gate
	go p.run()
	return p, nil
}

// Publish sets the status to publish: now, or once the client can.
func (p *StatusPublisher) Publish(status []byte) {
	p.mu.Lock()
	p.newest, p.pending = status, true
	p.version++
	p.mu.Unlock()
	p.poke()
}

func (p *StatusPublisher) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// take returns the status to publish and its version, if one waits.
func (p *StatusPublisher) take() ([]byte, uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.pending {
		return nil, 0, false
	}
	p.pending = false
	return p.newest, p.version, true
}

// failed marks the status of version v as still to publish, unless a
// newer one was set.
func (p *StatusPublisher) failed(v uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.version == v {
		p.pending = true
	}
}

func (p *StatusPublisher) run() {
	defer close(p.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-p.kick:
		case <-retry.C:
		case <-p.stop:
			return
		}
		if !p.gate.ready(p.client) {
			retry.Reset(statusRetry) // connecting, or paho resending
			continue
		}
		status, v, ok := p.take()
		if !ok {
			continue
		}
		if err := p.send(StatusJSONTopic(p.topic), status); err != nil {
			p.failed(v)
			retry.Reset(statusRetry)
		}
	}
}

// send publishes payload to topic, retained at QoS 1, and waits for the
// broker's acknowledgement.
func (p *StatusPublisher) send(topic string, payload []byte) error {
	tok := p.client.Publish(topic, 1, true, payload)
	select {
	case <-tok.Done():
		return tok.Error()
	case <-time.After(statusPublishTimeout):
		return errors.New("no acknowledgement from the broker")
	case <-p.stop:
		return errors.New("stopped")
	}
}

// Close stops publishing. If the client is connected it publishes last
// (the agent's final status) and then offline to the status topic, as
// its last will would have, waiting at most timeout for the broker to
// take them; then it disconnects.
func (p *StatusPublisher) Close(last []byte, timeout time.Duration) {
	close(p.stop)
	<-p.done
	if p.gate.ready(p.client) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		for _, m := range []struct {
			topic   string
			payload []byte
		}{{StatusJSONTopic(p.topic), last}, {p.topic, []byte("offline")}} {
			if m.payload == nil {
				continue
			}
			tok := p.client.Publish(m.topic, 1, true, m.payload)
			select {
			case <-tok.Done():
				if err := tok.Error(); err != nil {
					p.log.Warn("final status not published", "topic", m.topic, "err", err)
				}
			case <-ctx.Done():
				p.log.Warn("final status not acknowledged in time", "topic", m.topic, "timeout", timeout)
			}
		}
	}
	p.client.Disconnect(250)
}

// WatchStatus subscribes to the status topics filter matches and their
// JSON siblings (StatusJSONTopic), for a fleet view: onMessage receives
// every message, retained ones (the newest of each topic, on every
// subscription) marked so; onLink each connection made or lost. The
// client has a clean session under c.ClientID, which should be unique to
// the viewer (the broker queues nothing for it while it is away, and
// resends the retained messages when it is back), and subscribes again
// after every reconnection. Messages come on one goroutine, in order; a
// slow onMessage holds up the client. Stop disconnects.
func (c ClientConfig) WatchStatus(filter string, onMessage func(topic string, payload []byte, retained bool), onLink func(up bool, err error)) (stop func(), err error) {
	if err := checkFilter(filter); err != nil {
		return nil, err
	}
	o, err := c.options("")
	if err != nil {
		return nil, err
	}
	filters := map[string]byte{filter: 1, StatusJSONTopic(filter): 1}
	if strings.HasSuffix(filter, "#") {
		filters = map[string]byte{filter: 1} // takes the siblings too
	}
	o.SetCleanSession(true).
		SetConnectionLostHandler(func(_ paho.Client, err error) { onLink(false, err) }).
		SetOnConnectHandler(func(cl paho.Client) {
			tok := cl.SubscribeMultiple(filters, func(_ paho.Client, m paho.Message) {
				onMessage(m.Topic(), m.Payload(), m.Retained())
			})
			go func() {
				tok.Wait()
				onLink(tok.Error() == nil, tok.Error())
			}()
		}).
		SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
			if f, ok := n.(paho.ConnectionNotificationFailed); ok {
				onLink(false, f.Reason)
			}
		})
	cl := paho.NewClient(o)
	cl.Connect() // with ConnectRetry, completes once connected
	return func() { cl.Disconnect(250) }, nil
}

// checkFilter says what is wrong with a topic filter to subscribe to, if
// anything: it is empty, holds NUL, or has a wildcard that is not a whole
// level (+) or the whole last level (#).
func checkFilter(filter string) error {
	if filter == "" || strings.ContainsRune(filter, 0) {
		return fmt.Errorf("topic filter %q is empty or holds NUL", filter)
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if strings.ContainsAny(l, "+#") && l != "+" && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("topic filter %q: a wildcard must be a whole level, and # the last", filter)
		}
	}
	return nil
}
