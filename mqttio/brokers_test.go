package mqttio

import (
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
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

// embeddedBroker starts the embedded server, package broker's, which
// lets in anonymous clients, and the user cairn with the password s3cret
// (StartEmbedded).
func embeddedBroker(t testing.TB) testBroker {
	return testBroker{url: StartEmbedded(t)}
}

// mosquittoBroker starts mosquitto (internal/testing/mosquittotest), or skips the
// test when it is not installed and not required.
func mosquittoBroker(t testing.TB) testBroker {
	b := mosquittotest.Start(t, t.TempDir(), nil)
	return testBroker{url: b.URL, restart: func() {
		if err := b.Restart(); err != nil {
			t.Fatal(err)
		}
	}}
}

// forEachBroker runs f against the embedded broker and mosquitto.
func forEachBroker(t *testing.T, f func(t *testing.T, b testBroker)) {
	t.Run("embedded", func(t *testing.T) { f(t, embeddedBroker(t)) })
	t.Run("mosquitto", func(t *testing.T) { f(t, mosquittoBroker(t)) })
}
