package mqttio

import (
	"slices"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph"
)

// TestSinkRestoresStatesOfOtherSubtasks restores, into one sink subtask,
// the staged batches of two old ones (a parallelism of 2 scaled down to 1):
// each message is published with the id its own subtask gave it, so a
// consumer drops what was published before the restore, and batches come
// out in checkpoint order.
func TestSinkRestoresStatesOfOtherSubtasks(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b testBroker) {
		cfg := SinkConfig{Client: ClientConfig{Broker: b.url, ClientID: "rescale"}, Topic: "out/{key}"}
		stage := func(subtask int, id uint64, keys ...string) []byte {
			s := NewSink(cfg)(subtask)
			for _, k := range keys {
				if err := s.ProcessRecord(0, &graph.Record{Key: k, Value: 1}); err != nil {
					t.Fatal(err)
				}
			}
			data, err := s.SnapshotState(id)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		old0, old1 := stage(0, 7, "a", "b"), stage(1, 5, "c")

		ids, got := outputIDs(t, b.url, "rescale-consumer")

		s := NewSink(cfg)(0)
		if err := s.Open(nil); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.(graph.RescalableState).RestoreStates([][]byte{old0, old1}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("published %v, want 3 messages", ids())
			}
		}
		if want := []string{"sink-5-1-0", "sink-7-0-0", "sink-7-0-1"}; !slices.Equal(ids(), want) {
			t.Fatalf("ids %v, want %v: each with its old subtask, oldest checkpoint first", ids(), want)
		}
	})
}
