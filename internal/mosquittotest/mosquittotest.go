// Package mosquittotest starts a real mosquitto, on a free loopback port:
// for tests (Start), configured as the README asks of a broker for cairn —
// queue limits raised (a default mosquitto drops QoS 1 messages for a
// subscriber more than 1000 behind) and sessions kept across restarts —
// and for the benchmarks (Run), with the settings they measure under.
//
// Without mosquitto installed, a test that asks for one is skipped, unless
// CAIRN_REQUIRE_MOSQUITTO is set (as in CI): then its absence fails it.
package mosquittotest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/loopback"
)

// TestSettings are the tests' settings: queues raised, sessions kept.
const TestSettings = `persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 1000000
max_inflight_messages 1000
`

// conf is a configuration's start: the listener, and the log on stderr.
const conf = `listener %d 127.0.0.1
allow_anonymous true
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
`

// Broker is a running mosquitto.
type Broker struct {
	URL  string // tcp://127.0.0.1:port
	path string
	conf string
	log  io.Writer // what every incarnation writes
	cmd  *exec.Cmd
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
// CAIRN_REQUIRE_MOSQUITTO is set.
func Require(t testing.TB) {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CAIRN_REQUIRE_MOSQUITTO") != "" {
			t.Fatal("mosquitto is required (CAIRN_REQUIRE_MOSQUITTO) but not installed")
		}
		t.Skip("mosquitto is not installed")
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
				io.Copy(b.log, stderr)
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := b.start()
		if err == nil || !strings.Contains(err.Error(), "Address already in use") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // a retry's pause
	}
}
