package mqttio

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// TestSinkPublishesOnlyCompletedCheckpoints: a checkpoint's output goes out
// only once a checkpoint at or after it completes (invariants I4, I7), in
// checkpoint order; an aborted checkpoint's output waits for a later
// completion instead of being lost; what has gone out leaves the state.
func TestSinkPublishesOnlyCompletedCheckpoints(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		ids, got := outputIDs(t, b.url, "commit-consumer")
		metrics := new(SinkMetrics)
		s := NewSink(SinkConfig{Client: ClientConfig{Broker: b.url, ClientID: "commit"}, Topic: "out/{key}", Metrics: metrics})(0)
		listener := s.(graph.CheckpointListener)
		if err := s.Open(nil); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		snapshot := func(id uint64, keys ...string) []byte {
			for _, k := range keys {
				if err := s.ProcessRecord(0, &graph.Record{Key: k, Value: 1}); err != nil {
					t.Fatal(err)
				}
			}
			state, err := s.SnapshotState(id)
			if err != nil {
				t.Fatal(err)
			}
			return state
		}
		snapshot(1, "a", "b")
		snapshot(2, "c")
		snapshot(3, "d")
		listener.CheckpointAborted(2)
		if err := listener.CheckpointComplete(1); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			testwait.Recv(t, got, 10*time.Second, "checkpoint 1's output")
		}
		// The batches of 2 and 3 are still in the state, whole: nothing
		// of them was acknowledged. (Checkpoint 1's may be there too, until
		// the broker's acknowledgements arrive.)
		_, left, err := decodeBatches(snapshot(4), 0)
		if err != nil {
			t.Fatal(err)
		}
		var waiting []uint64
		for _, bt := range left {
			if bt.checkpoint > 1 {
				if bt.seq != 0 {
					t.Fatalf("checkpoint %d's batch starts at message %d: published before its checkpoint completed", bt.checkpoint, bt.seq)
				}
				waiting = append(waiting, bt.checkpoint)
			}
		}
		if !slices.Equal(waiting, []uint64{2, 3}) {
			t.Fatalf("state after completing 1 waits with checkpoints %v, want 2 and 3", waiting)
		}
		if n := metrics.Published.Load(); n > 2 {
			t.Fatalf("%d acknowledged after completing checkpoint 1, want at most its 2", n)
		}
		if err := listener.CheckpointComplete(3); err != nil { // subsumes the aborted 2
			t.Fatal(err)
		}
		for range 2 {
			testwait.Recv(t, got, 10*time.Second, "the output of checkpoints 2 and 3")
		}
		// One numbering, begun at checkpoint 1, across the checkpoints.
		if want := []string{"sink-1-0-0", "sink-1-0-1", "sink-1-0-2", "sink-1-0-3"}; !slices.Equal(ids(), want) {
			t.Fatalf("ids %v, want %v", ids(), want)
		}
	})
}

// outputIDs subscribes a consumer to out/# and returns the ids of the
// outputs it received so far, and a channel that gets a value per output.
func outputIDs(t *testing.T, url, clientID string) (func() []string, <-chan struct{}) {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	got := make(chan struct{}, 64)
	c := client(t, url, clientID, true)
	t.Cleanup(func() { c.Disconnect(100) })
	if tok := c.Subscribe("out/#", 1, func(_ paho.Client, m paho.Message) {
		var out Output
		if err := json.Unmarshal(m.Payload(), &out); err != nil {
			t.Errorf("bad output %q: %v", m.Payload(), err)
		}
		mu.Lock()
		ids = append(ids, withoutHash(t, out.ID, m.Payload()))
		mu.Unlock()
		got <- struct{}{}
	}); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ids)
	}, got
}

// withoutHash checks that id, the id of payload, ends in the hash of the
// body after it (outputID), if it is of the kind that does, and returns it
// without.
func withoutHash(t *testing.T, id string, payload []byte) string {
	t.Helper()
	i := strings.LastIndexByte(id, '-')
	if strings.Count(id, "-") < 4 || len(id)-i-1 != 16 {
		return id // an id of a cairn before numberings
	}
	body := payload[len(`{"id":"`)+len(id)+1:]
	if want := string(outputID(nil, "", &batch{epoch: 1}, 0, body)); !strings.HasSuffix(want, id[i:]) {
		t.Errorf("id %s does not end in the hash of its body %s (%s)", id, body, want)
	}
	return id[:i]
}

// TestSinkSendsNothingUncommitted drives the publisher's cursor by hand:
// it yields the messages of completed checkpoints only, in order, and a
// later completion (here after an abort) lets the rest through.
func TestSinkSendsNothingUncommitted(t *testing.T) {
	s := NewSink(SinkConfig{Topic: "out/{key}"})(0).(*sink)
	for id, keys := range [][]string{1: {"a", "b"}, 2: {"c"}, 3: {"d"}} {
		if id == 0 {
			continue
		}
		for _, k := range keys {
			if err := s.ProcessRecord(0, &graph.Record{Key: k, Value: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.SnapshotStateParts(uint64(id)); err != nil {
			t.Fatal(err)
		}
	}
	sendable := func(c *cursor) []string {
		var out []string
		for {
			b, seq, topic, _, ok, err := s.advance(c)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return out
			}
			out = append(out, fmt.Sprintf("%d-%d %s", b.checkpoint, seq, topic))
		}
	}
	var c cursor
	if got := sendable(&c); len(got) != 0 {
		t.Fatalf("sendable before any completion: %v", got)
	}
	s.CheckpointComplete(1)
	if got, want := sendable(&c), []string{"1-0 out/a", "1-1 out/b"}; !slices.Equal(got, want) {
		t.Fatalf("sendable after completing 1: %v, want %v", got, want)
	}
	s.CheckpointAborted(2)
	if got := sendable(&c); len(got) != 0 {
		t.Fatalf("sendable after aborting 2: %v", got)
	}
	s.CheckpointComplete(3)
	if got, want := sendable(&c), []string{"2-0 out/c", "3-0 out/d"}; !slices.Equal(got, want) {
		t.Fatalf("sendable after completing 3: %v, want %v", got, want)
	}
}
