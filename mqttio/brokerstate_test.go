package mqttio

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestBrokerStateOfAClient connects a client first to a port where no
// broker listens, with a password in the URL: its failures are logged at
// the 1st, 2nd and 4th in a row, without the password, and its state says
// it is down with the error; then to the embedded broker: it says it is
// up.
func TestBrokerStateOfAClient(t *testing.T) {
	var log testlog.Buffer
	state := new(BrokerState)
	cfg := ClientConfig{Broker: "tcp://cairn:s3cret@127.0.0.1:1", ClientID: "state", Name: "plant", State: state,
		Logger: slog.New(slog.NewTextHandler(&log, nil))}
	down, _, err := cfg.connect("-down", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Disconnect(0)
	testwait.For(t, 20*time.Second, "four failed attempts", func() bool {
		return strings.Count(log.String(), "MQTT connect failed") == 3 && strings.Contains(log.String(), "failures=4")
	})
	if got := log.String(); strings.Contains(got, "s3cret") || !strings.Contains(got, "broker=plant url=tcp://cairn:xxxxx@127.0.0.1:1 client=state-down failures=1 err=") ||
		!strings.Contains(got, "failures=2") || strings.Contains(got, "failures=3") {
		t.Fatalf("the log of the failed attempts:\n%s", got)
	}
	st := state.Status()
	if st.Clients != 1 || st.Connected != 0 || !strings.Contains(st.LastError, "refused") || st.LastErrorAt.IsZero() {
		t.Fatalf("state of a client that cannot connect: %+v", st)
	}

	b := embeddedBroker(t)
	u, _ := url.Parse(b.url)
	u.User = url.UserPassword("cairn", "s3cret")
	cfg.Broker = u.String()
	up, _, err := cfg.connect("-up", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Disconnect(0)
	// The state changes before the connection is logged: wait for both.
	testwait.For(t, 20*time.Second, "the second client connected", func() bool {
		return state.Status().Connected == 1 && strings.Contains(log.String(), `msg="MQTT connected"`)
	})
	if st := state.Status(); st.Clients != 2 {
		t.Fatalf("state of one client up and one down: %+v", st)
	}
	if got := log.String(); strings.Contains(got, "s3cret") || !strings.Contains(got, `msg="MQTT connected" broker=tcp://cairn:xxxxx@`) {
		t.Fatalf("the log of the connection:\n%s", got)
	}
}
