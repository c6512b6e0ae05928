package mqttio

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// DefaultBrokerAddr is where the embedded broker listens unless told
// otherwise: loopback only, and not 1883, which a local broker may hold.
const DefaultBrokerAddr = "127.0.0.1:18830"

// Broker is an embedded MQTT broker (mochi-mqtt), for demos and tests. It
// keeps sessions in memory: they do not survive the process.
type Broker struct {
	srv      *mqtt.Server
	listener *listeners.TCP
	own      [2]string // the user and password of the agent's own clients
}

// EmbeddedMaxPacket is the largest MQTT packet the embedded broker takes:
// it closes the connection of a client that announces a larger one,
// before reading it, so that one device cannot make the agent hold a
// packet of hundreds of megabytes. It is four times a source's payload
// limit (256 KiB), topic included.
const EmbeddedMaxPacket = 1 << 20

// BrokerConfig says where an embedded broker listens and whom it lets in.
type BrokerConfig struct {
	// Addr is the listen address ("127.0.0.1:0" picks a free port).
	Addr string
	// Users are the clients let in by name (key) and password (value).
	Users map[string]string
	// AllowAnonymous lets in clients that give no user name.
	AllowAnonymous bool
	// OwnClientIDs is the prefix of the agent's own clients' ids: only
	// they, with the credentials of Broker.Credentials, may connect under
	// such an id, so that no one else takes over their sessions (a client
	// connecting under an id in use ends the other's connection).
	OwnClientIDs string
}

// StartBroker starts a broker as cfg says.
func StartBroker(cfg BrokerConfig, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.Default()
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumInflight = 1 << 15
	caps.MaximumClientWritesPending = 1 << 16
	caps.MaximumPacketSize = EmbeddedMaxPacket
	log = slog.New(brokerLog{log.Handler()}).With("component", "embedded-broker")
	srv := mqtt.New(&mqtt.Options{Capabilities: caps, Logger: log, InlineClient: false})
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	b := &Broker{srv: srv, own: [2]string{"cairn-agent-" + hex.EncodeToString(secret[:4]), hex.EncodeToString(secret[4:])}}
	if err := srv.AddHook(&brokerAuth{cfg: cfg, own: b.own}, nil); err != nil {
		return nil, err
	}
	b.listener = listeners.NewTCP(listeners.Config{ID: "tcp", Address: cfg.Addr})
	if err := srv.AddListener(b.listener); err != nil {
		return nil, fmt.Errorf("embedded broker on %s: %w", cfg.Addr, err)
	}
	go srv.Serve()
	return b, nil
}

// URL is the broker's address for clients.
func (b *Broker) URL() string { return "tcp://" + b.listener.Address() }

// Credentials are the user name and password the agent's own clients
// connect with: made for this process, never stored or logged.
func (b *Broker) Credentials() (user, password string) { return b.own[0], b.own[1] }

// Close stops the broker.
func (b *Broker) Close() error { return b.srv.Close() }

// brokerAuth decides who connects to an embedded broker
// (BrokerConfig); whoever connects may publish and subscribe to anything.
type brokerAuth struct {
	mqtt.HookBase
	cfg BrokerConfig
	own [2]string
}

func (h *brokerAuth) ID() string { return "cairn-auth" }

func (h *brokerAuth) Provides(b byte) bool {
	return b == mqtt.OnConnectAuthenticate || b == mqtt.OnACLCheck
}

func (h *brokerAuth) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	user, password := string(pk.Connect.Username), pk.Connect.Password
	switch {
	case user == h.own[0]:
		return subtle.ConstantTimeCompare(password, []byte(h.own[1])) == 1
	case h.cfg.OwnClientIDs != "" && strings.HasPrefix(cl.ID, h.cfg.OwnClientIDs):
		return false // the agent's own session, claimed by another
	case user == "" && !pk.Connect.UsernameFlag:
		return h.cfg.AllowAnonymous
	}
	want, ok := h.cfg.Users[user]
	return ok && subtle.ConstantTimeCompare(password, []byte(want)) == 1
}

func (h *brokerAuth) OnACLCheck(*mqtt.Client, string, bool) bool { return true }
