package localrecovery

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/seglog"
)

// Before the segmented log, cairn kept its checkpoints in one bbolt file,
// <data_dir>/checkpoints.db, with three buckets:
//
//	meta         "format"  → 1 byte, the layout version (1 or 2)
//	             "last_id" → 8 bytes big-endian: the highest id issued
//	snapshots    <id:8 BE><task>\x00 → a bucket per subtask snapshot,
//	                 <part:4 BE> → a bucket per write transaction,
//	                     <chunk:4 BE> → up to 1 MiB of the snapshot
//	checkpoints  <id:8 BE> → the completion record: the manifest as JSON,
//	                         then its CRC-32C (4 bytes BE)
//
// and in format 1 every chunk in one bucket, "blobs", under the key
// <id:8 BE><task>\x00<chunk:4 BE>. migrateBolt reads such a file, also a
// damaged one, to move what verifies into the log.
var (
	bucketMeta        = []byte("meta")
	bucketSnapshots   = []byte("snapshots")
	bucketCheckpoints = []byte("checkpoints")
	legacyBlobs       = []byte("blobs")
	keyLastID         = []byte("last_id")
)

// migrateBolt moves the completed checkpoints of the bbolt file at path
// that verify, and its id counter, into a new store in dir, as
// seglog.MoveInto makes a directory (safe across a crash; a file written to
// after it was moved is an error, not removed), then removes the file, or,
// if it was damaged, leaves it renamed aside (path.damaged-N). A write
// that fails (a full disk) fails the move, and leaves the file. Without
// the file it does nothing.
func migrateBolt(path, dir string, opts Options) error {
	if _, err := checkFile(path); errors.Is(err, errMissing) {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil // no file, or an empty one: nothing to move
	}
	log := opts.Logger
	damaged := false
	var moved, lost int
	_, err := seglog.MoveInto(path, dir, func(tmp string) error {
		old, err := openBolt(path, log)
		if err != nil {
			return err
		}
		damaged = old.damaged
		to, err := open(tmp, Options{Retain: opts.Retain, SegmentBytes: opts.SegmentBytes, Logger: log, WriteFault: opts.WriteFault})
		if err != nil {
			old.close()
			return err
		}
		moved, lost, err = old.copyTo(to, log)
		return errors.Join(err, to.Close(), old.close())
	})
	if err != nil {
		return fmt.Errorf("moving the checkpoint store %s into %s: %w", path, dir, err)
	}
	if moved+lost > 0 || damaged {
		log.Info("checkpoint store moved to a segmented log", "from", path, "to", dir, "checkpoints", moved, "lost", lost)
	}
	if damaged {
		return setAside(path, log)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// setAside renames the damaged file at path to path.damaged-N, the first N
// free, for whoever wants to look at it.
func setAside(path string, log *slog.Logger) error {
	for n := 1; ; n++ {
		aside := fmt.Sprintf("%s.damaged-%d", path, n)
		if _, err := os.Stat(aside); os.IsNotExist(err) {
			log.Warn("the damaged checkpoint store is kept aside", "path", aside)
			return os.Rename(path, aside)
		}
	}
}

// boltStore reads a bbolt checkpoint file, read-only, turning the faults a
// damaged file causes into errors.
type boltStore struct {
	db      *bolt.DB
	damaged bool // truncated, or bbolt could not open it
}

// openBolt opens the file at path. A damaged one (truncated, or bbolt
// cannot open it) is padded, so that its lost pages read as zeros; what it
// still holds that verifies can then be read.
func openBolt(path string, log *slog.Logger) (*boltStore, error) {
	_, err := checkFile(path)
	if err == nil {
		err = guard(func() error {
			db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
			if err == nil {
				db.Close()
			}
			return err
		})
	}
	b := &boltStore{}
	var damage *damageError
	switch {
	case err == nil || errors.Is(err, errMissing):
	case os.IsPermission(err) || errors.Is(err, bolt.ErrTimeout):
		return nil, err
	default:
		if !errors.As(err, &damage) {
			damage = &damageError{err}
		}
		b.damaged = true
		log.Error("checkpoint store is damaged; salvaging what verifies", "path", path, "err", damage.cause)
		if m, err := checkFile(path); err != nil && m.pageSize > 0 {
			if err := padTo(path, int64(m.highPage)*int64(m.pageSize)); err != nil {
				log.Error("cannot pad the damaged store", "err", err)
			}
		}
	}
	if err := guard(func() error {
		var err error
		b.db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		return err
	}); err != nil {
		log.Error("nothing salvaged: the damaged store cannot be opened", "err", err)
	}
	return b, nil
}

func (b *boltStore) close() error {
	if b.db == nil {
		return nil
	}
	return guard(b.db.Close)
}

// copyTo copies every completed checkpoint that verifies into to, oldest
// first, and the id counter; it returns how many it copied and lost. A
// checkpoint that cannot be read is lost; a write that fails fails it.
func (b *boltStore) copyTo(to *Store, log *slog.Logger) (moved, lost int, err error) {
	if b.db == nil {
		return 0, 0, nil
	}
	var lastID uint64
	var ms []*checkpoint.Manifest
	if err := guard(func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket(bucketMeta); meta != nil {
				if v := meta.Get(keyLastID); len(v) == 8 {
					lastID = binary.BigEndian.Uint64(v)
				}
			}
			records := tx.Bucket(bucketCheckpoints)
			if records == nil {
				return nil
			}
			return records.ForEach(func(k, v []byte) error {
				m, err := decodeBoltRecord(v)
				if err != nil || len(k) != 8 || m.ID != binary.BigEndian.Uint64(k) {
					log.Error("skipping a damaged completion record", "key", fmt.Sprintf("%x", k), "err", err)
					return nil
				}
				ms = append(ms, m)
				return nil
			})
		})
	}); err != nil {
		log.Error("no completion record can be read from the old store", "err", err)
	}
	for _, m := range ms { // oldest first: retention keeps the newest
		var unreadable *damageError
		switch err := b.copyCheckpoint(to, m); {
		case errors.As(err, &unreadable):
			log.Error("checkpoint lost in the damaged store", "id", m.ID, "err", unreadable.cause)
			lost++
		case err != nil:
			return moved, lost, fmt.Errorf("checkpoint %d: %w", m.ID, err)
		default:
			moved++
		}
	}
	if err := to.SaveLastID(lastID); err != nil {
		return moved, lost, fmt.Errorf("the id counter: %w", err)
	}
	return moved, lost, nil
}

// copyCheckpoint copies m's snapshots (those to lacks) and its completion
// record. A snapshot that cannot be read or does not verify is a
// *damageError.
func (b *boltStore) copyCheckpoint(to *Store, m *checkpoint.Manifest) error {
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			to.mu.Lock()
			_, have := to.blobs[h.Key]
			to.mu.Unlock()
			if have {
				continue
			}
			var data []byte
			if err := guard(func() (err error) {
				data, err = b.readState(h)
				return err
			}); err != nil {
				var damage *damageError
				if !errors.As(err, &damage) {
					damage = &damageError{err}
				}
				return damage
			}
			id, _, err := parseHandleKey(h.Key)
			if err != nil {
				return &damageError{err}
			}
			if _, err := to.PutState(id, a.Task, slices.Values([][]byte{data})); err != nil {
				return err
			}
		}
	}
	return to.Complete(m)
}

// readState reads and verifies the snapshot h names, from its bucket (format
// 2) or from the format 1 bucket of every chunk.
func (b *boltStore) readState(h checkpoint.StateHandle) ([]byte, error) {
	id, task, err := parseHandleKey(h.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
	}
	prefix := binary.BigEndian.AppendUint64(nil, id)
	prefix = append(append(prefix, task...), 0)
	var data []byte
	err = b.db.View(func(tx *bolt.Tx) error {
		next := uint32(0)
		chunks := func(c *bolt.Cursor, k, v, prefix []byte) error {
			for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				if len(k) != len(prefix)+4 || v == nil || binary.BigEndian.Uint32(k[len(prefix):]) != next {
					return fmt.Errorf("%w: %s has a missing or stray chunk", checkpoint.ErrCorrupt, h.Key)
				}
				next++
				data = append(data, v...)
			}
			return nil
		}
		if snaps := tx.Bucket(bucketSnapshots); snaps != nil && snaps.Bucket(prefix) != nil {
			snap := snaps.Bucket(prefix)
			err := snap.ForEach(func(part, v []byte) error {
				pb := snap.Bucket(part)
				if v != nil || pb == nil {
					return fmt.Errorf("%w: %s has a stray key", checkpoint.ErrCorrupt, h.Key)
				}
				c := pb.Cursor()
				k, v := c.First()
				return chunks(c, k, v, nil)
			})
			if err != nil {
				return err
			}
		} else if legacy := tx.Bucket(legacyBlobs); legacy != nil {
			c := legacy.Cursor()
			k, v := c.Seek(prefix)
			if err := chunks(c, k, v, prefix); err != nil {
				return err
			}
		}
		if next == 0 {
			return fmt.Errorf("%w: %s is missing", checkpoint.ErrCorrupt, h.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, checkpoint.Verify(h, data)
}

// decodeBoltRecord decodes a completion record of the bbolt file.
func decodeBoltRecord(v []byte) (*checkpoint.Manifest, error) {
	if len(v) < 4 {
		return nil, errors.New("record too short")
	}
	js, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if checkpoint.Checksum(js) != sum {
		return nil, errors.New("record checksum mismatch")
	}
	m := new(checkpoint.Manifest)
	if err := json.Unmarshal(js, m); err != nil {
		return nil, err
	}
	return m, nil
}

// damageError says a file is damaged, as opposed to locked or unreadable.
type damageError struct{ cause error }

func (e *damageError) Error() string { return e.cause.Error() }

// guard runs f, turning a panic or a memory fault (a read past the end of a
// truncated file) into a *damageError.
func guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &damageError{fmt.Errorf("damaged file: %v", r)}
		}
	}()
	return f()
}
