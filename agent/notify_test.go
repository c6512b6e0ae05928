package agent

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNotifier: the environment decides where the messages go and how
// often the watchdog wants them; a NOTIFY_SOCKET the protocol does not
// define (vsock:, a relative path) is refused with a warning, and no
// message is sent.
func TestNotifier(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range []struct {
		socket, usec, pid string
		watchdog          time.Duration
		warns             bool
	}{
		{path, "5000000", "", 2500 * time.Millisecond, false},
		{path, "5000000", strconv.Itoa(os.Getpid()), 2500 * time.Millisecond, false},
		{path, "5000000", "1", 0, false}, // another process's watchdog
		{path, "", "", 0, false},
		{"", "5000000", "", 0, false},
		{"vsock:2:1234", "5000000", "", 0, true},
		{"run/notify", "5000000", "", 0, true},
	} {
		t.Setenv("NOTIFY_SOCKET", c.socket)
		t.Setenv("WATCHDOG_USEC", c.usec)
		t.Setenv("WATCHDOG_PID", c.pid)
		logged.Reset()
		n := newNotifier(log)
		if n.Watchdog() != c.watchdog || (logged.Len() > 0) != c.warns {
			t.Errorf("%+v: watchdog every %v, log %q", c, n.Watchdog(), logged.String())
		}
		n.Ready("running")
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 512)
		k, err := conn.Read(buf)
		if sends := c.socket == path; sends && string(buf[:k]) != "READY=1\nSTATUS=running\n" || !sends && err == nil {
			t.Errorf("%+v: received %q (%v)", c, buf[:k], err)
		}
	}
	var none *notifier
	none.Ping() // a nil notifier sends nothing, and does not panic
	if none.Watchdog() != 0 {
		t.Error("a nil notifier wants pings")
	}
}
