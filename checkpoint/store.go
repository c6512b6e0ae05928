package checkpoint

import (
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Store keeps checkpoints. Implementations are safe for concurrent use: the
// coordinator's loop and the subtasks' asynchronous snapshot writers call
// them at the same time.
type Store interface {
	// LastID returns the highest id of a checkpoint whose completion
	// record the store holds or held, or that SaveLastID recorded; 0 if
	// none. A job's new ids start above it (invariant I6).
	LastID() (uint64, error)
	// SaveLastID durably records id as taken, so that LastID is at least
	// id: a store that restores a checkpoint of another store (a replaced
	// device's) goes on after its ids. It never lowers the value.
	SaveLastID(id uint64) error
	// PutState stores one subtask's snapshot for checkpoint id, durable at
	// the latest once a completion record naming it is (Complete): the
	// concatenation of the parts data yields, in order, so that a caller
	// can encode a large snapshot piece by piece while it is written
	// instead of holding it whole. The caller does not change a part once
	// yielded; the store may keep one until PutState returns. data may be
	// ranged over more than once.
	PutState(id uint64, task TaskID, data iter.Seq[[]byte]) (StateHandle, error)
	// ReadState returns the data behind h after verifying its size and
	// checksum; a mismatch is an error wrapping ErrCorrupt.
	ReadState(h StateHandle) ([]byte, error)
	// Complete durably writes m's completion record, and with it every
	// snapshot m names. m is complete once it returns nil, and not before
	// (invariant I4).
	Complete(m *Manifest) error
	// Discard removes what is stored for checkpoint id, which did not
	// complete.
	Discard(id uint64) error
	// Completed returns the manifests of the retained completed
	// checkpoints, newest first.
	Completed() ([]*Manifest, error)
}

// ErrCorrupt is wrapped by errors about stored data that fails verification.
var ErrCorrupt = errors.New("checkpoint data failed verification")

// crcTable is the Castagnoli table used for every checksum in checkpoints.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C of the concatenation of parts, as stored in a
// StateHandle.
func Checksum(parts ...[]byte) uint32 {
	var sum uint32
	for _, p := range parts {
		sum = crc32.Update(sum, crcTable, p)
	}
	return sum
}

// Handle returns the StateHandle of the snapshot made of parts, stored
// under key.
func Handle(key string, parts ...[]byte) StateHandle {
	h := StateHandle{Key: key}
	for _, p := range parts {
		h.Append(p)
	}
	return h
}

// Append extends h, the handle of some bytes, to describe them followed by
// p: a store computes a handle as it writes.
func (h *StateHandle) Append(p []byte) {
	h.Size += int64(len(p))
	h.CRC32C = crc32.Update(h.CRC32C, crcTable, p)
}

// Verify checks data against h.
func Verify(h StateHandle, data []byte) error {
	if int64(len(data)) != h.Size {
		return fmt.Errorf("%w: %s is %d bytes, want %d", ErrCorrupt, h.Key, len(data), h.Size)
	}
	if sum := Checksum(data); sum != h.CRC32C {
		return fmt.Errorf("%w: %s has checksum %08x, want %08x", ErrCorrupt, h.Key, sum, h.CRC32C)
	}
	return nil
}

// MemStore is a Store in memory, for tests and simulations. It retains the
// newest Retain completed checkpoints (all if Retain is 0) and the state
// they reference.
type MemStore struct {
	Retain int

	mu        sync.Mutex
	lastID    uint64
	state     map[string][]byte
	completed []*Manifest // newest first
}

// NewMemStore returns an empty MemStore that retains retain checkpoints.
func NewMemStore(retain int) *MemStore {
	return &MemStore{Retain: retain, state: make(map[string][]byte)}
}

func stateKey(id uint64, task TaskID) string { return fmt.Sprintf("%d/%s", id, task) }

func (s *MemStore) LastID() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID, nil
}

func (s *MemStore) SaveLastID(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastID = max(s.lastID, id)
	return nil
}

func (s *MemStore) PutState(id uint64, task TaskID, data iter.Seq[[]byte]) (StateHandle, error) {
	var joined []byte
	for p := range data {
		joined = append(joined, p...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := stateKey(id, task)
	s.state[k] = joined
	return Handle(k, joined), nil
}

func (s *MemStore) ReadState(h StateHandle) ([]byte, error) {
	s.mu.Lock()
	data, ok := s.state[h.Key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s is missing", ErrCorrupt, h.Key)
	}
	if err := Verify(h, data); err != nil {
		return nil, err
	}
	return data, nil
}

func (s *MemStore) Complete(m *Manifest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			if _, ok := s.state[h.Key]; !ok {
				return fmt.Errorf("checkpoint %d: state %s of %s is not stored", m.ID, h.Key, a.Task)
			}
		}
	}
	s.completed = slices.Insert(s.completed, 0, m)
	s.lastID = max(s.lastID, m.ID)
	if s.Retain == 0 || len(s.completed) <= s.Retain {
		return nil
	}
	s.completed = s.completed[:s.Retain]
	// Drop state of checkpoints up to m that no retained one references;
	// newer ids may still be in flight.
	referenced := make(map[string]bool)
	for _, r := range s.completed {
		for _, a := range r.Subtasks {
			for _, h := range a.Handles() {
				referenced[h.Key] = true
			}
		}
	}
	for k := range s.state {
		if id, _, _ := strings.Cut(k, "/"); !referenced[k] && idAtMost(id, m.ID) {
			delete(s.state, k)
		}
	}
	return nil
}

func idAtMost(s string, id uint64) bool {
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n <= id
}

func (s *MemStore) Discard(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.discardLocked(id)
	return nil
}

func (s *MemStore) discardLocked(id uint64) {
	prefix := fmt.Sprintf("%d/", id)
	for k := range s.state {
		if strings.HasPrefix(k, prefix) {
			delete(s.state, k)
		}
	}
}

func (s *MemStore) Completed() ([]*Manifest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.completed), nil
}
