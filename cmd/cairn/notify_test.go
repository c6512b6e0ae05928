package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-edge/cairn/agent"
	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// notifySocket is a service manager's end of sd_notify(3): a unixgram
// socket, bound as systemd binds its own, whose datagrams are kept in
// the order they came, each as its NAME=value lines.
type notifySocket struct {
	name string // as NOTIFY_SOCKET gives it
	msgs chan map[string]string
}

// listenNotify binds a notification socket: an abstract one for a name
// starting with @, else a path.
func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s := &notifySocket{name: name, msgs: make(chan map[string]string, 1000)}
	done := make(chan struct{})
	t.Cleanup(func() { conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msg := make(map[string]string)
			for line := range strings.Lines(string(buf[:n])) {
				k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
				msg[k] = v
			}
			s.msgs <- msg
		}
	}()
	return s
}

// next returns the next message, failing t if none comes within d.
func (s *notifySocket) next(t *testing.T, d time.Duration) map[string]string {
	t.Helper()
	select {
	case msg := <-s.msgs:
		return msg
	case <-time.After(d):
		t.Fatalf("no message on %s within %v", s.name, d)
		return nil
	}
}

// await returns the first message that has key, failing t if none comes
// within d, and how many watchdog pings came before it.
func (s *notifySocket) await(t *testing.T, key string, d time.Duration) (msg map[string]string, pings int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := s.next(t, time.Until(deadline))
		if _, ok := msg[key]; ok {
			return msg, pings
		}
		if msg["WATCHDOG"] == "1" {
			pings++
		}
	}
}

// awaitReady returns the first READY=1 message, failing t if none comes
// within d or p ends first.
func (s *notifySocket) awaitReady(t *testing.T, p *cairntest.Proc, d time.Duration) map[string]string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case msg := <-s.msgs:
			if msg["READY"] == "1" {
				return msg
			}
		case <-p.Ended():
			t.Fatalf("the agent ended (%v) before it sent READY=1:\n%s", p.Wait(), p.Log())
		case <-deadline:
			t.Fatalf("no READY=1 on %s within %v:\n%s", s.name, d, p.Log())
		}
	}
}

// drain returns the messages that came before now: it sends a mark of
// its own and takes what comes before it.
func (s *notifySocket) drain(t *testing.T) []map[string]string {
	t.Helper()
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("TEST_MARK=1\n")); err != nil {
		t.Fatal(err)
	}
	var before []map[string]string
	for {
		msg := s.next(t, 10*time.Second)
		if msg["TEST_MARK"] == "1" {
			return before
		}
		before = append(before, msg)
	}
}

// TestNotify runs the agent as systemd runs a Type=notify service with
// WatchdogSec: READY=1 comes once the pipeline runs and the control socket
// answers, with a STATUS; WATCHDOG=1 at half the watchdog's timeout; a
// reload says RELOADING=1, with the time it began, then READY=1 again; a
// stop says STOPPING=1 before the agent exits. A watchdog meant for
// another process (WATCHDOG_PID) gets no pings, and without NOTIFY_SOCKET
// the agent sends nothing at all.
func TestNotify(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	port := freePort(t)
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(reloadConfig, data, port, "200ms")), 0o600); err != nil {
		t.Fatal(err)
	}
	notify := listenNotify(t, fmt.Sprintf("@cairn-test-notify-%d", os.Getpid()))
	t.Setenv("NOTIFY_SOCKET", notify.name)
	t.Setenv("WATCHDOG_USEC", "200000") // pings every 100 ms
	t.Setenv("WATCHDOG_PID", "")

	p := startAgent(t, bin, file)
	ready := notify.awaitReady(t, p, 30*time.Second)
	if !strings.HasPrefix(ready["STATUS"], "running "+file) {
		t.Fatalf("the readiness message is %q, want READY=1 and a STATUS saying the pipeline runs", ready)
	}
	// Ready means running, listening: the control socket answers at once.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	st, err := api.NewClient(agent.SocketPath(data)).Status(ctx)
	cancel()
	if err != nil || st.State != "running" {
		t.Fatalf("at READY=1 the control socket says %q (%v), want running", st.State, err)
	}
	for pings := 0; pings < 5; pings++ {
		if msg := notify.next(t, 30*time.Second); msg["WATCHDOG"] != "1" || len(msg) != 1 {
			t.Fatalf("between readiness and a reload the agent sent %q; want only WATCHDOG=1", msg)
		}
	}

	var now unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	replaceFile(t, file, fmt.Sprintf(reloadConfig, data, port, "300ms"))
	reloading, _ := notify.await(t, "RELOADING", 30*time.Second)
	began, err := strconv.ParseInt(reloading["MONOTONIC_USEC"], 10, 64)
	if reloading["RELOADING"] != "1" || err != nil || began < now.Nano()/1000 || reloading["STATUS"] == "" {
		t.Fatalf("the reload's message is %q, want RELOADING=1, MONOTONIC_USEC after %d, and a STATUS", reloading, now.Nano()/1000)
	}
	if ready, _ = notify.await(t, "READY", 30*time.Second); ready["READY"] != "1" || !strings.HasPrefix(ready["STATUS"], "running ") {
		t.Fatalf("after the reload the agent sent %q, want READY=1 and a STATUS saying the pipeline runs", ready)
	}
	notify.await(t, "WATCHDOG", 30*time.Second) // the new pipeline's loop pings

	p.Signal(unix.SIGTERM)
	stopping, _ := notify.await(t, "STOPPING", 30*time.Second)
	if stopping["STOPPING"] != "1" || stopping["STATUS"] == "" {
		t.Fatalf("the stop's message is %q, want STOPPING=1 and a STATUS", stopping)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("the agent's exit after SIGTERM: %v\n%s", err, p.Log())
	}

	// A watchdog for another process: readiness, and no ping.
	t.Setenv("WATCHDOG_PID", "1")
	p = startAgent(t, bin, file)
	notify.awaitReady(t, p, 30*time.Second)
	p.Await(t, completeLine, 30*time.Second)
	p.Await(t, completeLine, 30*time.Second) // checkpoints every 100 ms: a second or so
	p.Signal(unix.SIGTERM)
	if _, pings := notify.await(t, "STOPPING", 30*time.Second); pings != 0 {
		t.Errorf("%d watchdog pings with WATCHDOG_PID=1", pings)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("the agent's exit after SIGTERM: %v\n%s", err, p.Log())
	}

	// No NOTIFY_SOCKET: through a start, a reload and a stop, nothing
	// comes to the socket, and the log says nothing of it.
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_PID", "")
	p = startAgent(t, bin, file)
	p.Await(t, regexp.MustCompile(`msg="pipeline running"`), 30*time.Second)
	replaceFile(t, file, fmt.Sprintf(reloadConfig, data, port, "200ms"))
	p.Await(t, regexp.MustCompile(`msg="pipeline running"`), 30*time.Second)
	p.Await(t, completeLine, 30*time.Second)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("the agent's exit after SIGTERM: %v\n%s", err, p.Log())
	}
	if msgs := notify.drain(t); len(msgs) > 0 {
		t.Errorf("without NOTIFY_SOCKET the agent sent %q", msgs)
	}
	if strings.Contains(p.Log(), "NOTIFY_SOCKET") {
		t.Errorf("without NOTIFY_SOCKET the agent logged of it:\n%s", p.Log())
	}
}
