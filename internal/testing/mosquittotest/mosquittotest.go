// Package mosquittotest starts a real mosquitto, on a free loopback port:
// for tests (Start), configured as docs/mqtt.md asks of a broker for cairn —
// queue limits raised (a default mosquitto drops QoS 1 messages for a
// subscriber more than 1000 behind) and sessions kept across restarts —
// and for the benchmarks (Run), with the settings they measure under; and
// a Gate in front of one, which holds clients' connections while a test
// does what must come before they reconnect. A Broker keeps the
// subscriptions it logs (Subscriptions), so that a test can wait for a
// client's subscription instead of publishing until one gets through.
//
// Without mosquitto installed, a test that asks for one is skipped, unless
// CAIRN_REQUIRE_MOSQUITTO is set (as in CI): then its absence fails it.
package mosquittotest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/loopback"
	"github.com/cairn-edge/cairn/internal/testing/needs"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestSettings are the tests' settings: queues raised, sessions kept.
const TestSettings = `persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 1000000
max_inflight_messages 1000
`

// conf is a configuration's start: the listener, and the log on stderr,
// subscriptions included (Broker.Subscriptions).
const conf = `listener %d 127.0.0.1
allow_anonymous true
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
log_type subscribe
`

// Broker is a running mosquitto.
type Broker struct {
	URL  string // tcp://127.0.0.1:port
	path string
	conf string
	log  io.Writer // what every incarnation writes
	cmd  *exec.Cmd

	mu   sync.Mutex
	subs []Subscription // what every incarnation logged
}

// Subscription is one filter of a SUBSCRIBE the broker handled, as it
// logged it.
type Subscription struct {
	Client string // the client's id
	QoS    int
	Filter string
}

// Subscriptions returns the filters the broker's clients subscribed to,
// in the order it handled them, over its restarts: each filter of each
// SUBSCRIBE, also one that the client's session held already. Once a
// client's subscription is among them, a message published to its filter
// from then on reaches the client's session: mosquitto handles one packet
// at a time and logs a filter once it is subscribed.
func (b *Broker) Subscriptions() []Subscription {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.subs)
}

// subscription parses a line of mosquitto's log of the type subscribe,
// "<time>: <client> <qos> <filter>"; ok is false for a line of any other
// type, but for one of three words whose second is 0, 1 or 2 ("Client 1
// disconnected."), which takes a filter no one subscribes to.
func subscription(line string) (s Subscription, ok bool) {
	_, rest, ok := strings.Cut(line, ": ")
	if !ok {
		return s, false
	}
	f := strings.SplitN(rest, " ", 3)
	if len(f) != 3 || len(f[1]) != 1 || f[1][0] < '0' || f[1][0] > '2' || f[2] == "" {
		return s, false
	}
	return Subscription{Client: f[0], QoS: int(f[1][0] - '0'), Filter: f[2]}, true
}

// Start runs mosquitto with TestSettings and its persistence in dir,
// writing its log to log (discarded when nil), and stops it when the test
// ends.
func Start(t testing.TB, dir string, log io.Writer) *Broker {
	t.Helper()
	Require(t)
	b, err := Run(dir, fmt.Sprintf(TestSettings, dir), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return b
}

// Require skips the test when mosquitto is not installed, or fails it if
// CAIRN_REQUIRE_MOSQUITTO is set (package needs).
func Require(t testing.TB) {
	t.Helper()
	if _, err := Binary(); err != nil {
		needs.Missing(t, "mosquitto", "apt-get install mosquitto", "CAIRN_REQUIRE_MOSQUITTO")
	}
}

// Run runs mosquitto with settings (configuration lines; none: its
// defaults), its files in dir, writing its log to log (discarded when
// nil). The caller stops it.
func Run(dir, settings string, log io.Writer) (*Broker, error) {
	path, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf(conf, port) + settings
	if os.Geteuid() == 0 {
		text += "user root\n" // otherwise it drops to a user who cannot write dir
	}
	if log == nil {
		log = io.Discard
	}
	b := &Broker{URL: fmt.Sprintf("tcp://127.0.0.1:%d", port), path: path, conf: filepath.Join(dir, "mosquitto.conf"), log: log}
	if err := os.WriteFile(b.conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

// Binary finds mosquitto.
func Binary() (string, error) {
	if path, err := exec.LookPath("mosquitto"); err == nil {
		return path, nil
	}
	for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("mosquitto is not installed")
}

// start runs mosquitto and returns once it says it is running. It may run
// on any goroutine.
func (b *Broker) start() error {
	b.cmd = exec.Command(b.path, "-c", b.conf)
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := b.cmd.Start(); err != nil {
		return err
	}
	running := make(chan struct{})
	seen := make(chan string, 1) // what it said, if it did not start
	go func() {
		var lines []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(b.log, sc.Text())
			if strings.Contains(sc.Text(), " running") {
				close(running)
				b.follow(sc)
				io.Copy(b.log, stderr) // the rest of a line too long to scan
				return
			}
			lines = append(lines, sc.Text())
		}
		seen <- strings.Join(lines, "\n")
	}()
	select {
	case <-running:
		return nil
	case said := <-seen:
		b.cmd.Wait()
		b.cmd = nil
		return fmt.Errorf("mosquitto exited before it was running:\n%s", said)
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		b.cmd.Wait()
		b.cmd = nil
		return fmt.Errorf("mosquitto did not start within 10s:\n%s", <-seen)
	}
}

// follow writes the lines of a running mosquitto's log to b.log, keeping
// the subscriptions.
func (b *Broker) follow(sc *bufio.Scanner) {
	for sc.Scan() {
		fmt.Fprintln(b.log, sc.Text())
		if s, ok := subscription(sc.Text()); ok {
			b.mu.Lock()
			b.subs = append(b.subs, s)
			b.mu.Unlock()
		}
	}
}

// Pid is the running mosquitto's process id (0 if it is stopped): a
// benchmark counts its CPU time.
func (b *Broker) Pid() int {
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Stop stops mosquitto gracefully: on SIGTERM it saves its sessions. A
// SIGTERM that comes just as it says it is running can go unheeded (it
// hung a CI run for 9 minutes), so it is sent again every second until
// mosquitto ends, for 10 seconds; then it is killed.
func (b *Broker) Stop() {
	if b.cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		b.cmd.Wait()
		close(done)
	}()
	for try := 0; ; try++ {
		sig := syscall.SIGTERM
		if try == 10 {
			sig = syscall.SIGKILL
		}
		b.cmd.Process.Signal(sig)
		select {
		case <-done:
			b.cmd = nil
			return
		case <-time.After(time.Second):
		}
	}
}

// Restart stops mosquitto and starts it again on the same port; sessions
// and their queued messages survive. While the port is taken meanwhile (a
// client reconnecting to the stopped broker can be given that very port as
// its own, and connect to itself until it sees no CONNACK), it tries again
// for up to 10s.
func (b *Broker) Restart() error {
	b.Stop()
	var err error
	testwait.Poll(10*time.Second, func() bool {
		err = b.start()
		return err == nil || !strings.Contains(err.Error(), "Address already in use")
	})
	return err
}

// Gate is a TCP proxy in front of a broker that a test shuts and opens:
// while it is shut it takes connections but holds them, unanswered, until
// it opens, and Shut also cuts the connections it forwards. A test uses it
// to order its own publishing before a client's reconnection, by an event
// rather than by the client's backoff.
type Gate struct {
	URL  string // tcp://127.0.0.1:port, the gate's
	to   string // the broker's host:port
	ln   net.Listener
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
	cut  chan struct{} // closed by Shut: ends the connections forwarded
}

// NewGate starts an open gate to the broker at url (tcp://host:port) and
// closes it when the test ends.
func NewGate(t testing.TB, url string) *Gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{URL: "tcp://" + ln.Addr().String(), to: strings.TrimPrefix(url, "tcp://"), ln: ln,
		open: make(chan struct{}), cut: make(chan struct{})}
	close(g.open)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.forward(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		g.Open() // releases the connections held
		g.Shut() // and ends them
	})
	return g
}

// Shut cuts the connections through the gate and holds new ones until
// Open.
func (g *Gate) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
	close(g.cut)
	g.cut = make(chan struct{})
}

// Open lets the connections held through, and new ones.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// forward holds c while the gate is shut, then joins it to the broker
// until either side ends or the gate is shut.
func (g *Gate) forward(c net.Conn) {
	defer c.Close()
	for {
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		<-open
		g.mu.Lock()
		if open == g.open { // not shut again meanwhile
			break
		}
		g.mu.Unlock()
	}
	cut := g.cut
	g.mu.Unlock()
	up, err := net.Dial("tcp", g.to)
	if err != nil {
		return
	}
	defer up.Close()
	ended := make(chan struct{}, 2)
	go func() { io.Copy(up, c); ended <- struct{}{} }()
	go func() { io.Copy(c, up); ended <- struct{}{} }()
	select {
	case <-ended:
	case <-cut:
	}
}
