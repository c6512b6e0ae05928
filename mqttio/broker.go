package mqttio

import (
	"fmt"
	"log/slog"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// DefaultBrokerAddr is where the embedded broker listens unless told
// otherwise: loopback only, and not 1883, which a local broker may hold.
const DefaultBrokerAddr = "127.0.0.1:18830"

// Broker is an embedded MQTT broker (mochi-mqtt), for demos and tests. It
// keeps sessions in memory: they do not survive the process.
type Broker struct {
	srv      *mqtt.Server
	listener *listeners.TCP
}

// EmbeddedMaxPacket is the largest MQTT packet the embedded broker takes:
// it closes the connection of a client that announces a larger one,
// before reading it, so that one device cannot make the agent hold a
// packet of hundreds of megabytes. It is four times a source's payload
// limit (256 KiB), topic included.
const EmbeddedMaxPacket = 1 << 20

// StartBroker starts a broker on addr ("127.0.0.1:0" picks a free port).
// It accepts every client: bind it to loopback unless the network is
// trusted.
func StartBroker(addr string, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.Default()
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumInflight = 1 << 15
	caps.MaximumClientWritesPending = 1 << 16
	caps.MaximumPacketSize = EmbeddedMaxPacket
	log = slog.New(brokerLog{log.Handler()}).With("component", "embedded-broker")
	srv := mqtt.New(&mqtt.Options{Capabilities: caps, Logger: log, InlineClient: false})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		return nil, err
	}
	l := listeners.NewTCP(listeners.Config{ID: "tcp", Address: addr})
	if err := srv.AddListener(l); err != nil {
		return nil, fmt.Errorf("embedded broker on %s: %w", addr, err)
	}
	go srv.Serve()
	return &Broker{srv: srv, listener: l}, nil
}

// URL is the broker's address for clients.
func (b *Broker) URL() string { return "tcp://" + b.listener.Address() }

// Close stops the broker.
func (b *Broker) Close() error { return b.srv.Close() }
