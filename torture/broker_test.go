//go:build torture

package torture

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mosquittoConf raises the limits a default mosquitto has (it would drop
// QoS 1 messages for a subscriber more than 1000 behind) and keeps sessions
// across restarts, as the README asks of a broker for cairn.
const mosquittoConf = `listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 1000000
max_inflight_messages 1000
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
`

// broker is a mosquitto the harness starts, stops and restarts.
type broker struct {
	path string // the mosquitto binary
	conf string
	log  *os.File // everything every incarnation wrote
	url  string
	cmd  *exec.Cmd
}

// startMosquitto starts mosquitto on a free loopback port. Without
// mosquitto the test is skipped, unless CAIRN_REQUIRE_MOSQUITTO is set (as
// in CI): then its absence is a failure.
func startMosquitto(t testing.TB, dir string) *broker {
	path, err := exec.LookPath("mosquitto")
	if err != nil {
		for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
			if _, serr := os.Stat(p); serr == nil {
				path, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CAIRN_REQUIRE_MOSQUITTO") != "" {
			t.Fatal("mosquitto is required (CAIRN_REQUIRE_MOSQUITTO) but not installed")
		}
		t.Skip("mosquitto is not installed")
	}
	port := freePort(t)
	text := fmt.Sprintf(mosquittoConf, port, dir)
	if os.Geteuid() == 0 {
		text += "user root\n" // otherwise it drops to a user who cannot write dir
	}
	b := &broker{path: path, conf: filepath.Join(dir, "mosquitto.conf"), url: fmt.Sprintf("tcp://127.0.0.1:%d", port)}
	if err := os.WriteFile(b.conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if b.log, err = os.Create(filepath.Join(dir, "mosquitto.log")); err != nil {
		t.Fatal(err)
	}
	if err := b.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.stop()
		b.log.Close()
	})
	return b
}

// start runs mosquitto and returns once it says it is running. It may run
// on any goroutine.
func (b *broker) start() error {
	b.cmd = exec.Command(b.path, "-c", b.conf)
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := b.cmd.Start(); err != nil {
		return err
	}
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(b.log, sc.Text())
			if strings.Contains(sc.Text(), " running") {
				close(running)
				break
			}
		}
		io.Copy(b.log, stderr)
	}()
	select {
	case <-running:
		return nil
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		b.cmd.Wait()
		b.cmd = nil
		return fmt.Errorf("mosquitto did not start within 10s; its log is %s", b.log.Name())
	}
}

// stop stops mosquitto gracefully: SIGTERM makes it save its sessions.
func (b *broker) stop() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.cmd.Wait()
	b.cmd = nil
}

// restart stops the broker and starts it again on the same port; the
// sessions and their queued messages survive.
func (b *broker) restart() error {
	b.stop()
	return b.start()
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
