package mqttio

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tests run against the embedded broker always, and against a real
// mosquitto that they start on a free loopback port. Without mosquitto
// those subtests are skipped, unless CAIRN_REQUIRE_MOSQUITTO is set (as in
// CI), which makes its absence a failure.

// testBroker is a broker a test talks to.
type testBroker struct {
	url string
	// restart stops the broker gracefully and starts it again on the same
	// port; sessions persist (mosquitto only).
	restart func()
}

func embeddedBroker(t testing.TB) testBroker {
	b, err := StartBroker("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return testBroker{url: b.URL()}
}

// mosquittoConf raises the limits a default mosquitto has: it would drop
// QoS 1 messages for a subscriber more than 1000 behind, and hold 20 in
// flight. Sessions persist across broker restarts.
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

// mosquittoBroker starts mosquitto, or skips the test when it is not
// installed and not required.
func mosquittoBroker(t testing.TB) testBroker {
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
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	text := fmt.Sprintf(mosquittoConf, port, dir)
	if os.Geteuid() == 0 {
		text += "user root\n" // otherwise it drops to a user who cannot write dir
	}
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	start := func() {
		cmd = exec.Command(path, "-c", conf)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the line that says it is listening.
		running := make(chan struct{})
		var mu sync.Mutex
		var seen []string
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				mu.Lock()
				seen = append(seen, sc.Text())
				mu.Unlock()
				if strings.Contains(sc.Text(), "running") {
					close(running)
					for sc.Scan() {
					}
					return
				}
			}
		}()
		select {
		case <-running:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("mosquitto did not start:\n%s", strings.Join(seen, "\n"))
		}
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM) // saves the persistence file
		cmd.Wait()
	}
	start()
	t.Cleanup(stop)
	return testBroker{url: fmt.Sprintf("tcp://127.0.0.1:%d", port), restart: func() { stop(); start() }}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// forEachBroker runs f against the embedded broker and mosquitto.
func forEachBroker(t *testing.T, f func(t *testing.T, b testBroker)) {
	t.Run("embedded", func(t *testing.T) { f(t, embeddedBroker(t)) })
	t.Run("mosquitto", func(t *testing.T) { f(t, mosquittoBroker(t)) })
}

// waitFor returns what ch delivers, failing the test if nothing comes
// within d; it stands for an event with a deadline, never for a sleep.
func waitFor[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	var zero T
	return zero
}
