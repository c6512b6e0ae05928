package seglog

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestResyncFindsTheNextRecordInNoise: in the rest of a segment after
// bytes that do not verify, resync finds the first record that verifies
// and covers offsets from the one due on, among noise; a length field
// near 2^31 (which overflows an int on 32-bit when added to a position)
// or an offset before the one due is not taken for a record.
func TestResyncFindsTheNextRecordInNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	huge := make([]byte, frameHeader+8)
	binary.LittleEndian.PutUint32(huge, 0x7FFFFFF8)
	binary.LittleEndian.PutUint64(huge[8:], 100)
	data := append(noise(1000), huge...)
	data = appendFrame(data, 7, 1, []byte("before the damage")) // not taken: offset below 100
	at := len(data)
	data = appendFrame(data, 103, 1, []byte("after the damage"))
	data = append(data, noise(5000)...)
	data = appendFrame(data, 104, 3, []byte("and another"))
	if pos, off, found := resync(data, 100); !found || pos != at || off != 103 {
		t.Fatalf("resync: at %d, offset %d, found %v; want %d, 103", pos, off, found, at)
	}
	if _, _, found := resync(append(huge, noise(1<<20)...), 100); found {
		t.Fatalf("a frame claiming %d bytes in noise verified", 0x7FFFFFF8)
	}
	// The record that did not verify where it is, at position 0: found
	// past the offset due (the offsets between are lost), not at it.
	if pos, off, found := resync(appendFrame(nil, 105, 1, []byte("x")), 100); !found || pos != 0 || off != 105 {
		t.Fatalf("a record past the offset due at 0: %d, %d, %v", pos, off, found)
	}
	if _, _, found := resync(appendFrame(nil, 100, 1, []byte("x")), 100); found {
		t.Fatal("the record due at 0 was taken for the next")
	}
}
