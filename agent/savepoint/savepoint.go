// Package savepoint reads and writes savepoints: self-contained, versioned,
// checksummed files holding one completed checkpoint — its manifest and
// every subtask snapshot it needs — keyed by operator id, in a format
// independent of the checkpoint store's layout. A savepoint moves state
// between agents, devices and pipeline versions.
//
// Layout, in package wire's fields: the header of magic "CAIRNSP" and
// version 1; the JSON manifest, length-prefixed; for each state handle of
// the manifest in order (each subtask's Base chain, then its State), the
// snapshot's bytes, length-prefixed; then the CRC-32C of everything
// before it, 4 bytes big-endian.
package savepoint

import (
	"bufio"
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
	"github.com/cairn-edge/cairn/wire"
)

const (
	magic   = "CAIRNSP"
	version = 1
)

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
	var head wire.Encoder
	head.Header(magic, version)
	head.Bytes(js)
	w.Write(head)
	for _, h := range handles(m) {
		data, err := store.ReadState(h)
		if err != nil {
			return fmt.Errorf("savepoint of checkpoint %d: %w", m.ID, err)
		}
		var length wire.Encoder // of the snapshot, which is written as it is, not copied
		length.Uvarint(uint64(len(data)))
		w.Write(length)
		w.Write(data)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var trailer wire.Encoder
	trailer.Uint32BE(sum.Sum32())
	if _, err := tmp.Write(trailer); err != nil {
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

// Read reads and verifies the savepoint at path. The snapshots it serves
// are parts of the file's bytes, read whole.
func Read(path string) (*Savepoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := wire.NewDecoder(data)
	if v := d.Header(magic); d.Err() != nil || v != version || len(data) < len(magic)+1+4 {
		return nil, fmt.Errorf("%w: %s is not a cairn savepoint (version %d)", ErrCorrupt, path, version)
	}
	body, trailer := data[:len(data)-4], wire.NewDecoder(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != trailer.Uint32BE() {
		return nil, fmt.Errorf("%w: %s fails its checksum", ErrCorrupt, path)
	}
	d = wire.NewDecoder(body[len(magic)+1:])
	js := d.Bytes()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: manifest: %v", ErrCorrupt, path, err)
	}
	sp := &Savepoint{Manifest: new(checkpoint.Manifest), state: make(map[string][]byte)}
	if err := json.Unmarshal(js, sp.Manifest); err != nil {
		return nil, fmt.Errorf("%w: %s: manifest: %v", ErrCorrupt, path, err)
	}
	for _, h := range handles(sp.Manifest) {
		sp.state[h.Key] = d.Bytes()
		if err := d.Err(); err != nil {
			return nil, fmt.Errorf("%w: %s: state %s: %v", ErrCorrupt, path, h.Key, err)
		}
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
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
