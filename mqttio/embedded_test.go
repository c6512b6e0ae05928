package mqttio_test

import (
	"testing"

	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/mqttio"
)

// The package's tests run against the embedded server too
// (forEachBroker), whose package imports this one: an external test
// starts it for them.
func init() {
	mqttio.StartEmbedded = func(t testing.TB) string {
		b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", AllowAnonymous: true, Users: map[string]string{"cairn": "s3cret"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b.URL()
	}
}
