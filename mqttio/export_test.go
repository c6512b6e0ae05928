package mqttio

import (
	"sync/atomic"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

// MosquittoURL starts a mosquitto for the test (see mosquittoBroker) and
// returns its URL, for the package's external tests.
func MosquittoURL(t testing.TB) string { return mosquittoBroker(t).url }

// StartEmbedded starts the embedded server (package broker) for the test
// and returns its URL; embedded_test.go sets it. Package broker imports
// this one, so only the package's external tests may import it.
var StartEmbedded func(t testing.TB) string

// counter signals when a target number of records has reached it.
type counter struct {
	graph.BaseOperator
	n      *atomic.Int64
	target *atomic.Int64
	done   chan struct{}
}

func (c counter) ProcessRecord(int, *graph.Record) error {
	if c.n.Add(1) == c.target.Load() {
		c.done <- struct{}{}
	}
	return nil
}
