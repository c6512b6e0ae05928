package agent

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// notifier speaks systemd's notification protocol (sd_notify(3)) to the
// service manager that started the agent with Type=notify: each message
// is one datagram of NAME=value lines to the Unix socket NOTIFY_SOCKET
// names, a path or, starting with @, an abstract socket. Without
// NOTIFY_SOCKET, the agent not being run by a service manager that wants
// to hear, it sends nothing. The agent says READY=1 once its pipeline
// runs, RELOADING=1 and again READY=1 around a reload, STOPPING=1 when it
// stops, STATUS= what it does, and WATCHDOG=1 every Watchdog from its
// event loop when the manager asks for pings (WATCHDOG_USEC, for this
// process: WATCHDOG_PID).
//
// A nil *notifier sends nothing.
type notifier struct {
	socket string // "" sends nothing
	// watchdog is how often to ping: half of WATCHDOG_USEC, as
	// sd_watchdog_enabled(3) advises; 0 when no ping is wanted.
	watchdog time.Duration
	log      *slog.Logger
	failed   bool // a send failed: said once in the log
}

// newNotifier reads the protocol's variables from the environment.
func newNotifier(log *slog.Logger) *notifier {
	n := &notifier{socket: os.Getenv("NOTIFY_SOCKET"), log: log}
	if n.socket != "" && !strings.HasPrefix(n.socket, "/") && !strings.HasPrefix(n.socket, "@") {
		log.Warn("NOTIFY_SOCKET is neither a path nor an abstract socket (@name): the service manager is not told of readiness", "NOTIFY_SOCKET", n.socket)
		n.socket = ""
	}
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	pid := os.Getenv("WATCHDOG_PID")
	if n.socket != "" && err == nil && usec > 0 && (pid == "" || pid == strconv.Itoa(os.Getpid())) {
		n.watchdog = time.Duration(usec) * time.Microsecond / 2
	}
	return n
}

// send sends one message of the lines given, if there is a socket to
// send it to. A failure is logged once: the pipeline does not depend on
// it (but a watchdog left without pings will restart the agent).
func (n *notifier) send(lines ...string) {
	if n == nil || n.socket == "" {
		return
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err == nil {
		_, err = conn.Write([]byte(strings.Join(lines, "\n") + "\n"))
		conn.Close()
	}
	if err != nil && !n.failed {
		n.log.Warn("cannot notify the service manager", "NOTIFY_SOCKET", n.socket, "err", err)
	}
	n.failed = n.failed || err != nil
}

// Ready says the pipeline runs, and what it does.
func (n *notifier) Ready(status string) { n.send("READY=1", "STATUS="+status) }

// Reloading says a reload began: systemd's notify-reload protocol wants
// the time it began on CLOCK_MONOTONIC with it, and READY=1 at its end.
func (n *notifier) Reloading(status string) {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	n.send("RELOADING=1", "MONOTONIC_USEC="+strconv.FormatInt(ts.Nano()/1000, 10), "STATUS="+status)
}

// Stopping says the agent stops.
func (n *notifier) Stopping(status string) { n.send("STOPPING=1", "STATUS="+status) }

// Status says what the agent does.
func (n *notifier) Status(format string, args ...any) {
	n.send("STATUS=" + fmt.Sprintf(format, args...))
}

// Watchdog is how often the event loop should Ping: 0 for never.
func (n *notifier) Watchdog() time.Duration {
	if n == nil {
		return 0
	}
	return n.watchdog
}

// Ping tells the watchdog the event loop goes round.
func (n *notifier) Ping() { n.send("WATCHDOG=1") }
