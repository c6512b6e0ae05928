package localrecovery

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/seglog"
)

// ChunkSize is the largest piece of a snapshot stored in one record.
const ChunkSize = 1 << 20

// Options configure a Store.
type Options struct {
	// Retain is how many completed checkpoints to keep; default 3.
	Retain int
	// SegmentBytes is the size of the log's segment files; default 4 MiB.
	SegmentBytes int64
	// Logger receives what the store finds and does; default slog.Default.
	Logger *slog.Logger
	// Failpoint, if set, is called by name at the points of the write path
	// where a crash is most interesting: "blob-chunk" (after each chunk of
	// a snapshot is appended), "blob-written", "before-completion",
	// "after-completion" (synced), "retention" (before segments are
	// deleted). Crash tests kill the process there.
	Failpoint func(name string)
	// ReadOnly opens the store to list and read it only (seglog.Options):
	// nothing is moved, cut, locked, deleted or written; Damage says what
	// a store opened to write would cut. The directory must exist.
	ReadOnly bool
	// HighWater, if set, is a file outside dir that keeps the highest
	// checkpoint id too (highwater.go): LastID is at least what it holds,
	// even after the store's directory is lost.
	HighWater string
	// WriteFault, if set, is asked before every write and sync of the
	// log's files and of HighWater; an error fails it as a full or broken disk would, and
	// the log rolls back to its last sync. Tests inject ENOSPC with it.
	WriteFault func() error
}

// Store is checkpoint storage in a segmented log (see the package doc). It
// is safe for concurrent use.
type Store struct {
	dir   string
	opts  Options
	log   *seglog.Log
	meter seglog.Meter
	lock  func() error

	// mu guards the fields below, and every append to and sync of the
	// log is made holding it: a failed one rolls back whatever any writer
	// appended since the last sync, which only the one holding mu can
	// account for (failed) before another writer builds on it.
	mu sync.Mutex
	// blobs are the stored snapshots by handle key: where their chunks
	// are, in order.
	blobs map[string]*blob
	// completed are the retained completion records, newest first.
	completed []completion
	lastID    uint64
	// highWater is what Options.HighWater holds; hwFile is it, open to
	// write.
	highWater uint64
	hwFile    *os.File
	// lastIDOff is where the newest last-id record is: retention keeps it
	// while its id is above every completed checkpoint's.
	lastIDOff uint64
	// rollbacks counts failed appends and syncs, which roll back
	// everything not synced: a snapshot written across one is lost.
	rollbacks int
	// damage is what Open found (Damage).
	damage []string
}

// blob is a snapshot in the log.
type blob struct {
	id     uint64   // the checkpoint it was stored for
	chunks []uint64 // the offsets of its chunk records, in order
	size   int64
}

// completion is a completion record and where it is.
type completion struct {
	m   *checkpoint.Manifest
	off uint64
}

var _ checkpoint.Store = (*Store)(nil)

// Open opens or creates the store in dir. A store that an earlier cairn
// kept in the bbolt file dir+".db" is moved into it first (see the package
// doc). A torn write at the end of the log is cut; damage in its older
// segments hides what follows it in that segment, and is logged.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Retain <= 0 {
		opts.Retain = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if !opts.ReadOnly {
		if err := migrateBolt(dir+".db", dir, opts); err != nil {
			return nil, err
		}
	}
	return open(dir, opts)
}

func open(dir string, opts Options) (*Store, error) {
	s := &Store{dir: dir, opts: opts, blobs: make(map[string]*blob), lock: func() error { return nil }}
	var err error
	if !opts.ReadOnly {
		if err := seglog.MkdirDurable(seglog.OS, dir); err != nil {
			return nil, fmt.Errorf("checkpoint store %s: %w", dir, err)
		}
		if s.lock, err = seglog.LockDir(dir); err != nil {
			return nil, fmt.Errorf("checkpoint store: %w", err)
		}
	}
	fs := seglog.OS
	if opts.WriteFault != nil {
		fs = faultFS{fs, opts.WriteFault}
	}
	s.log, err = seglog.Open(dir, seglog.Options{SegmentBytes: opts.SegmentBytes, FS: fs, Meter: &s.meter, Logger: opts.Logger, ReadOnly: opts.ReadOnly})
	if err != nil {
		s.lock()
		return nil, fmt.Errorf("checkpoint store %s: %w", dir, err)
	}
	s.damage = s.log.Damage()
	if err := s.load(); err != nil {
		s.Close()
		return nil, err
	}
	s.readHighWater()
	return s, nil
}

// readHighWater reads Options.HighWater and raises lastID to it: the store
// lost the checkpoints above its own ids.
func (s *Store) readHighWater() {
	if s.opts.HighWater == "" {
		return
	}
	hw, err := readHighWater(s.opts.HighWater)
	if err != nil {
		s.opts.Logger.Error("checkpoint id mark unreadable; ids continue from the store's", "err", err)
	}
	s.highWater = hw
	if hw > s.lastID {
		s.opts.Logger.Warn("the checkpoint store lost checkpoints: it holds ids up to a lower one than were taken; ids continue above the highest taken",
			"dir", s.dir, "store_last_id", s.lastID, "taken", hw)
		s.lastID = hw
	}
}

// raiseHighWater records id in Options.HighWater if it is higher than
// what that holds. Called with s.mu held.
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

// load reads the log into the index: every chunk, completion record and
// id. A segment that fails verification is read up to the damage.
func (s *Store) load() error {
	var completed []completion
	segs := s.log.Segments()
	for i, first := range segs {
		end := uint64(math.MaxUint64)
		if i+1 < len(segs) {
			end = segs[i+1]
		}
		var bad error
		err := s.log.Read(first, func(r seglog.Record) bool {
			if r.Offset >= end {
				return false // the next segment's
			}
			if r.Damage != "" {
				// Lost: logged by the log; what names the records lost
				// fails its verification when it is restored.
				s.damage = append(s.damage, fmt.Sprintf("records %d to %d: %s", r.Offset, r.End()-1, r.Damage))
				return true
			}
			e, err := decodeEntry(r.Data)
			if err != nil {
				bad = fmt.Errorf("record %d: %w", r.Offset, err)
				return false
			}
			switch e.kind {
			case chunkRecord:
				s.indexChunk(e, r.Offset)
			case completionRecord:
				completed = append(completed, completion{e.manifest, r.Offset})
				s.lastID = max(s.lastID, e.manifest.ID)
			case lastIDRecord:
				if e.id > s.lastID {
					s.lastID, s.lastIDOff = e.id, r.Offset
				}
			}
			return true
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			// Records past the damage in this segment are lost; the next
			// segment is read, and what names the lost ones fails its
			// verification when it is restored.
			s.damage = append(s.damage, err.Error())
			s.opts.Logger.Error("checkpoint store damaged; reading on after it", "dir", s.dir, "err", err)
		}
	}
	// Newest first; of two records of one id (there should be none), the
	// later.
	slices.SortFunc(completed, func(a, b completion) int { return cmp.Or(cmp.Compare(b.m.ID, a.m.ID), cmp.Compare(b.off, a.off)) })
	completed = slices.CompactFunc(completed, func(a, b completion) bool { return a.m.ID == b.m.ID })
	s.completed = completed
	newest := uint64(0)
	if len(completed) > 0 {
		newest = completed[0].m.ID
	}
	for key, b := range s.blobs {
		if b.id > newest {
			s.opts.Logger.Info("discarding state of a checkpoint that never completed", "id", b.id, "state", key)
			delete(s.blobs, key)
		}
	}
	if s.opts.ReadOnly {
		return nil
	}
	return s.retain()
}

// Damage describes the damage Open found in the store's files: what it
// cut at the end (read-only: would cut) and what hid the rest of an older
// segment; nil if none.
func (s *Store) Damage() []string { return s.damage }

// indexChunk adds a chunk read at off to its snapshot; chunk 0 starts the
// snapshot afresh (a retry after a failed write).
func (s *Store) indexChunk(e entry, off uint64) {
	b := s.blobs[e.key]
	if e.index == 0 || b == nil {
		id, _, err := parseHandleKey(e.key)
		if err != nil {
			return
		}
		b = &blob{id: id}
		s.blobs[e.key] = b
	}
	if e.index != len(b.chunks) {
		return // a stray chunk: the snapshot fails its verification
	}
	b.chunks = append(b.chunks, off)
	b.size += int64(len(e.data))
}

// Close closes the log.
func (s *Store) Close() error {
	err := s.log.Close()
	if s.hwFile != nil {
		err = errors.Join(err, s.hwFile.Sync(), s.hwFile.Close())
		s.hwFile = nil
	}
	if s.lock != nil {
		err = errors.Join(err, s.lock())
		s.lock = nil
	}
	return err
}

func (s *Store) failpoint(name string) {
	if s.opts.Failpoint != nil {
		s.opts.Failpoint(name)
	}
}

// Wear is what the store made the kernel write back, in whole pages, and
// the syncs that did it, since it was opened.
func (s *Store) Wear() (written, syncs int64) { return s.meter.Written(), s.meter.Syncs() }

// LastID implements checkpoint.Store.
func (s *Store) LastID() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastID, nil
}

// SaveLastID implements checkpoint.Store.
func (s *Store) SaveLastID(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id <= s.lastID {
		return nil
	}
	if err := s.raiseHighWater(id); err != nil {
		return err
	}
	off, err := s.log.Append(1, encodeLastID(id))
	if err != nil {
		return s.failed(err)
	}
	if err := s.log.Sync(); err != nil {
		return s.failed(err)
	}
	s.lastID, s.lastIDOff = id, off
	return nil
}

// failed forgets the snapshots whose chunks a failed append or sync rolled
// back with everything not synced, and returns err. Called with s.mu held.
func (s *Store) failed(err error) error {
	s.rollbacks++
	synced := s.log.Synced()
	for key, b := range s.blobs {
		if len(b.chunks) > 0 && b.chunks[len(b.chunks)-1] >= synced {
			delete(s.blobs, key)
		}
	}
	return err
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

// PutState implements checkpoint.Store: the snapshot is appended in chunks
// of ChunkSize (the last one shorter), one record each, as it is encoded;
// it is durable once the completion record of a checkpoint naming it is
// (Complete syncs the log once for both). A snapshot whose writing fails
// half way is named by no completion record and goes with its segment.
func (s *Store) PutState(id uint64, task checkpoint.TaskID, data iter.Seq[[]byte]) (checkpoint.StateHandle, error) {
	name := task.String()
	key := handleKey(id, name)
	h := checkpoint.StateHandle{Key: key}
	b := &blob{id: id}
	s.mu.Lock()
	rollbacks := s.rollbacks
	s.mu.Unlock()
	put := func(i int, chunk []byte) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		off, err := s.log.Append(1, chunkHeader(key, i), chunk)
		if err != nil {
			return s.failed(err)
		}
		b.chunks = append(b.chunks, off)
		b.size += int64(len(chunk))
		h.Append(chunk)
		s.failpoint("blob-chunk")
		return nil
	}
	var err error
	for chunk := range chunks(data) {
		if err = put(len(b.chunks), chunk); err != nil {
			break
		}
	}
	if err == nil && len(b.chunks) == 0 {
		err = put(0, nil) // an empty snapshot is one empty chunk
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return checkpoint.StateHandle{}, fmt.Errorf("storing state of %s for checkpoint %d: %w", name, id, err)
	}
	if s.rollbacks != rollbacks {
		return checkpoint.StateHandle{}, fmt.Errorf("storing state of %s for checkpoint %d: a failed write meanwhile rolled the log back", name, id)
	}
	s.blobs[key] = b
	s.failpoint("blob-written")
	return h, nil
}

// chunks yields the concatenation of data's parts ChunkSize bytes at a
// time. A chunk lying within one part is that part's bytes; one spanning
// parts is a copy.
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

// ReadState implements checkpoint.Store. A snapshot that is not durable
// yet (of a checkpoint not complete) is made durable first: readers of
// the log read only what is.
func (s *Store) ReadState(h checkpoint.StateHandle) ([]byte, error) {
	s.mu.Lock()
	b := s.blobs[h.Key]
	var offs []uint64
	if b != nil {
		offs = slices.Clone(b.chunks)
	}
	if len(offs) > 0 && offs[len(offs)-1] >= s.log.Synced() {
		if err := s.log.Sync(); err != nil {
			err = s.failed(err)
			s.mu.Unlock()
			return nil, err
		}
	}
	s.mu.Unlock()
	if len(offs) == 0 {
		return nil, fmt.Errorf("%w: %s is missing", checkpoint.ErrCorrupt, h.Key)
	}
	data := make([]byte, 0, max(0, min(h.Size, 1<<30)))
	next := 0 // the chunk due
	var bad error
	err := s.log.Read(offs[0], func(r seglog.Record) bool {
		if r.Offset != offs[next] {
			return true // another snapshot's, or another record
		}
		e, err := decodeEntry(r.Data)
		if err != nil || e.kind != chunkRecord || e.key != h.Key || e.index != next {
			bad = fmt.Errorf("%w: %s: record %d is not its chunk %d", checkpoint.ErrCorrupt, h.Key, r.Offset, next)
			return false
		}
		data = append(data, e.data...)
		next++
		return next < len(offs)
	})
	switch {
	case bad != nil:
		return nil, bad
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", checkpoint.ErrCorrupt, h.Key, err)
	case next < len(offs):
		return nil, fmt.Errorf("%w: %s: %d of its %d chunks read", checkpoint.ErrCorrupt, h.Key, next, len(offs))
	}
	if err := checkpoint.Verify(h, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Complete implements checkpoint.Store: it checks that every snapshot m
// names is stored, appends the completion record and syncs the log, which
// makes the record and the snapshots before it durable together (I4), then
// applies retention.
func (s *Store) Complete(m *checkpoint.Manifest) error {
	record, err := encodeCompletion(m)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			if b := s.blobs[h.Key]; b == nil || b.size != h.Size {
				return fmt.Errorf("checkpoint %d: state %s of %s is not stored", m.ID, h.Key, a.Task)
			}
		}
	}
	s.failpoint("before-completion")
	if err := s.raiseHighWater(m.ID); err != nil {
		return fmt.Errorf("checkpoint %d: %w", m.ID, err)
	}
	fail := func(err error) error {
		return fmt.Errorf("writing the completion record of checkpoint %d: %w", m.ID, s.failed(err))
	}
	off, err := s.log.Append(1, record)
	if err != nil {
		return fail(err)
	}
	if err := s.log.Sync(); err != nil {
		return fail(err)
	}
	s.failpoint("after-completion")
	s.completed = slices.Insert(s.completed, 0, completion{m, off})
	s.lastID = max(s.lastID, m.ID)
	if err := s.retain(); err != nil {
		// The checkpoint is complete; what was not deleted goes next time.
		s.opts.Logger.Warn("checkpoint retention failed", "err", err)
	}
	return nil
}

// retain keeps the newest Retain completed checkpoints and what they
// reference, forgets the rest, and deletes the segments that hold nothing
// kept: the log's front up to the oldest record still needed, by the
// retained checkpoints or by checkpoints in flight (newer than the newest
// completed). Called with s.mu held.
func (s *Store) retain() error {
	s.completed = s.completed[:min(len(s.completed), s.opts.Retain)]
	referenced := make(map[string]bool)
	keep := s.log.Synced() // the oldest offset still needed
	newest := uint64(0)
	for _, c := range s.completed {
		keep = min(keep, c.off)
		newest = max(newest, c.m.ID)
	}
	if s.lastID > newest && s.lastIDOff > 0 {
		keep = min(keep, s.lastIDOff)
	}
	for _, c := range s.completed {
		for _, a := range c.m.Subtasks {
			for _, h := range a.Handles() {
				referenced[h.Key] = true
			}
		}
	}
	for key, b := range s.blobs {
		switch {
		case referenced[key] || b.id > newest:
			if len(b.chunks) > 0 {
				keep = min(keep, b.chunks[0])
			}
		default:
			delete(s.blobs, key)
		}
	}
	s.failpoint("retention")
	return s.log.TruncateFront(keep)
}

// Discard implements checkpoint.Store: the snapshots of checkpoint id are
// forgotten, and go with their segments.
func (s *Store) Discard(id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, b := range s.blobs {
		if b.id == id {
			delete(s.blobs, key)
		}
	}
	return nil
}

// Completed implements checkpoint.Store.
func (s *Store) Completed() ([]*checkpoint.Manifest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*checkpoint.Manifest, len(s.completed))
	for i, c := range s.completed {
		out[i] = c.m
	}
	return out, nil
}
