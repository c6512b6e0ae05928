package mqttio

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// ClientConfig is how to reach a broker. Password is never logged.
type ClientConfig struct {
	// Broker is the broker's URL: tcp://host:port, or ssl://host:port for
	// TLS; ws://, wss:// and unix:// work as in paho, and so do proxies
	// named by the environment (all_proxy).
	Broker string
	// ClientID is stable across restarts: the broker keeps the persistent
	// session under it. Subtasks and sinks append a suffix.
	ClientID string
	Username string
	Password string
	// CAFile verifies the broker's certificate; CertFile and KeyFile are
	// the client certificate, if the broker asks for one.
	CAFile, CertFile, KeyFile string
	// KeepAlive is the MQTT keepalive; default 30 s.
	KeepAlive time.Duration
	// StatusTopic, if set, receives "online" (retained) on connect and, as
	// the last will, "offline" when the connection is lost.
	StatusTopic string
	Logger      *slog.Logger
	// Name is the broker's name in the agent's config, for logs; State, if
	// set, gathers the connection states of the clients of this config
	// (shared by all the clients of one broker).
	Name  string
	State *BrokerState
	// MaxPayload, if above 0, cuts a message from the broker with a longer
	// payload to MaxPayload+1 bytes as it arrives, before paho holds it
	// whole (publishLimiter): a source sets its decoder's limit.
	MaxPayload int
	// Dial, if set, opens the connections to the broker, whose URL is
	// then only shown: an embedded broker's broker.Server.DialAgent.
	Dial func() (net.Conn, error)
}

// options builds paho options for a client with id suffix suffix.
func (c ClientConfig) options(suffix string) (*paho.ClientOptions, error) {
	if c.Broker == "" {
		return nil, errors.New("no broker URL")
	}
	if c.ClientID == "" {
		return nil, errors.New("no client id: a persistent session needs a stable one")
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	keepAlive := c.KeepAlive
	if keepAlive == 0 {
		keepAlive = 30 * time.Second
	}
	id := c.ClientID + suffix
	o := paho.NewClientOptions().
		AddBroker(c.Broker).
		SetClientID(id).
		SetCleanSession(false).
		SetKeepAlive(keepAlive).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(500 * time.Millisecond).
		SetMaxReconnectInterval(5 * time.Second).
		SetOrderMatters(true).
		SetCustomOpenConnectionFn(func(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
			if c.Dial == nil {
				return dial(uri, o, c.MaxPayload)
			}
			conn, err := c.Dial()
			if err != nil {
				return nil, err
			}
			return newBufferedConn(conn, c.MaxPayload), nil
		}).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			log.Warn("MQTT connection lost; reconnecting", "broker", redactedURL(c.Broker), "client", id, "err", err)
		})
	if c.Username != "" {
		o.SetUsername(c.Username).SetPassword(c.Password)
	}
	if c.StatusTopic != "" {
		o.SetBinaryWill(c.StatusTopic, []byte("offline"), 1, true)
	}
	if c.CAFile != "" || c.CertFile != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("reading CA file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s holds no PEM certificate", c.CAFile)
			}
		}
		if c.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("loading client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		o.SetTLSConfig(cfg)
	}
	return o, nil
}

// resumeGate is a client's store, which says when publishing is safe
// after a (re)connection. On every connection paho lists the packets in its
// store and sends them again, setting their DUP flag as it goes, while its
// writer may be sending one of them that was published just before: a data
// race in paho (eclipse-paho/paho.mqtt.golang#703, seen under -race in
// CI). A packet published after the list was taken is not on it, so a
// publisher waits, after each attempt to connect, until paho has listed
// the store (open).
//
// After a reconnect paho resends what the broker had not acknowledged in
// the order its store gives: the default store's is random, the ordered
// store's (inside) the order of publishing.
type resumeGate struct {
	paho.Store
	seq     atomic.Uint64 // orders the two events below
	attempt atomic.Uint64 // seq at the last attempt to connect
	listed  atomic.Uint64 // seq at paho's last listing of the store
}

func newResumeGate() *resumeGate { return &resumeGate{Store: paho.NewOrderedMemoryStore()} }

// All is paho listing the store: at Connect, and as it resumes a
// connection.
func (g *resumeGate) All() []string {
	keys := g.Store.All()
	g.listed.Store(g.seq.Add(1))
	return keys
}

// notify notes every attempt to connect.
func (g *resumeGate) notify(_ paho.Client, n paho.ConnectionNotification) {
	if _, ok := n.(paho.ConnectionNotificationConnecting); ok {
		g.attempt.Store(g.seq.Add(1))
	}
}

// open reports whether paho has listed the store since the last attempt
// to connect: what is published now is not resent by this connection's
// resume.
func (g *resumeGate) open() bool { return g.listed.Load() > g.attempt.Load() }

// ready reports whether a QoS 1 publish on c, the gate's client, is safe
// now: c is connected and the gate is open.
func (g *resumeGate) ready(c paho.Client) bool { return c.IsConnectionOpen() && g.open() }

// connect creates a client and starts connecting; it does not wait for the
// broker, which may be down: paho retries with backoff. onConnect runs on
// every (re)connection; onMessage, if set, receives every message (also
// those of a persistent session that arrive before subscribing, and those
// of shared subscriptions, whose topics match no filter); onReconnecting,
// if set, runs before every attempt to reconnect after a lost connection,
// and so before paho resends what the broker had not acknowledged. A
// publisher that waits for acknowledgements publishes only while the
// returned gate is open.
func (c ClientConfig) connect(suffix string, onConnect func(paho.Client), onMessage paho.MessageHandler, onReconnecting func()) (paho.Client, *resumeGate, error) {
	o, err := c.options(suffix)
	if err != nil {
		return nil, nil, err
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	id := c.ClientID + suffix
	state := c.State
	if state == nil {
		state = new(BrokerState)
	}
	gate := newResumeGate()
	o.SetStore(gate).SetConnectionNotificationHandler(func(cl paho.Client, n paho.ConnectionNotification) {
		gate.notify(cl, n)
		switch n := n.(type) {
		case paho.ConnectionNotificationConnected:
			state.event(id, nil)
		case paho.ConnectionNotificationFailed:
			state.failed(log, c.Name, redactedURL(c.Broker), id, n.Reason)
		case paho.ConnectionNotificationLost:
			state.event(id, cmp.Or(n.Reason, errConnectionLost))
		}
	})
	if onReconnecting != nil {
		o.SetReconnectingHandler(func(paho.Client, *paho.ClientOptions) { onReconnecting() })
	}
	if onMessage != nil {
		o.SetDefaultPublishHandler(onMessage).SetAutoAckDisabled(true)
	}
	o.SetOnConnectHandler(func(cl paho.Client) {
		log.Info("MQTT connected", "broker", redactedURL(c.Broker), "client", id)
		if c.StatusTopic != "" {
			// At QoS 0: paho resends the publishes in its store after a
			// connect on another goroutine, and one put there from this
			// handler is written by both at once (a data race in paho).
			// The status is retained and sent again on every connect.
			cl.Publish(c.StatusTopic, 0, true, "online")
		}
		if onConnect != nil {
			onConnect(cl)
		}
	})
	cl := paho.NewClient(o)
	state.register(id, cl.IsConnectionOpen)
	cl.Connect() // with ConnectRetry, completes once connected
	return cl, gate, nil
}

// errConnectionLost stands for a lost connection's reason when paho has
// none.
var errConnectionLost = errors.New("connection lost")

// redactedURL is a broker URL as it may be logged: without a password.
func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
