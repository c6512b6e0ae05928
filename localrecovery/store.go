package localrecovery

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
)

// ChunkSize is the largest piece of a snapshot stored under one key.
const ChunkSize = 1 << 20

// TxBytes is the most of a snapshot written in one transaction: bbolt holds
// a transaction's new pages in memory until it commits.
const TxBytes = 4 << 20

// formatVersion is the file layout (see the package doc). Format 1 kept
// every chunk in one bucket, legacyBlobs; Open moves such a file's
// snapshots into buckets of their own.
const formatVersion = 2

var (
	bucketMeta        = []byte("meta")
	bucketSnapshots   = []byte("snapshots")
	bucketCheckpoints = []byte("checkpoints")
	legacyBlobs       = []byte("blobs")
	keyFormat         = []byte("format")
	keyLastID         = []byte("last_id")
)

// Options configure a Store.
type Options struct {
	// Retain is how many completed checkpoints to keep; default 3.
	Retain int
	// Logger receives what the store finds and does; default slog.Default.
	Logger *slog.Logger
	// Failpoint, if set, is called by name at the points of the write path
	// where a crash is most interesting: "blob-chunk" (after each chunk of
	// a blob is put, before its transaction commits), "blob-written",
	// "before-completion", "after-completion", "retention" (between
	// deletions). Crash tests kill the process there.
	Failpoint func(name string)
	// WriteFault, if set, is asked before every write transaction; an error
	// fails the write as a full or broken disk would. Tests inject ENOSPC
	// with it.
	WriteFault func() error
}

// Store is checkpoint storage in one bbolt file. It is safe for concurrent
// use.
type Store struct {
	db   *bolt.DB
	path string
	opts Options
	// written and syncs count what the store's write transactions made
	// the kernel write: every page a commit allocates (the pages it
	// changed, the freelist) and the meta page, and its two fdatasyncs.
	written, syncs atomic.Int64
}

var _ checkpoint.Store = (*Store)(nil)

// Open opens or creates the store at path. A damaged file is set aside and
// what can be verified is salvaged into a new one (see the package doc);
// only an unusable directory or a new file that cannot be created is an
// error.
func Open(path string, opts Options) (*Store, error) {
	if opts.Retain <= 0 {
		opts.Retain = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Store{path: path, opts: opts}
	db, err := openChecked(path)
	var damage *damageError
	switch {
	case errors.As(err, &damage):
		if db, err = s.salvage(damage.cause); err != nil {
			return nil, err
		}
	case err != nil:
		// Locked by a running agent, unreadable, a newer format: not
		// damage, and nothing to salvage.
		return nil, fmt.Errorf("checkpoint store %s: %w", path, err)
	}
	s.db = db
	if err := guard(func() error { return s.retain(true) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("checkpoint store %s: %w", path, err)
	}
	return s, nil
}

// damageError says the file itself is damaged, as opposed to locked or
// unreadable: the only case in which Open salvages.
type damageError struct{ cause error }

func (e *damageError) Error() string { return e.cause.Error() }

// openChecked opens the bbolt file at path after checkFile, turning bbolt's
// panics and memory faults on a damaged file into errors. (bbolt's own
// Tx.Check runs on a goroutine of its own, where a fault could not be
// caught; every read of the store is guarded and verified instead.) Damage
// is reported as a *damageError.
func openChecked(path string) (db *bolt.DB, err error) {
	if _, err := checkFile(path); err != nil && err != errMissing {
		if os.IsPermission(err) {
			return nil, err
		}
		return nil, &damageError{err}
	}
	err = guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
				return &damageError{err}
			}
			return err
		}
		return db.Update(initBuckets)
	})
	if err != nil && db != nil {
		_ = guard(db.Close)
		db = nil
	}
	return db, err
}

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

func initBuckets(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	for _, b := range [][]byte{bucketSnapshots, bucketCheckpoints} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	switch v := meta.Get(keyFormat); {
	case v == nil:
	case len(v) == 1 && v[0] == 1:
		if err := migrateFormat1(tx); err != nil {
			return fmt.Errorf("moving format 1 snapshots to format %d: %w", formatVersion, err)
		}
	case len(v) != 1 || v[0] != formatVersion:
		return fmt.Errorf("unknown store format %x (this cairn reads formats 1 and %d)", v, formatVersion)
	}
	return meta.Put(keyFormat, []byte{formatVersion})
}

// migrateFormat1 moves every chunk of legacyBlobs into its snapshot's own
// bucket, in the transaction that opens the file.
func migrateFormat1(tx *bolt.Tx) error {
	legacy := tx.Bucket(legacyBlobs)
	if legacy == nil {
		return nil
	}
	snaps := tx.Bucket(bucketSnapshots)
	err := legacy.ForEach(func(k, v []byte) error {
		if len(k) < 8+1+4 || k[len(k)-5] != 0 {
			return nil // not a chunk: it goes with the bucket
		}
		snap, err := snaps.CreateBucketIfNotExists(k[:len(k)-4])
		if err != nil {
			return err
		}
		b, err := snap.CreateBucketIfNotExists([]byte{0, 0, 0, 0})
		if err != nil {
			return err
		}
		b.FillPercent = 1
		return b.Put(bytes.Clone(k[len(k)-4:]), bytes.Clone(v))
	})
	if err != nil {
		return err
	}
	return tx.DeleteBucket(legacyBlobs)
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) failpoint(name string) {
	if s.opts.Failpoint != nil {
		s.opts.Failpoint(name)
	}
}

// update runs a write transaction, after asking WriteFault.
func (s *Store) update(f func(tx *bolt.Tx) error) error {
	if s.opts.WriteFault != nil {
		if err := s.opts.WriteFault(); err != nil {
			return err
		}
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		tx.OnCommit(func() {
			st := tx.Stats()
			s.written.Add(st.GetPageAlloc() + int64(s.db.Info().PageSize))
			s.syncs.Add(2)
		})
		return f(tx)
	})
}

// Wear is what the store made the kernel write back, in whole pages, and
// the syncs that did it, since it was opened.
func (s *Store) Wear() (written, syncs int64) { return s.written.Load(), s.syncs.Load() }

// LastID implements checkpoint.Store.
func (s *Store) LastID() (uint64, error) {
	var id uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLastID); len(v) == 8 {
			id = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return id, err
}

// SaveLastID implements checkpoint.Store.
func (s *Store) SaveLastID(id uint64) error {
	return s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyLastID); len(v) == 8 && binary.BigEndian.Uint64(v) >= id {
			return nil
		}
		return meta.Put(keyLastID, binary.BigEndian.AppendUint64(nil, id))
	})
}

// blobPrefix is the key of a subtask snapshot's bucket (and, in format 1,
// the key prefix of its chunks).
func blobPrefix(id uint64, task string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(task)+5), id)
	k = append(k, task...)
	return append(k, 0)
}

// handleKey is a StateHandle's key: "<id>/<task>".
func handleKey(id uint64, task string) string { return strconv.FormatUint(id, 10) + "/" + task }

// parseHandleKey inverts handleKey.
func parseHandleKey(key string) (uint64, string, error) {
	ids, task, ok := strings.Cut(key, "/")
	id, err := strconv.ParseUint(ids, 10, 64)
	if !ok || err != nil || task == "" {
		return 0, "", fmt.Errorf("bad state key %q", key)
	}
	return id, task, nil
}

// PutState implements checkpoint.Store: the snapshot is stored in a bucket
// of its own, in chunks of ChunkSize (the last one shorter), inserted in key
// order, in transactions of at most TxBytes, each into a bucket of its own
// within the snapshot's. Buckets apart mean that neither storing nor
// deleting a snapshot, nor storing the next piece of one, rewrites (and so
// reads back into memory) pages written before. The chunks of a transaction
// are gathered from data before it begins, so that encoding does not hold
// the store's write lock, and written before the next are: the memory a
// snapshot takes to store is about TxBytes, whatever its size. A snapshot
// whose writing fails half way is not referenced by any completion record,
// and goes with retention.
func (s *Store) PutState(id uint64, task checkpoint.TaskID, data iter.Seq[[]byte]) (checkpoint.StateHandle, error) {
	name := task.String()
	prefix := blobPrefix(id, name)
	h := checkpoint.StateHandle{Key: handleKey(id, name)}
	var (
		pending [][]byte // the next transaction's chunks
		size    int      // their bytes
		part    uint32   // transactions written
		written uint32   // chunks written
	)
	write := func() error {
		err := s.update(func(tx *bolt.Tx) error {
			snaps := tx.Bucket(bucketSnapshots)
			if part == 0 && snaps.Bucket(prefix) != nil { // left by an attempt that failed later
				if err := snaps.DeleteBucket(prefix); err != nil {
					return err
				}
			}
			snap, err := snaps.CreateBucketIfNotExists(prefix)
			if err != nil {
				return err
			}
			b, err := snap.CreateBucket(binary.BigEndian.AppendUint32(nil, part))
			if err != nil {
				return err
			}
			b.FillPercent = 1 // keys only ever grow: pack pages full
			for i, chunk := range pending {
				if err := b.Put(binary.BigEndian.AppendUint32(nil, written+uint32(i)), chunk); err != nil {
					return err
				}
				s.failpoint("blob-chunk")
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("storing state of %s for checkpoint %d: %w", name, id, err)
		}
		part++
		written += uint32(len(pending))
		clear(pending) // bbolt copied them at commit
		pending, size = pending[:0], 0
		return nil
	}
	var err error
	for chunk := range chunks(data) {
		if size > 0 && size+len(chunk) > TxBytes {
			if err = write(); err != nil {
				break
			}
		}
		h.Append(chunk)
		pending = append(pending, chunk)
		size += len(chunk)
	}
	if err == nil && written == 0 && len(pending) == 0 {
		pending = append(pending, []byte{}) // an empty snapshot is one empty chunk
	}
	if err == nil && len(pending) > 0 {
		err = write()
	}
	if err != nil {
		return checkpoint.StateHandle{}, err
	}
	s.failpoint("blob-written")
	return h, nil
}

// chunks yields the concatenation of data's parts ChunkSize bytes at a
// time. A chunk lying within one part is that part's bytes; one spanning
// parts is a copy. Few large chunks matter: bbolt reads a page of every
// leaf when it deletes a snapshot, and the kernel maps the pages around it.
func chunks(data iter.Seq[[]byte]) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		var buf []byte // a chunk spanning parts, in the making
		// A small snapshot's chunk grows as it needs; after a full one,
		// each starts at full size.
		full := false
		for p := range data {
			for len(p) > 0 {
				if len(buf) == 0 && len(p) >= ChunkSize {
					if !yield(p[:ChunkSize:ChunkSize]) {
						return
					}
					p = p[ChunkSize:]
					continue
				}
				if buf == nil && full {
					buf = make([]byte, 0, ChunkSize)
				}
				n := min(len(p), ChunkSize-len(buf))
				buf, p = append(buf, p[:n]...), p[n:]
				if len(buf) == ChunkSize {
					if !yield(buf) {
						return
					}
					buf, full = nil, true
				}
			}
		}
		if len(buf) > 0 {
			yield(buf)
		}
	}
}

// ReadState implements checkpoint.Store.
func (s *Store) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	id, task, err := parseHandleKey(h.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
	}
	prefix := blobPrefix(id, task)
	data := make([]byte, 0, max(0, min(h.Size, 1<<30)))
	err = guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			// A damaged format 1 file being salvaged keeps its chunks
			// in legacyBlobs, under the snapshot's key prefix.
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
			if b := tx.Bucket(bucketSnapshots); b != nil && b.Bucket(prefix) != nil {
				snap := b.Bucket(prefix)
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
	})
	if err != nil {
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			err = fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
		}
		return nil, err
	}
	if err := checkpoint.Verify(h, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Complete implements checkpoint.Store: it checks that every blob m names is
// stored, writes the completion record in its own transaction, then applies
// retention.
func (s *Store) Complete(m *checkpoint.Manifest) error {
	record, err := encodeRecord(m)
	if err != nil {
		return err
	}
	s.failpoint("before-completion")
	err = s.update(func(tx *bolt.Tx) error {
		snaps := tx.Bucket(bucketSnapshots)
		for _, a := range m.Subtasks {
			for _, h := range a.Handles() {
				id, task, err := parseHandleKey(h.Key)
				if err != nil {
					return err
				}
				if snaps.Bucket(blobPrefix(id, task)) == nil {
					return fmt.Errorf("state %s of %s is not stored", h.Key, a.Task)
				}
			}
		}
		return tx.Bucket(bucketCheckpoints).Put(binary.BigEndian.AppendUint64(nil, m.ID), record)
	})
	if err != nil {
		return fmt.Errorf("writing the completion record of checkpoint %d: %w", m.ID, err)
	}
	s.failpoint("after-completion")
	if err := s.retain(false); err != nil {
		// The checkpoint is complete; what was not deleted goes next time.
		s.opts.Logger.Warn("checkpoint retention failed", "err", err)
	}
	return nil
}

func encodeRecord(m *checkpoint.Manifest) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint32(js, checkpoint.Checksum(js)), nil
}

func decodeRecord(v []byte) (*checkpoint.Manifest, error) {
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

// Discard implements checkpoint.Store.
func (s *Store) Discard(id uint64) error {
	return s.update(func(tx *bolt.Tx) error {
		snaps := tx.Bucket(bucketSnapshots)
		prefix := binary.BigEndian.AppendUint64(nil, id)
		for k, _ := snaps.Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = snaps.Cursor().Seek(prefix) {
			if err := snaps.DeleteBucket(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Completed implements checkpoint.Store. A completion record that fails its
// checksum is skipped with a log line.
func (s *Store) Completed() ([]*checkpoint.Manifest, error) {
	var out []*checkpoint.Manifest
	err := guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketCheckpoints).Cursor()
			for k, v := c.Last(); k != nil; k, v = c.Prev() {
				m, err := decodeRecord(v)
				if err != nil || len(k) != 8 || m.ID != binary.BigEndian.Uint64(k) {
					s.opts.Logger.Error("skipping a damaged completion record", "key", fmt.Sprintf("%x", k), "err", err)
					continue
				}
				out = append(out, m)
			}
			return nil
		})
	})
	return out, err
}

// retain keeps the newest Retain completed checkpoints and deletes every
// blob none of them references. Blobs of ids above the newest completed one
// belong to checkpoints in flight and stay, unless atOpen: then nothing is
// in flight, and they are leftovers of a crash.
func (s *Store) retain(atOpen bool) error {
	return s.update(func(tx *bolt.Tx) error {
		type record struct {
			key []byte
			m   *checkpoint.Manifest
		}
		var kept []record
		c := tx.Bucket(bucketCheckpoints).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			m, err := decodeRecord(v)
			if err != nil {
				continue // Completed reports it; retention leaves it be
			}
			kept = append(kept, record{slices.Clone(k), m})
		}
		for _, r := range kept[min(len(kept), s.opts.Retain):] {
			if err := tx.Bucket(bucketCheckpoints).Delete(r.key); err != nil {
				return err
			}
			s.failpoint("retention")
		}
		kept = kept[:min(len(kept), s.opts.Retain)]
		referenced := make(map[string]bool)
		var newest uint64
		for _, r := range kept {
			newest = max(newest, r.m.ID)
			for _, a := range r.m.Subtasks {
				for _, h := range a.Handles() {
					referenced[h.Key] = true
				}
			}
		}
		snaps := tx.Bucket(bucketSnapshots)
		var unreferenced [][]byte
		reported := make(map[uint64]bool)
		err := snaps.ForEach(func(k, _ []byte) error {
			id, task, ok := splitBlobKey(k)
			if !ok || referenced[handleKey(id, task)] || id > newest && !atOpen {
				return nil
			}
			if atOpen && id > newest && !reported[id] {
				reported[id] = true
				s.opts.Logger.Info("discarding state of a checkpoint that never completed", "id", id)
			}
			unreferenced = append(unreferenced, slices.Clone(k))
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range unreferenced {
			if err := snaps.DeleteBucket(k); err != nil {
				return err
			}
			s.failpoint("retention")
		}
		return nil
	})
}

// splitBlobKey parses a snapshot's key into checkpoint id and task.
func splitBlobKey(k []byte) (uint64, string, bool) {
	if len(k) < 8+1+1 || k[len(k)-1] != 0 {
		return 0, "", false
	}
	return binary.BigEndian.Uint64(k), string(k[8 : len(k)-1]), true
}

// salvage sets a damaged file aside and copies into a fresh one every
// completed checkpoint whose record and state still read and verify.
func (s *Store) salvage(cause error) (*bolt.DB, error) {
	aside := ""
	for n := 1; ; n++ {
		aside = fmt.Sprintf("%s.damaged-%d", s.path, n)
		if _, err := os.Stat(aside); os.IsNotExist(err) {
			break
		}
	}
	if err := os.Rename(s.path, aside); err != nil {
		return nil, fmt.Errorf("checkpoint store %s is damaged (%v) and cannot be moved aside: %w", s.path, cause, err)
	}
	s.opts.Logger.Error("checkpoint store is damaged; moved aside, salvaging what verifies",
		"path", s.path, "moved_to", aside, "err", cause)
	if m, err := checkFile(aside); err != nil && m.pageSize > 0 {
		// Truncated: pad the copy so lost pages read as zeros.
		if err := padTo(aside, int64(m.highPage)*int64(m.pageSize)); err != nil {
			s.opts.Logger.Error("cannot pad the damaged store", "err", err)
		}
	}
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("creating a new checkpoint store %s: %w", s.path, err)
	}
	if err := db.Update(initBuckets); err != nil {
		db.Close()
		return nil, err
	}
	fresh := &Store{db: db, path: s.path, opts: s.opts}
	fresh.opts.Failpoint = nil
	var old *bolt.DB
	if err := guard(func() error {
		var err error
		old, err = bolt.Open(aside, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		return err
	}); err != nil {
		s.opts.Logger.Error("nothing salvaged: the damaged store cannot be opened", "err", err)
		return db, nil
	}
	defer guard(old.Close)
	damaged := &Store{db: old, path: aside, opts: s.opts}
	var lastID uint64
	if err := guard(func() (err error) { lastID, err = damaged.LastID(); return err }); err == nil {
		_ = fresh.SaveLastID(lastID)
	}
	var ms []*checkpoint.Manifest
	if err := guard(func() error {
		var err error
		ms, err = damaged.Completed()
		return err
	}); err != nil {
		s.opts.Logger.Error("nothing salvaged: no completion record can be read", "err", err)
		return db, nil
	}
	for _, m := range ms {
		if err := guard(func() error { return copyCheckpoint(damaged, fresh, m) }); err != nil {
			s.opts.Logger.Error("checkpoint lost in the damaged store", "id", m.ID, "err", err)
			continue
		}
		_ = fresh.SaveLastID(m.ID)
		s.opts.Logger.Info("checkpoint salvaged from the damaged store", "id", m.ID)
	}
	return db, nil
}

func copyCheckpoint(from, to *Store, m *checkpoint.Manifest) error {
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			data, err := from.ReadState(h)
			if err != nil {
				return err
			}
			id, _, err := parseHandleKey(h.Key)
			if err != nil {
				return err
			}
			if _, err := to.PutState(id, a.Task, slices.Values([][]byte{data})); err != nil {
				return err
			}
		}
	}
	return to.Complete(m)
}
