package mqttio

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/internal/testing/sample"
)

// sampleBatches are a sink subtask's staged output: a batch of several
// blocks, deflated and plain, some messages acknowledged already, and an
// empty one.
func sampleBatches() (numbering, []*batch) {
	topic := strings.Split("out/{key}/avg", "{key}")
	b := &batch{checkpoint: 9, subtask: 2, epoch: 4, base: 70}
	for i := range 3000 {
		b.add(topic, fmt.Sprintf("k%d", i), fmt.Appendf(nil, `,"value":%d}`, i))
	}
	for range 5 {
		b.drop()
	}
	empty := &batch{checkpoint: 10, subtask: 2, epoch: 4, base: 3070}
	return numbering{epoch: 4, next: 3070, subtask: 2, parallelism: 3}, []*batch{b, empty}
}

// TestStoredSinkState: a sink's state as a cairn wrote it in format 3
// (testdata/sinkstate-v3.bin) decodes to the batches staged, and encodes
// back to the same bytes.
func TestStoredSinkState(t *testing.T) {
	num, bs := sampleBatches()
	stored := sample.Bytes(t, filepath.Join("testdata", "sinkstate-v3.bin"), func() []byte {
		return bytes.Join(encodeBatches(num, bs), nil)
	})
	gotN, got, err := decodeBatches(stored, 0)
	if err != nil {
		t.Fatal(err)
	}
	if gotN != num || len(got) != len(bs) {
		t.Fatalf("decoded numbering %+v and %d batches, want %+v and %d", gotN, len(got), num, len(bs))
	}
	deflated := 0
	for i, b := range got {
		want := bs[i]
		if b.checkpoint != want.checkpoint || b.subtask != want.subtask || b.seq != want.seq || b.epoch != want.epoch || b.base != want.base || b.badTopics {
			t.Fatalf("batch %d decoded as %+v, want %+v", i, b, want)
		}
		if got, want := messages(t, b), messages(t, want); !slices.Equal(got, want) {
			t.Fatalf("batch %d holds %d messages, want %d", i, len(got), len(want))
		}
		for _, k := range b.blocks {
			if k.deflated {
				deflated++
			}
		}
	}
	if deflated == 0 {
		t.Fatal("the sample has no deflated block")
	}
	if again := bytes.Join(encodeBatches(gotN, got), nil); !bytes.Equal(again, stored) {
		t.Errorf("the decoded state encodes to other bytes:\n%x\nstored\n%x", again, stored)
	}
}
