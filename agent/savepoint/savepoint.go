// Package savepoint reads and writes savepoints: self-contained, versioned,
// checksummed files holding one completed checkpoint — its manifest and
// every subtask snapshot it needs — keyed by operator id, in a format
// independent of the checkpoint store's layout. A savepoint moves state
// between agents, devices and pipeline versions.
//
// Layout: the magic "CAIRNSP\x01"; a uvarint length and the JSON manifest;
// for each state handle of the manifest in order (each subtask's Base chain,
// then its State), a uvarint length and the snapshot's bytes; then the
// CRC-32C of everything before it, 4 bytes big-endian.
package savepoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cairn-edge/cairn/checkpoint"
)

const magic = "CAIRNSP\x01"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// handles lists a manifest's state handles in file order.
func handles(m *checkpoint.Manifest) []checkpoint.StateHandle {
	var out []checkpoint.StateHandle
	for _, a := range m.Subtasks {
		out = append(out, a.Base...)
		out = append(out, a.State)
	}
	return out
}

// Write saves checkpoint m, reading its state from store, to path
// atomically (a temporary file renamed into place).
func Write(path string, m *checkpoint.Manifest, store checkpoint.Store) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".savepoint-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close() // after a successful Close below, a harmless error
	sum := crc32.New(castagnoli)
	w := bufio.NewWriter(io.MultiWriter(tmp, sum))
	js, err := json.Marshal(m)
	if err != nil {
		return err
	}
	w.WriteString(magic)
	w.Write(binary.AppendUvarint(nil, uint64(len(js))))
	w.Write(js)
	for _, h := range handles(m) {
		data, err := store.ReadState(h)
		if err != nil {
			return fmt.Errorf("savepoint of checkpoint %d: %w", m.ID, err)
		}
		w.Write(binary.AppendUvarint(nil, uint64(len(data))))
		w.Write(data)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := tmp.Write(binary.BigEndian.AppendUint32(nil, sum.Sum32())); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ErrCorrupt is wrapped by errors about a damaged savepoint file.
var ErrCorrupt = errors.New("savepoint file is damaged")

// Savepoint is a savepoint read into memory. It is a checkpoint.Store that
// serves the savepoint's state for a restore; it stores nothing new.
type Savepoint struct {
	Manifest *checkpoint.Manifest
	mu       sync.Mutex
	state    map[string][]byte
}

// Read reads and verifies the savepoint at path.
func Read(path string) (*Savepoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < len(magic)+4 || string(data[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: %s is not a cairn savepoint (version 1)", ErrCorrupt, path)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: %s fails its checksum", ErrCorrupt, path)
	}
	r := bytes.NewReader(body[len(magic):])
	next := func() ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, fmt.Errorf("%w: %s is truncated", ErrCorrupt, path)
		}
		b := make([]byte, n)
		io.ReadFull(r, b)
		return b, nil
	}
	js, err := next()
	if err != nil {
		return nil, err
	}
	sp := &Savepoint{Manifest: new(checkpoint.Manifest), state: make(map[string][]byte)}
	if err := json.Unmarshal(js, sp.Manifest); err != nil {
		return nil, fmt.Errorf("%w: %s: manifest: %v", ErrCorrupt, path, err)
	}
	for _, h := range handles(sp.Manifest) {
		b, err := next()
		if err != nil {
			return nil, err
		}
		sp.state[h.Key] = b
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %s has trailing bytes", ErrCorrupt, path)
	}
	return sp, nil
}

// ReadState implements checkpoint.Store, verifying the snapshot.
func (s *Savepoint) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	s.mu.Lock()
	data, ok := s.state[h.Key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s is not in the savepoint", checkpoint.ErrCorrupt, h.Key)
	}
	return data, checkpoint.Verify(h, data)
}

// The rest of checkpoint.Store: a savepoint is read-only.

var errReadOnly = errors.New("a savepoint is read-only")

func (s *Savepoint) LastID() (uint64, error) { return s.Manifest.ID, nil }
func (s *Savepoint) SaveLastID(uint64) error { return errReadOnly }
func (s *Savepoint) PutState(uint64, checkpoint.TaskID, iter.Seq[[]byte]) (checkpoint.StateHandle, error) {
	return checkpoint.StateHandle{}, errReadOnly
}
func (s *Savepoint) Complete(*checkpoint.Manifest) error { return errReadOnly }
func (s *Savepoint) Discard(uint64) error                { return errReadOnly }
func (s *Savepoint) Completed() ([]*checkpoint.Manifest, error) {
	return []*checkpoint.Manifest{s.Manifest}, nil
}

// FileName is the name of checkpoint id's savepoint file in a savepoints
// directory.
func FileName(id uint64) string { return fmt.Sprintf("savepoint-%d.cairn", id) }

// Prune deletes the savepoint files (FileName) in dir but the keep newest,
// by checkpoint id, and returns the paths it deleted. Other files are left
// alone.
func Prune(dir string, keep int) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, e := range ents {
		var id uint64
		if n, _ := fmt.Sscanf(e.Name(), "savepoint-%d.cairn", &id); n == 1 && e.Name() == FileName(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var removed []string
	for _, id := range ids[:max(0, len(ids)-keep)] {
		path := filepath.Join(dir, FileName(id))
		if err := os.Remove(path); err != nil {
			return removed, err
		}
		removed = append(removed, path)
	}
	return removed, nil
}
