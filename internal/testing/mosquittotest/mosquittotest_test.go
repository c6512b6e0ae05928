package mosquittotest

import (
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestSubscriptions: the broker keeps each filter a client subscribes
// to, also one its session holds already, and nothing else of its log.
func TestSubscriptions(t *testing.T) {
	b := Start(t, t.TempDir(), nil)
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(b.URL, "tcp://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// exchange sends an MQTT 3.1.1 packet of type typ and reads the
	// answer, of n bytes.
	exchange := func(typ byte, body string, n int) {
		t.Helper()
		if _, err := c.Write(append([]byte{typ, byte(len(body))}, body...)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	exchange(0x10, "\x00\x04MQTT\x04\x00\x00\x1e\x00\x0asubscriber", 4) // CONNECT, a persistent session; CONNACK
	want := []Subscription{{"subscriber", 1, "a/+/b"}, {"subscriber", 0, "c/#"}, {"subscriber", 1, "a/+/b"}}
	for i, s := range want {
		exchange(0x82, string([]byte{0, byte(i + 1), 0, byte(len(s.Filter))})+s.Filter+string(byte(s.QoS)), 5) // SUBSCRIBE; SUBACK
	}
	testwait.For(t, 10*time.Second, "the subscriptions logged", func() bool { return slices.Equal(b.Subscriptions(), want) })
}

// TestSubscription takes the lines of the type subscribe of mosquitto's
// log, and not the others.
func TestSubscription(t *testing.T) {
	for line, want := range map[string]Subscription{
		"1796588130: fb-readings-0 1 fb/+/t":                                        {"fb-readings-0", 1, "fb/+/t"},
		"1796588130: x 0 a filter with blanks":                                      {"x", 0, "a filter with blanks"},
		"1796588129: mosquitto version 2.0.11 running":                              {},
		"1796588130: New client connected from 127.0.0.1:40000 as x (p2, c0, k30).": {},
		"1796588130: Client x disconnected.":                                        {},
		"no time":                                                                   {},
	} {
		if got, ok := subscription(line); got != want || ok != (want != Subscription{}) {
			t.Errorf("%q: %+v, %v; want %+v", line, got, ok, want)
		}
	}
}
