package seglog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

const (
	headerSize  = 20
	frameHeader = 16 // length, checksum, offset
	// MaxRecord is the most data one record holds.
	MaxRecord = 64 << 20
	version   = 1
	suffix    = ".seg"
)

var magic = [4]byte{'C', 'R', 'N', 'L'}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by errors about a log's files that fail
// verification other than as a torn write at the end.
var ErrCorrupt = errors.New("ingest log file damaged")

// errFormat is wrapped by the error about a segment header that verifies
// and names a format this cairn does not read: no damage, a newer cairn's.
var errFormat = errors.New("segment format")

// segmentName is the file name of the segment starting at first.
func segmentName(first uint64) string {
	return fmt.Sprintf("%020d%s", first, suffix)
}

// parseSegmentName returns the first offset a segment's name gives.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	first, err := strconv.ParseUint(digits, 10, 64)
	return first, err == nil
}

func encodeHeader(first uint64) []byte {
	h := make([]byte, 0, headerSize)
	h = append(h, magic[:]...)
	h = append(h, version, 0, 0, 0)
	h = binary.LittleEndian.AppendUint64(h, first)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, crcTable))
}

// decodeHeader returns the first offset of a segment's header, or why it
// is not one.
func decodeHeader(h []byte) (uint64, error) {
	switch {
	case len(h) < headerSize:
		return 0, fmt.Errorf("header is %d bytes, want %d", len(h), headerSize)
	case [4]byte(h[:4]) != magic:
		return 0, fmt.Errorf("not a segment: magic %q", h[:4])
	case binary.LittleEndian.Uint32(h[16:]) != crc32.Checksum(h[:16], crcTable):
		return 0, errors.New("header checksum mismatch")
	case h[4] != version:
		return 0, fmt.Errorf("%w %d (this cairn reads %d)", errFormat, h[4], version)
	}
	return binary.LittleEndian.Uint64(h[8:]), nil
}

// appendFrame appends the frame of a record of count offsets from off,
// holding the concatenation of data.
func appendFrame(dst []byte, off uint64, count int, data ...[]byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, 8)...) // length and checksum, below
	dst = binary.LittleEndian.AppendUint64(dst, off)
	dst = binary.AppendUvarint(dst, uint64(count))
	for _, p := range data {
		dst = append(dst, p...)
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeader))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+8:], crcTable))
	return dst
}

// frameSize is the bytes a record of count offsets and n bytes of data
// takes.
func frameSize(count, n int) int64 {
	var b [binary.MaxVarintLen64]byte
	return int64(frameHeader + binary.PutUvarint(b[:], uint64(count)) + n)
}

// Record is a record read from a log. Data is valid only until the
// function it was given to returns.
type Record struct {
	Offset uint64 // the first offset it covers
	Count  int    // the offsets it covers
	Data   []byte
	// Damage, when set, says why the offsets [Offset, End()) are lost: the
	// bytes that held them do not verify (Data holds those bytes, if
	// any), and records that do follow them, or the next segment does.
	// See the package doc, Damage in the middle of a log.
	Damage string
}

// End is the offset after the record.
func (r Record) End() uint64 { return r.Offset + uint64(r.Count) }

// badFrame says why the bytes at a position of a segment are not the
// record expected there.
type badFrame struct {
	pos    int64
	reason string
}

func (e *badFrame) Error() string { return fmt.Sprintf("byte %d: %s", e.pos, e.reason) }

// scanner reads the records of one segment from pos, expecting offset
// next, up to limit bytes. Past bytes that do not verify it goes on at
// the next record that does, or, in a sealed segment, at its end: it
// returns the offsets between as a Record with Damage set.
type scanner struct {
	f     io.ReaderAt
	r     *bufio.Reader
	pos   int64
	limit int64
	next  uint64
	// end is the offset the segment ends at when it is sealed (the next
	// segment's first), else 0: then bytes that do not verify and are
	// followed by none that do are a torn write, and end the scan (err).
	end uint64
	buf []byte
	err error // an I/O error or a *badFrame; nil at a clean end
}

func newScanner(f io.ReaderAt, pos, limit int64, next uint64, r *bufio.Reader) *scanner {
	if r == nil {
		r = bufio.NewReaderSize(nil, 64<<10)
	}
	s := &scanner{f: f, r: r, limit: limit, next: next}
	s.seek(pos)
	return s
}

// seek makes the scanner read on from pos.
func (s *scanner) seek(pos int64) {
	s.pos = pos
	s.r.Reset(io.NewSectionReader(s.f, pos, s.limit-pos))
}

// scan returns the next record, or a range of offsets lost to damage (a
// Record with Damage set), or false at the end or on an error (s.err).
func (s *scanner) scan() (Record, bool) {
	r, ok := s.frame()
	var bad *badFrame
	switch {
	case ok:
		return r, true
	case s.err == nil && s.end > s.next:
		// The segment ends before the next one begins: the records
		// between were cut off or removed.
		return s.lost(s.limit, s.end, nil, fmt.Sprintf("the segment ends at offset %d, the next begins at %d", s.next, s.end))
	case !errors.As(s.err, &bad):
		return r, false
	}
	rest := make([]byte, s.limit-bad.pos)
	if _, err := s.f.ReadAt(rest, bad.pos); err != nil && !errors.Is(err, io.EOF) {
		s.err = err
		return Record{}, false
	}
	if p, off, found := resync(rest, s.next); found {
		return s.lost(bad.pos+int64(p), off, rest[:p], bad.Error())
	}
	if s.end > s.next {
		return s.lost(s.limit, s.end, rest, bad.Error())
	}
	return Record{}, false // a torn write: s.err says where
}

// lost returns the offsets from s.next to next as lost to damage (the
// bytes data, which do not verify, for reason), and goes on at pos.
func (s *scanner) lost(pos int64, next uint64, data []byte, reason string) (Record, bool) {
	r := Record{Offset: s.next, Count: int(next - s.next), Data: data, Damage: reason}
	s.err, s.next = nil, next
	s.seek(pos)
	return r, true
}

// frame reads the record at s.pos, or returns false at the end or on an
// error (s.err).
func (s *scanner) frame() (Record, bool) {
	if s.pos >= s.limit {
		return Record{}, false
	}
	bad := func(reason string) (Record, bool) {
		s.err = &badFrame{pos: s.pos, reason: reason}
		return Record{}, false
	}
	if s.limit-s.pos < frameHeader+1 {
		return bad("a partial record")
	}
	var h [frameHeader]byte
	if _, err := io.ReadFull(s.r, h[:]); err != nil {
		s.err = err
		return Record{}, false
	}
	n := int64(binary.LittleEndian.Uint32(h[0:]))
	sum := binary.LittleEndian.Uint32(h[4:])
	off := binary.LittleEndian.Uint64(h[8:])
	switch {
	case n < 1 || n > MaxRecord+binary.MaxVarintLen64:
		return bad(fmt.Sprintf("record length %d", n))
	case s.pos+frameHeader+n > s.limit:
		return bad(fmt.Sprintf("a record of %d bytes past the end", n))
	}
	if int64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	body := s.buf[:n]
	if _, err := io.ReadFull(s.r, body); err != nil {
		s.err = err
		return Record{}, false
	}
	if crc32.Update(crc32.Checksum(h[8:], crcTable), crcTable, body) != sum {
		return bad("checksum mismatch")
	}
	count, k := binary.Uvarint(body)
	switch {
	case k <= 0 || count == 0 || count > 1<<32:
		return bad("bad offset count")
	case off != s.next:
		return bad(fmt.Sprintf("record of offset %d where %d was due", off, s.next))
	}
	s.pos += frameHeader + n
	s.next += count
	return Record{Offset: off, Count: int(count), Data: body[k:]}, true
}

// maxOffsetsAfter bounds how far past bytes that do not verify resync
// looks for a record's offset: far more than a segment holds, and a count
// of offsets an int holds on 32-bit machines.
const maxOffsetsAfter = 1 << 30

// resync finds in data (the rest of a segment from bytes that do not
// verify) the first record that verifies and covers offsets from after
// on: its position in data and its offset. A torn write leaves none,
// unless the kernel wrote pages back out of order; damage (bit rot) does.
// The record at position 0, which did not verify where it is, is found
// only if it verifies but for its offset, which is past after: then the
// offsets between are lost.
func resync(data []byte, after uint64) (pos int, off uint64, found bool) {
	for p := 0; p+frameHeader+1 <= len(data); p++ {
		n := int64(binary.LittleEndian.Uint32(data[p:])) // int64: on 32-bit an int may not hold it
		off := binary.LittleEndian.Uint64(data[p+8:])
		// An offset far beyond is no record of this log: checking only
		// plausible ones keeps a long run of noise cheap.
		if n < 1 || n > int64(len(data)-p-frameHeader) || off < after || off-after > maxOffsetsAfter || p == 0 && off == after {
			continue
		}
		end := p + frameHeader + int(n)
		if crc32.Checksum(data[p+8:end], crcTable) == binary.LittleEndian.Uint32(data[p+4:]) {
			if count, k := binary.Uvarint(data[p+frameHeader : end]); k > 0 && count > 0 && count <= 1<<32 {
				return p, off, true
			}
		}
	}
	return 0, 0, false
}
