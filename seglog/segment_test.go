package seglog

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestVerifyingAfterCountsRecordsInNoise: in the rest of a segment after a
// cut, the records that verify are found and counted, once each, among
// noise; a length field near 2^31 (which overflows an int on 32-bit when
// added to a position) or an offset before the cut is not taken for a
// record.
func TestVerifyingAfterCountsRecordsInNoise(t *testing.T) {
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
	data = appendFrame(data, 100, 1, []byte("after the cut"))
	data = append(data, noise(5000)...)
	data = appendFrame(data, 101, 3, []byte("and another"))
	data = appendFrame(data, 7, 1, []byte("before the cut")) // not counted: offset below 100
	data = append(data, noise(1<<20)...)
	if got := verifyingAfter(data, 100); got != 2 {
		t.Fatalf("%d records verify after offset 100, want 2", got)
	}
	if got := verifyingAfter(huge, 100); got != 0 {
		t.Fatalf("a frame claiming %d bytes in %d verified", 0x7FFFFFF8, len(huge))
	}
}
