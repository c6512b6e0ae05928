package localrecovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// Damage helpers for tests that play a disk that went wrong; the store
// must be closed.

// newest returns the newest completed checkpoint's id, and the log offsets
// of its completion record and of the first chunk of its first snapshot of
// its own (not one it shares with the checkpoints before).
func newest(dir string) (id, record, chunk uint64, err error) {
	s, err := Open(dir, Options{Retain: 1 << 30, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, 0, 0, err
	}
	defer s.Close()
	if len(s.completed) == 0 {
		return 0, 0, 0, errors.New("no completed checkpoint")
	}
	c := s.completed[0]
	for _, a := range c.m.Subtasks {
		if b := s.blobs[a.State.Key]; b != nil && b.id == c.m.ID && len(b.chunks) > 0 {
			return c.m.ID, c.off, b.chunks[0], nil
		}
	}
	return 0, 0, 0, errors.New("no state of its own")
}

// frame finds the record of log offset off in dir's segments: its file
// and its position there.
func frame(dir string, off uint64) (string, int64, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil {
		return "", 0, err
	}
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			return "", 0, err
		}
		var h [16]byte
		for pos := int64(20); ; {
			if _, err := f.ReadAt(h[:], pos); err == io.EOF {
				break
			} else if err != nil {
				f.Close()
				return "", 0, err
			}
			if binary.LittleEndian.Uint64(h[8:]) == off {
				f.Close()
				return name, pos, nil
			}
			pos += 16 + int64(binary.LittleEndian.Uint32(h[:]))
		}
		f.Close()
	}
	return "", 0, fmt.Errorf("no record at offset %d", off)
}

// FlipNewestBlob flips one bit in the middle of the first chunk of the
// newest completed checkpoint's first snapshot, and returns the
// checkpoint's id.
func FlipNewestBlob(dir string) (uint64, error) {
	id, _, chunk, err := newest(dir)
	if err != nil {
		return 0, err
	}
	name, pos, err := frame(dir, chunk)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	n := int64(binary.LittleEndian.Uint32(data[pos:]))
	data[pos+16+n/2] ^= 0x08
	return id, os.WriteFile(name, data, 0o600)
}

// CutNewestRecord cuts the log just inside the newest completion record,
// as a power cut during its write would, and returns its checkpoint's id.
func CutNewestRecord(dir string) (uint64, error) {
	id, record, _, err := newest(dir)
	if err != nil {
		return 0, err
	}
	name, pos, err := frame(dir, record)
	if err != nil {
		return 0, err
	}
	return id, os.Truncate(name, pos+10)
}

// NewestSegment is the path of the store's newest segment file.
func NewestSegment(dir string) (string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(names) == 0 {
		return "", fmt.Errorf("no segment in %s (%v)", dir, err)
	}
	return names[len(names)-1], nil
}
