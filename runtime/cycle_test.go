package runtime

import (
	"io"

	"github.com/cairn-edge/cairn/graph"
)

// cycleSource emits n records cycling over a pre-built slice.
type cycleSource struct {
	records []graph.Record
	n, i    int
}

func (s *cycleSource) Open(*graph.Context, uint64) error { return nil }
func (s *cycleSource) Read(buf []graph.Record) (int, error) {
	if s.i >= s.n {
		return 0, io.EOF
	}
	k := min(len(buf), s.n-s.i)
	for j := range k {
		buf[j] = s.records[(s.i+j)%len(s.records)]
	}
	s.i += k
	return k, nil
}
func (s *cycleSource) Offset() uint64         { return uint64(s.i) }
func (s *cycleSource) Ready() <-chan struct{} { return nil }
func (s *cycleSource) Close() error           { return nil }
