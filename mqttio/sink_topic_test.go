package mqttio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// rejects is a subtask's Output that keeps what its operator rejects
// outside ProcessRecord (graph.Rejecter), as the runtime's hands it on.
type rejects struct {
	mu  sync.Mutex
	got []string
}

func (r *rejects) Emit(*graph.Record) {}

func (r *rejects) Reject(rec *graph.Record, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s=%v: %v", rec.Key, rec.Value, err))
	return nil
}

func (r *rejects) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// sinkContext is the Context of subtask 0 of sink "out", whose rejections
// go to rj.
func sinkContext(rj *rejects) *graph.Context {
	return graph.NewTaskState(graph.TaskInfo{Operator: "out", Parallelism: 1}, rj).Context()
}

// TestSinkRejectsKeysThatMakeNoTopic: a record whose key makes a topic no
// broker takes (here # and NUL, which both brokers answer by dropping the
// connection) is rejected before it is staged, and the sink publishes the
// records after it, under ids that do not count the rejected ones.
func TestSinkRejectsKeysThatMakeNoTopic(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		ids, got := outputIDs(t, b.url, "badkey-consumer")
		metrics := new(SinkMetrics)
		s := NewSink(SinkConfig{Client: ClientConfig{Broker: b.url, ClientID: "badkey"}, Topic: "out/{key}/count", Metrics: metrics})(0)
		if err := s.Open(sinkContext(new(rejects))); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, k := range []string{"a", "a#b", "c", "d\x00", "1e+21", "e"} {
			err := s.ProcessRecord(0, &graph.Record{Key: k, Value: 1})
			var rejected *graph.RecordError
			switch {
			case k == "a#b":
				if !errors.As(err, &rejected) || err.Error() != `sink out: topic "out/a#b/count" is not a valid MQTT topic: contains the wildcard #` {
					t.Fatalf("key %q: %v, want it rejected for the #", k, err)
				}
			case strings.ContainsAny(k, "+\x00"):
				if !errors.As(err, &rejected) {
					t.Fatalf("key %q: %v, want it rejected", k, err)
				}
			case err != nil:
				t.Fatalf("key %q: %v", k, err)
			}
		}
		if n := metrics.Staged.Load(); n != 3 {
			t.Fatalf("%d records staged, want the 3 with valid topics", n)
		}
		if _, err := s.SnapshotState(1); err != nil {
			t.Fatal(err)
		}
		if err := s.(graph.CheckpointListener).CheckpointComplete(1); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			testwait.Recv(t, got, 10*time.Second, "the outputs of the valid keys")
		}
		if want := []string{"out-1-0-0", "out-1-0-1", "out-1-0-2"}; !slices.Equal(ids(), want) {
			t.Fatalf("ids %v, want %v", ids(), want)
		}
	})
}

// TestSinkRefusesATopicNoKeyMakesValid: a topic with a wildcard in it
// fails Open, before the sink connects: the sink is broken, not a record.
func TestSinkRefusesATopicNoKeyMakesValid(t *testing.T) {
	s := NewSink(SinkConfig{Client: ClientConfig{Broker: "tcp://127.0.0.1:1"}, Topic: "out/#/{key}"})(0)
	err := s.Open(nil)
	var te *TopicError
	if !errors.As(err, &te) || te.At != 4 {
		t.Fatalf("Open = %v, want the # refused", err)
	}
}

// TestSinkDropsRestoredTopicsNoBrokerTakes restores output that a cairn
// staged before it checked topics: the messages with topics no broker
// takes are rejected (graph.Context.Reject) instead of being sent after
// every reconnection, and the others are published, in order, with the
// ids they were staged with.
func TestSinkDropsRestoredTopicsNoBrokerTakes(t *testing.T) {
	stage := func(checkpoint uint64, keys ...string) *batch {
		b := &batch{checkpoint: checkpoint}
		for i, k := range keys {
			body, err := json.Marshal(Output{Key: k, Value: float64(i)})
			if err != nil {
				t.Fatal(err)
			}
			b.add([]string{"out/", ""}, k, body[len(`{"id":""`):])
		}
		b.seal()
		return b
	}
	old := []*batch{stage(7, "a", "b#", "c", "d\x00", "e"), stage(8, "+", "f"), stage(9, "g")}
	old[0].drop() // "a" was acknowledged before the crash
	state := bytes.Join(encodeBatches(numbering{}, old), nil)

	forEachBroker(t, func(t *testing.T, b testBroker) {
		ids, got := outputIDs(t, b.url, "restore-consumer")
		metrics := new(SinkMetrics)
		s := NewSink(SinkConfig{Client: ClientConfig{Broker: b.url, ClientID: "restore"}, Topic: "out/{key}", Metrics: metrics})(0)
		rj := new(rejects)
		if err := s.Open(sinkContext(rj)); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.RestoreState(state); err != nil {
			t.Fatal(err)
		}
		want := []string{
			`b#=1: sink out: topic "out/b#" is not a valid MQTT topic: contains the wildcard # (output 7-0-1, staged by a cairn before it checked topics; not published)`,
			`d` + "\x00" + `=3: sink out: topic "out/d\x00" is not a valid MQTT topic: contains NUL (U+0000) (output 7-0-3, staged by a cairn before it checked topics; not published)`,
			`+=0: sink out: topic "out/+" is not a valid MQTT topic: contains the wildcard + (output 8-0-0, staged by a cairn before it checked topics; not published)`,
		}
		if got := rj.list(); !slices.Equal(got, want) {
			t.Fatalf("rejected\n%q\nwant\n%q", got, want)
		}
		for range 4 {
			testwait.Recv(t, got, 10*time.Second, "the restored outputs with valid topics")
		}
		if want := []string{"7-0-2", "7-0-4", "8-0-1", "9-0-0"}; !slices.Equal(ids(), want) {
			t.Fatalf("ids %v, want %v", ids(), want)
		}
		// All acknowledged: the state holds no batch.
		if !testwait.Poll(10*time.Second, func() bool { return metrics.Published.Load() >= 4 }) {
			t.Fatalf("%d acknowledged, want 4", metrics.Published.Load())
		}
		data, err := s.SnapshotState(10)
		if _, left, derr := decodeBatches(data, 0); err != nil || derr != nil || len(left) != 0 {
			t.Fatalf("state after all was acknowledged: %d batches, %v, %v", len(left), err, derr)
		}
	})
}
