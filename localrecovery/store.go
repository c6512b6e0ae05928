package localrecovery

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/datadir"
	"github.com/cairn-edge/cairn/seglog"
)

// ChunkSize is the largest piece of a snapshot stored under one key
// (chosen by measurement: the package doc).
const ChunkSize = 1 << 20

// chunkSize is ChunkSize but where BenchmarkOptions varies it.
var chunkSize = ChunkSize

// Options configure a Store.
type Options struct {
	// Retain is how many completed checkpoints to keep; default 3.
	Retain int
	// Logger receives what the store finds and does; default slog.Default.
	Logger *slog.Logger
	// Failpoint, if set, is called by name at the points of the write path
	// where a crash is most interesting: "blob-chunk" (after each chunk of
	// a snapshot is taken in), "blob-written" (a snapshot taken in whole),
	// "before-completion" (before the checkpoint's transaction),
	// "retention" (inside it, after its every write and delete, before it
	// commits), "after-completion" (committed). Crash tests kill the
	// process there.
	Failpoint func(name string)
	// ReadOnly opens the store to list and read it only: nothing is moved,
	// set aside, written or locked against readers, and an agent that
	// holds the file is not waited for (the open fails at once, saying
	// so); Damage says what a store opened to write would set aside. The
	// file must exist.
	ReadOnly bool
	// HighWater, if set, is a file beside the store that keeps the highest
	// checkpoint id too (highwater.go): LastID is at least what it holds,
	// even after the store's file is lost.
	HighWater string
	// WriteFault, if set, is asked before every write transaction and
	// every write of HighWater; an error fails it as a full or broken disk
	// would. Tests inject ENOSPC with it.
	WriteFault func() error

	// tune, if set, changes bbolt's options before the file is opened
	// (the benchmarks that chose them).
	tune func(*bolt.Options)
}

// Store is checkpoint storage in one bbolt file (see the package doc). It
// is safe for concurrent use.
type Store struct {
	path string
	opts Options
	db   *bolt.DB
	// written and syncs count what the store's write transactions made
	// the kernel write (every page a commit writes, and the meta page)
	// and the syncs that did it.
	written, syncs atomic.Int64

	// wmu serializes the write transactions and the changes of the index
	// below that follow them.
	wmu sync.Mutex
	// mu guards the fields below.
	mu sync.Mutex
	// pending are the snapshots taken in (PutState) and not written yet,
	// by handle key: a checkpoint's transaction writes them.
	pending map[string]*snapshot
	// stored are the sizes of the snapshots in the file, by handle key.
	stored map[string]int64
	// buckets are the checkpoint buckets in the file, by id.
	buckets map[uint64]bool
	// completed are the completion records in the file, newest first.
	completed []*checkpoint.Manifest
	lastID    uint64
	// highWater is what Options.HighWater holds; hwFile is it, open to
	// write.
	highWater uint64
	hwFile    *os.File
	// damage is what Open found (Damage).
	damage []string
	// found says Open found a whole store of cairn's at its path (Fresh);
	// what a damaged one holds shows in the ids salvaged from it.
	found bool
}

// snapshot is one subtask's snapshot taken in and not written yet.
type snapshot struct {
	id     uint64
	task   string
	chunks [][]byte // each as stored: its bytes, then their CRC-32C
	size   int64
}

var _ checkpoint.Store = (*Store)(nil)

// boltOptions are the options the store's file is opened with; the package
// doc gives the measurements behind them.
func boltOptions(opts Options) *bolt.Options {
	o := &bolt.Options{
		Timeout:         2 * time.Second,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		PageSize:        4096,
		InitialMmapSize: 0,
		OpenFile:        datadir.OpenFile,
		ReadOnly:        opts.ReadOnly,
	}
	if opts.ReadOnly {
		o.Timeout = 100 * time.Millisecond // an agent holds the file: ask it instead
	}
	if opts.tune != nil {
		opts.tune(o)
	}
	return o
}

// Open opens or creates the store in the bbolt file at path
// (conventionally <data_dir>/checkpoints.db). An earlier cairn's store
// beside it, or in it in an earlier format, is moved into it first; a
// damaged file is set aside and what of it verifies is moved into a new
// one (see the package doc).
func Open(path string, opts Options) (*Store, error) {
	if opts.Retain <= 0 {
		opts.Retain = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			if _, errSeg := os.Stat(segmentsDir(path)); errSeg == nil {
				return nil, fmt.Errorf("the checkpoints are in %s, an earlier cairn's store, which `cairn run` moves into %s when it starts", segmentsDir(path), path)
			}
			return nil, fmt.Errorf("no checkpoint store: %w", err)
		}
	} else if err := upgrade(path, opts); err != nil {
		return nil, err
	}
	s := &Store{path: path, opts: opts, pending: make(map[string]*snapshot)}
	if err := s.open(); err != nil {
		return nil, err
	}
	if err := s.readHighWater(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// open opens the file, setting a damaged one aside and salvaging it, and
// reads the index.
func (s *Store) open() error {
	err := checkFile(s.path, s.opts)
	var damage *damageError
	var foreign *foreignError
	switch {
	case errors.As(err, &foreign) && s.opts.ReadOnly:
		return fmt.Errorf("%s is %w; `cairn run` sets it aside when it starts", s.path, foreign)
	case errors.As(err, &foreign):
		aside, err := setAside(s.path, "foreign")
		if err != nil {
			return fmt.Errorf("setting aside %s, %w: %w", s.path, foreign, err)
		}
		s.opts.Logger.Error("the checkpoint store's file is not cairn's: it is set aside untouched, and a new store made in its place",
			"path", s.path, "aside", aside, "reason", foreign.why)
	case errors.As(err, &damage) && s.opts.ReadOnly:
		s.damage = append(s.damage, damage.Error())
		s.opts.Logger.Error("checkpoint store damaged", "path", s.path, "err", damage.cause)
	case errors.As(err, &damage):
		if err := salvage(s.path, damage, s.opts); err != nil {
			return err
		}
	case errors.Is(err, errMissing):
	case err != nil:
		return fmt.Errorf("checkpoint store %s: %w", s.path, err)
	default:
		s.found = true
	}
	if err := guard(func() (err error) {
		s.db, err = bolt.Open(s.path, 0o600, boltOptions(s.opts))
		return err
	}); err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return fmt.Errorf("checkpoint store %s is in use by a running cairn", s.path)
		}
		if !s.opts.ReadOnly || !errors.As(err, &damage) {
			return fmt.Errorf("checkpoint store %s: %w", s.path, err)
		}
		return nil // damaged beyond opening: nothing to list
	}
	if err := s.load(); err != nil {
		s.Close()
		return err
	}
	return nil
}

// load reads the index of the file: the checkpoint buckets, their
// completion records and snapshots, and the id taken; it makes the
// buckets of a new file.
func (s *Store) load() error {
	format, marked := byte(0), false
	if err := s.view(func(tx *bolt.Tx) error {
		format = formatOf(tx)
		if meta := tx.Bucket(bucketMeta); meta != nil {
			marked = bytes.Equal(meta.Get(keyMagic), magic)
		}
		return nil
	}); err != nil {
		if s.opts.ReadOnly {
			s.damage = append(s.damage, err.Error()) // nothing to list
			return nil
		}
		return err
	}
	switch {
	case (format == 0 || format == formatVersion && !marked) && !s.opts.ReadOnly:
		// A new file, or one written before the magic (ownerless).
		if err := s.update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return errors.Join(meta.Put(keyFormat, []byte{formatVersion}), meta.Put(keyMagic, magic))
		}); err != nil {
			return fmt.Errorf("checkpoint store %s: %w", s.path, err)
		}
	case format == 0 || format == formatVersion:
	case format < formatVersion && !s.opts.ReadOnly:
		// The earliest builds' format: moved into a new file, then opened.
		if err := guard(s.db.Close); err != nil {
			return err
		}
		s.db = nil
		if err := replace(s.path, fmt.Sprintf("format %d", format), false, s.opts); err != nil {
			return err
		}
		return s.open()
	case format < formatVersion:
		return fmt.Errorf("checkpoint store %s is of an earlier cairn (format %d), which `cairn run` moves into format %d when it starts", s.path, format, formatVersion)
	default:
		return fmt.Errorf("checkpoint store %s is of format %d; this cairn reads formats 1 to %d (a newer cairn wrote it?)", s.path, format, formatVersion)
	}
	idx, err := readIndex(s.db, s.opts.Logger)
	if err != nil {
		if !s.opts.ReadOnly {
			return fmt.Errorf("checkpoint store %s: %w", s.path, err)
		}
		s.damage = append(s.damage, err.Error())
	}
	s.stored, s.buckets, s.completed, s.lastID = idx.stored, idx.buckets, idx.completed, idx.lastID
	s.damage = append(s.damage, idx.damage...)
	return nil
}

// index is what readIndex finds in a file of format 3.
type index struct {
	stored    map[string]int64
	buckets   map[uint64]bool
	completed []*checkpoint.Manifest // newest first
	lastID    uint64
	damage    []string // completion records that do not verify
}

// readIndex reads the index of a file of format 3 (Store.load).
func readIndex(db *bolt.DB, log *slog.Logger) (index, error) {
	idx := index{stored: make(map[string]int64), buckets: make(map[uint64]bool)}
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket(bucketMeta); meta != nil {
				if v := meta.Get(keyLastID); len(v) == 8 {
					idx.lastID = binary.BigEndian.Uint64(v)
				}
			}
			return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				id, ok := parseCheckpointBucket(name)
				if !ok {
					return nil
				}
				idx.buckets[id] = true
				idx.lastID = max(idx.lastID, id)
				return b.ForEach(func(k, v []byte) error {
					if bytes.Equal(k, keyRecord) {
						m, err := decodeRecord(v)
						if err != nil || m.ID != id {
							idx.damage = append(idx.damage, fmt.Sprintf("the completion record of checkpoint %d does not verify: %v", id, err))
							log.Error("skipping a damaged completion record", "id", id, "err", err)
							return nil
						}
						idx.completed = append(idx.completed, m)
						return nil
					}
					if task, _, ok := parseChunkKey(k); ok {
						n, _ := valueSize(v)
						idx.stored[handleKey(id, task)] += n
					}
					return nil
				})
			})
		})
	})
	slices.SortFunc(idx.completed, func(a, b *checkpoint.Manifest) int { return cmp.Compare(b.ID, a.ID) })
	return idx, err
}

// readHighWater reads Options.HighWater and raises lastID to it: the store
// lost the checkpoints above its own ids. A mark that is not a file of the
// store's own (datadir.OpenFile) is an error; one that does not verify is
// logged and, opened to write, set aside untouched (setAside: the mark is
// written in place, which would change it), and ids continue from the
// store's.
func (s *Store) readHighWater() error {
	if s.opts.HighWater == "" {
		return nil
	}
	hw, err := readHighWater(s.opts.HighWater)
	switch {
	case errors.Is(err, datadir.ErrNotOwn):
		return fmt.Errorf("checkpoint id mark: %w", err)
	case errors.Is(err, seglog.ErrCorrupt) && !s.opts.ReadOnly:
		aside, serr := setAside(s.opts.HighWater, "damaged")
		if serr != nil {
			return fmt.Errorf("setting aside %w: %w", err, serr)
		}
		s.opts.Logger.Error("checkpoint id mark unreadable: it is set aside untouched, and ids continue from the store's", "err", err, "aside", aside)
	case err != nil:
		s.opts.Logger.Error("checkpoint id mark unreadable; ids continue from the store's", "err", err)
	}
	s.highWater = hw
	if hw > s.lastID {
		s.opts.Logger.Warn("the checkpoint store lost checkpoints: it holds ids up to a lower one than were taken; ids continue above the highest taken",
			"path", s.path, "store_last_id", s.lastID, "taken", hw)
		s.lastID = hw
	}
	return nil
}

// raiseHighWater records id in Options.HighWater if it is higher than
// what that holds. Called with s.wmu held.
func (s *Store) raiseHighWater(id uint64) error {
	if s.opts.HighWater == "" || id <= s.highWater {
		return nil
	}
	if s.opts.WriteFault != nil {
		if err := s.opts.WriteFault(); err != nil {
			return err
		}
	}
	if s.hwFile == nil {
		f, err := openHighWater(s.opts.HighWater)
		if err != nil {
			return err
		}
		s.hwFile = f
	}
	if err := writeHighWater(s.hwFile, id); err != nil {
		return err
	}
	s.highWater = id
	return nil
}

// Fresh says that Open found nothing of a store: no file of cairn's at
// its path (none, an empty one, or one set aside as not cairn's) or a
// damaged one of which no id was salvaged, and no id in the id mark
// (Options.HighWater; none where it was set aside unreadable). Nothing
// shows that checkpoints were ever taken here.
func (s *Store) Fresh() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.found && s.highWater == 0 && s.lastID == 0
}

// Damage describes the damage Open found: what it set aside and why (and,
// read-only, what a store opened to write would set aside), and
// completion records that do not verify; nil if none.
func (s *Store) Damage() []string { return s.damage }

// Close closes the file.
func (s *Store) Close() error {
	var err error
	if s.db != nil {
		err = guard(s.db.Close)
		s.db = nil
	}
	if s.hwFile != nil {
		err = errors.Join(err, s.hwFile.Sync(), s.hwFile.Close())
		s.hwFile = nil
	}
	return err
}

func (s *Store) failpoint(name string) {
	if s.opts.Failpoint != nil {
		s.opts.Failpoint(name)
	}
}

// view runs a read transaction, a damaged file's faults turned into
// errors.
func (s *Store) view(f func(tx *bolt.Tx) error) error {
	if s.db == nil {
		return &damageError{errors.New("the file cannot be opened")}
	}
	return guard(func() error { return s.db.View(f) })
}

// update runs a write transaction, after asking WriteFault, and counts
// what its commit wrote: every page it allocated (what it changed, a
// snapshot's overflow pages) and the meta page, with two fdatasyncs, and
// one more when the file grew (bbolt syncs its new size).
func (s *Store) update(f func(tx *bolt.Tx) error) error {
	if s.opts.ReadOnly {
		return errors.New("the checkpoint store is open read-only")
	}
	if s.opts.WriteFault != nil {
		if err := s.opts.WriteFault(); err != nil {
			return err
		}
	}
	size := s.fileSize()
	return guard(func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			tx.OnCommit(func() {
				st := tx.Stats()
				s.written.Add(st.GetPageAlloc() + int64(s.db.Info().PageSize))
				s.syncs.Add(2)
				if !s.db.NoGrowSync && s.fileSize() > size {
					s.syncs.Add(1)
				}
			})
			return f(tx)
		})
	})
}

func (s *Store) fileSize() int64 {
	st, err := os.Stat(s.db.Path())
	if err != nil {
		return 0
	}
	return st.Size()
}

// Wear is what the store made the kernel write back, in whole pages, and
// the syncs that did it, since it was opened.
func (s *Store) Wear() (written, syncs int64) { return s.written.Load(), s.syncs.Load() }

// LastID implements checkpoint.Store.
func (s *Store) LastID() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID, nil
}

// SaveLastID implements checkpoint.Store.
func (s *Store) SaveLastID(id uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if last, _ := s.LastID(); id <= last {
		return nil
	}
	if err := s.raiseHighWater(id); err != nil {
		return err
	}
	if err := s.update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put(keyLastID, binary.BigEndian.AppendUint64(nil, id))
	}); err != nil {
		return err
	}
	s.mu.Lock()
	s.lastID = max(s.lastID, id)
	s.mu.Unlock()
	return nil
}

// PutState implements checkpoint.Store: the snapshot is taken in, in
// chunks of ChunkSize (the last one shorter) each with its checksum, and
// written with the transaction of the checkpoint that names it
// (Complete). A checkpoint that never completes leaves nothing in the
// file.
func (s *Store) PutState(id uint64, task checkpoint.TaskID, data iter.Seq[[]byte]) (checkpoint.StateHandle, error) {
	if s.opts.ReadOnly {
		return checkpoint.StateHandle{}, errors.New("the checkpoint store is open read-only")
	}
	h := s.takeIn(id, task.String(), data)
	s.failpoint("blob-written")
	return h, nil
}

// takeIn takes in task's snapshot for checkpoint id (PutState).
func (s *Store) takeIn(id uint64, task string, data iter.Seq[[]byte]) checkpoint.StateHandle {
	h := checkpoint.StateHandle{Key: handleKey(id, task)}
	snap := &snapshot{id: id, task: task}
	for chunk := range chunks(data) {
		h.Append(chunk)
		snap.chunks = append(snap.chunks, encodeValue(chunk))
		snap.size += int64(len(chunk))
		s.failpoint("blob-chunk")
	}
	if len(snap.chunks) == 0 {
		snap.chunks = append(snap.chunks, encodeValue(nil)) // an empty snapshot is one empty chunk
	}
	s.mu.Lock()
	s.pending[h.Key] = snap
	s.mu.Unlock()
	return h
}

// chunks yields the concatenation of data's parts chunkSize bytes at a
// time. A chunk lying within one part is that part's bytes; one spanning
// parts is a copy. A small snapshot's chunk takes what it needs; after a
// full one, each starts at full size.
func chunks(data iter.Seq[[]byte]) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		var buf []byte // a chunk spanning parts, in the making
		full := false
		for p := range data {
			for len(p) > 0 {
				if len(buf) == 0 && len(p) >= chunkSize {
					if !yield(p[:chunkSize:chunkSize]) {
						return
					}
					p = p[chunkSize:]
					continue
				}
				if buf == nil && full {
					buf = make([]byte, 0, chunkSize)
				}
				n := min(len(p), chunkSize-len(buf))
				buf, p = append(buf, p[:n]...), p[n:]
				if len(buf) == chunkSize {
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

// ReadState implements checkpoint.Store. A snapshot taken in and not
// written yet is read from memory.
func (s *Store) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	s.mu.Lock()
	snap := s.pending[h.Key]
	s.mu.Unlock()
	if snap != nil {
		data := make([]byte, 0, snap.size)
		for _, c := range snap.chunks {
			chunk, err := decodeValue(c, chunkSize)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", checkpoint.ErrCorrupt, h.Key, err)
			}
			data = append(data, chunk...)
		}
		return data, checkpoint.Verify(h, data)
	}
	var data []byte
	err := s.view(func(tx *bolt.Tx) (err error) {
		data, err = readState(tx, h)
		return err
	})
	return verified(h, data, err)
}

// ReadStates reads the snapshots hs name as one view of the store: what
// a checkpoint commits meanwhile, its retention included, is not seen. The
// remote upload reads a checkpoint's state so.
func (s *Store) ReadStates(hs []checkpoint.StateHandle) ([][]byte, error) {
	out := make([][]byte, len(hs))
	var pending []int
	err := s.view(func(tx *bolt.Tx) error {
		for i, h := range hs {
			s.mu.Lock()
			_, ok := s.pending[h.Key]
			s.mu.Unlock()
			if ok {
				pending = append(pending, i)
				continue
			}
			data, err := readState(tx, h)
			if data, err = verified(h, data, err); err != nil {
				return err
			}
			out[i] = data
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			err = fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
		}
		return nil, err
	}
	for _, i := range pending {
		if out[i], err = s.ReadState(hs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// verified checks what readState read against h.
func verified(h checkpoint.StateHandle, data []byte, err error) ([]byte, error) {
	if err != nil {
		if !errors.Is(err, checkpoint.ErrCorrupt) {
			err = fmt.Errorf("%w: %s: %v", checkpoint.ErrCorrupt, h.Key, err)
		}
		return nil, err
	}
	if err := checkpoint.Verify(h, data); err != nil {
		return nil, err
	}
	return data, nil
}

// readState reads the chunks of h's snapshot in a file of format 3,
// verifying each. Call it guarded.
func readState(tx *bolt.Tx, h checkpoint.StateHandle) ([]byte, error) {
	id, task, err := parseHandleKey(h.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
	}
	b := tx.Bucket(checkpointBucket(id))
	if b == nil {
		return nil, fmt.Errorf("%w: %s is missing", checkpoint.ErrCorrupt, h.Key)
	}
	data := make([]byte, 0, max(0, min(h.Size, 1<<30)))
	prefix := snapshotPrefix(task)
	c := b.Cursor()
	next := uint32(0)
	for k, v := c.Seek(prefix); isChunkOf(k, prefix); k, v = c.Next() {
		if _, i, _ := parseChunkKey(k); i != next || v == nil {
			return nil, fmt.Errorf("%w: %s has a missing or stray chunk", checkpoint.ErrCorrupt, h.Key)
		}
		chunk, err := decodeValue(v, max(ChunkSize, chunkSize))
		if err != nil {
			return nil, fmt.Errorf("%w: %s, chunk %d: %v", checkpoint.ErrCorrupt, h.Key, next, err)
		}
		data = append(data, chunk...)
		next++
	}
	if next == 0 {
		return nil, fmt.Errorf("%w: %s is missing", checkpoint.ErrCorrupt, h.Key)
	}
	return data, nil
}

// Complete implements checkpoint.Store: one write transaction writes the
// snapshots m names that are not in the file yet, its completion record
// and the deletes of retention, and commits: m and everything it names
// are durable together once it returns (I4), and nothing of it is there
// if it fails. Retention keeps the newest Retain completed checkpoints and
// the checkpoint buckets that their snapshots and chains are in; a bucket
// kept only for the snapshots newer checkpoints share loses its completion
// record, so that the file holds, and lists, just the retained checkpoints.
func (s *Store) Complete(m *checkpoint.Manifest) error {
	record, err := encodeRecord(m)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	var writes []*snapshot
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			snap := s.pending[h.Key]
			size, stored := s.stored[h.Key]
			switch {
			case snap != nil && snap.size == h.Size:
				if !slices.Contains(writes, snap) {
					writes = append(writes, snap)
				}
			case snap == nil && stored && size == h.Size:
			default:
				s.mu.Unlock()
				return fmt.Errorf("checkpoint %d: state %s of %s is not stored", m.ID, h.Key, a.Task)
			}
		}
	}
	kept := slices.Insert(slices.Clone(s.completed), 0, m)
	slices.SortStableFunc(kept, func(a, b *checkpoint.Manifest) int { return cmp.Compare(b.ID, a.ID) })
	kept = kept[:min(len(kept), s.opts.Retain)]
	needed := neededBuckets(kept)
	var dropped, retired []uint64
	for id := range s.buckets {
		if !needed[id] {
			dropped = append(dropped, id)
		}
	}
	for _, old := range s.completed {
		if needed[old.ID] && !slices.Contains(kept, old) {
			retired = append(retired, old.ID) // its bucket holds snapshots kept ones share
		}
	}
	s.mu.Unlock()
	s.failpoint("before-completion")
	err = s.update(func(tx *bolt.Tx) error {
		for _, snap := range writes {
			b, err := tx.CreateBucketIfNotExists(checkpointBucket(snap.id))
			if err != nil {
				return err
			}
			b.FillPercent = 1 // written once, in key order: pack pages full
			for i, c := range snap.chunks {
				if err := b.Put(chunkKey(snap.task, uint32(i)), c); err != nil {
					return err
				}
			}
		}
		b, err := tx.CreateBucketIfNotExists(checkpointBucket(m.ID))
		if err != nil {
			return err
		}
		b.FillPercent = 1
		if err := b.Put(keyRecord, record); err != nil {
			return err
		}
		for _, id := range dropped {
			if err := tx.DeleteBucket(checkpointBucket(id)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
		}
		for _, id := range retired {
			if b := tx.Bucket(checkpointBucket(id)); b != nil {
				if err := b.Delete(keyRecord); err != nil {
					return err
				}
			}
		}
		s.failpoint("retention")
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing checkpoint %d: %w", m.ID, err)
	}
	s.failpoint("after-completion")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, snap := range writes {
		key := handleKey(snap.id, snap.task)
		if s.pending[key] == snap {
			delete(s.pending, key)
		}
		s.stored[key] = snap.size
		s.buckets[snap.id] = true
	}
	s.buckets[m.ID] = true
	for _, id := range dropped {
		delete(s.buckets, id)
	}
	for key := range s.stored {
		if id, _, err := parseHandleKey(key); err != nil || !s.buckets[id] {
			delete(s.stored, key)
		}
	}
	s.completed = kept
	s.lastID = max(s.lastID, m.ID)
	// The id mark follows the completion record, never goes before it: a
	// mark above every id the store holds says checkpoints that completed
	// were lost, and a start refuses to run empty on it; a crash between
	// the two must not say so of one that never completed.
	if err := s.raiseHighWater(m.ID); err != nil {
		return fmt.Errorf("checkpoint %d is complete, but its id mark: %w", m.ID, err)
	}
	return nil
}

// neededBuckets are the checkpoint buckets that hold what ms name: their
// completion records and every snapshot of their chains.
func neededBuckets(ms []*checkpoint.Manifest) map[uint64]bool {
	needed := make(map[uint64]bool)
	for _, m := range ms {
		needed[m.ID] = true
		for _, a := range m.Subtasks {
			for _, h := range a.Handles() {
				if id, _, err := parseHandleKey(h.Key); err == nil {
					needed[id] = true
				}
			}
		}
	}
	return needed
}

// Discard implements checkpoint.Store: the snapshots of checkpoint id,
// taken in and not written, are forgotten.
func (s *Store) Discard(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, snap := range s.pending {
		if snap.id == id {
			delete(s.pending, key)
		}
	}
	return nil
}

// Completed implements checkpoint.Store: the newest Retain completed
// checkpoints.
func (s *Store) Completed() ([]*checkpoint.Manifest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.completed[:min(len(s.completed), s.opts.Retain)]), nil
}
