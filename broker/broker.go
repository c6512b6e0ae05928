package broker

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/mqttio"
)

// DefaultAddr is where the embedded broker listens unless told
// otherwise: loopback only, and not 1883, which a local broker may hold.
const DefaultAddr = "127.0.0.1:18830"

// Server is an embedded MQTT broker (mochi-mqtt): the gateway's MQTT
// server (see the package's doc for what it promises and what not). It
// keeps sessions in memory: they do not survive the process. Its clients
// connect to Config.Addr, bound by Config.Limits; the agent's own, to a
// socket of their own (DialAgent).
type Server struct {
	srv     *mqtt.Server
	acl     *brokerACL
	clients *clientListener
	agent   *agentClientListener
	guard   *brokerGuard
	ingress *ingress
	refer   *refusals
	own     [2]string // the user and password of the agent's own clients
	closing sync.Once
}

// MaxPacket is the largest MQTT packet the embedded broker takes:
// it closes the connection of a client that announces a larger one,
// before reading it, so that one device cannot make the agent hold a
// packet of hundreds of megabytes. It is four times a source's payload
// limit (256 KiB), topic included.
const MaxPacket = 1 << 20

// Config says where an embedded broker listens and whom it lets in.
type Config struct {
	// Addr is the listen address ("127.0.0.1:0" picks a free port).
	Addr string
	// Users are the clients let in by name (key) and password (value).
	Users map[string]string
	// AllowAnonymous lets in clients that give no user name.
	AllowAnonymous bool
	// Grants are what users may publish and subscribe to, by user name;
	// AnonymousGrants, what clients without one may. A user not in
	// Grants may publish and subscribe to any topic but the agent's.
	Grants          map[string]Grants
	AnonymousGrants Grants
	// AgentTopics are the topics only the agent's own clients may
	// publish to: topics, and sinks' topics in which "{key}" stands for
	// any key (mqttio.CheckTopicTemplate).
	AgentTopics []string
	// OwnClientIDs is the prefix of the agent's own clients' ids: only
	// they, with the credentials of Server.Credentials, may connect under
	// such an id, so that no one else takes over their sessions (a client
	// connecting under an id in use ends the other's connection).
	OwnClientIDs string
	// Limits bound what the clients at Addr may make the broker hold and
	// do; the zero value bounds nothing.
	Limits Limits
	// Reads are the filters the agent's durable sources read, by source
	// name: a QoS 1 or 2 publish on a topic one of them matches is
	// acknowledged only once each such source has it durable (Attach).
	Reads map[string][]string

	times listenTimes // the listener's, if not the defaults (tests)
}

// Start starts a server as cfg says, logging to log (nil: slog.Default),
// and returns once it listens.
func Start(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumInflight = agentMaxQueued
	caps.MaximumClientWritesPending = agentMaxUnsent
	caps.MaximumPacketSize = MaxPacket
	// An acknowledgement carries no properties of the packet it answers:
	// mochi would copy a PUBLISH's user properties into its PUBACK, which
	// the Paho MQTT 5 test client (docs/mqtt.md#conformance) takes for a
	// malformed packet and drops its connection over.
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	log = slog.New(brokerLog{log.Handler()}).With("component", "embedded-broker")
	// $SYS topics once, at the start: mochi would rewrite them every
	// second, after a stop-the-world runtime.ReadMemStats, and without
	// the lock its subscribers' lookups take (brokerGuard.retaining).
	srv := mqtt.New(&mqtt.Options{Capabilities: caps, Logger: log, InlineClient: false, SysTopicResendInterval: math.MaxInt32})
	secret := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	b := &Server{srv: srv, own: [2]string{"cairn-agent-" + hex.EncodeToString(secret[:4]), hex.EncodeToString(secret[4:])},
		refer: newRefusals(log, refusalInterval)}
	if err := b.start(cfg, log); err != nil {
		if b.clients != nil && b.clients.ln != nil {
			b.clients.ln.Close()
		}
		b.refer.close()
		return nil, err
	}
	go srv.Serve()
	return b, nil
}

// start adds b's hooks and listeners to its server.
func (b *Server) start(cfg Config, log *slog.Logger) error {
	auth := &brokerAuth{cfg: cfg, own: b.own, refer: b.refer}
	if err := b.srv.AddHook(auth, nil); err != nil {
		return err
	}
	b.acl = newBrokerACL(cfg)
	if err := b.srv.AddHook(&brokerAccess{srv: b.srv, acl: b.acl, refer: b.refer, admits: auth.allowed}, nil); err != nil {
		return err
	}
	b.guard = newBrokerGuard(b.srv, cfg.Limits, b.acl, b.refer, auth.allowed)
	// The ingress before the guard: the guard counts a publish under way
	// from OnPublish to OnPublished, which a publish held never reaches
	// until it is released.
	b.ingress = newIngress(b.srv, cfg.Reads, b.guard.topicRefusal)
	if err := b.srv.AddHook(b.ingress, nil); err != nil {
		return err
	}
	if err := b.srv.AddHook(b.guard, nil); err != nil {
		return err
	}
	b.clients = &clientListener{addr: cfg.Addr, lim: cfg.Limits, refer: b.refer,
		rates: newAddrRates(cfg.Limits.MaxConnectionRate), times: cfg.times, endClients: b.endClients}
	if cfg.times == (listenTimes{}) {
		b.clients.times = defaultListenTimes
	}
	if err := b.srv.AddListener(b.clients); err != nil {
		return fmt.Errorf("embedded broker on %s: %w", cfg.Addr, err)
	}
	b.agent = &agentClientListener{name: agentSocketName(), log: log, endClients: b.endClients}
	if err := b.srv.AddListener(b.agent); err != nil {
		return fmt.Errorf("embedded broker: the agent's socket: %w", err)
	}
	return nil
}

// URL is the broker's address for clients.
func (b *Server) URL() string { return "tcp://" + b.clients.Address() }

// DialAgent opens a connection for one of the agent's own clients, which
// connect with Credentials: to a socket that only this process may
// connect to, where the limits of other clients do not apply.
func (b *Server) DialAgent() (net.Conn, error) { return net.Dial("unix", b.agent.name) }

// Credentials are the user name and password the agent's own clients
// connect with (DialAgent): made for this process, never stored or
// logged, and of no use on the clients' listener.
func (b *Server) Credentials() (user, password string) { return b.own[0], b.own[1] }

// SetAgentTopics makes topics the ones only the agent's own clients may
// publish to (Config.AgentTopics), in place of those before: a
// pipeline reloaded has sinks of its own.
func (b *Server) SetAgentTopics(topics []string) { b.acl.setAgentTopics(topics) }

// SetReads makes reads the filters the agent's sources read, by source
// name (Config.Reads), in place of those before: a pipeline reloaded
// reads other topics.
func (b *Server) SetReads(reads map[string][]string) { b.ingress.setReads(reads) }

// Attach makes a subtask of a durable source, one of Config.Reads, take
// the publishes of its topics in this process (mqttio.Ingress): a QoS 1
// or 2 publish is acknowledged to its client once every source that
// reads it says it is durable.
func (b *Server) Attach(source string, filters []string, pick func(topic string) bool, take func(mqttio.Handoff) bool) (detach func()) {
	return b.ingress.attach(source, filters, pick, take)
}

// Refusals returns how many refusals of each kind the broker made its
// clients since it started (a failed login, a topic not granted, a
// message over a limit, ...), by the message of their log lines; the
// offline sessions it ended are EndedSessions.
func (b *Server) Refusals() map[string]int64 { return b.refer.counted() }

// endClients ends the connections of the clients of the listener whose
// id is listener, as mochi's Server.closeListenerClients does, which its
// listeners are given to call as they close. That one lists them with
// Clients.GetByListener, which takes the read lock of mochi's clients
// twice, the second time inside the first: a client added between the
// two (one connecting as the broker closes) waits for the first, and the
// second for it, for good, and so does the broker's Close.
func (b *Server) endClients(listener string) {
	for _, cl := range b.srv.Clients.GetAll() {
		if cl.Net.Listener == listener && !cl.Closed() {
			b.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}

// Close stops the broker, once, and logs the refusals not logged yet.
func (b *Server) Close() error {
	b.closing.Do(func() {
		b.srv.Close()
		b.guard.close()
		b.refer.close()
	})
	return nil
}

// brokerAuth decides who connects to an embedded broker (Config),
// and logs the failed logins through refusals: at most a line a minute
// for each address, with their number, the newest's user name and client
// id, never a password. (What a client may do once connected is
// brokerAccess's and brokerGuard's.) mochi asks it after the other hooks'
// OnConnect: those that would end a session for a CONNECT, or refuse it
// for what is not its login, ask allowed first.
type brokerAuth struct {
	mqtt.HookBase
	cfg   Config
	own   [2]string
	refer *refusals
}

func (h *brokerAuth) ID() string { return "cairn-auth" }

func (h *brokerAuth) Provides(b byte) bool { return b == mqtt.OnConnectAuthenticate }

func (h *brokerAuth) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	if h.allowed(cl, pk) {
		return true
	}
	h.refer.noteClient(cl, "embedded broker refused a client: failed login", 1)
	return false
}

func (h *brokerAuth) allowed(cl *mqtt.Client, pk packets.Packet) bool {
	user, password := string(pk.Connect.Username), pk.Connect.Password
	switch {
	case isAgent(cl):
		return user == h.own[0] && subtle.ConstantTimeCompare(password, []byte(h.own[1])) == 1
	case user == h.own[0]:
		return false // the agent's credentials, elsewhere than on its socket
	case h.cfg.OwnClientIDs != "" && strings.HasPrefix(cl.ID, h.cfg.OwnClientIDs):
		return false // the agent's own session, claimed by another
	case user == "" && !pk.Connect.UsernameFlag:
		return h.cfg.AllowAnonymous
	}
	want, ok := h.cfg.Users[user]
	return ok && subtle.ConstantTimeCompare(password, []byte(want)) == 1
}
