package localrecovery

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/datadir"
)

// Stores read to move what of them verifies into a file of this format:
// the segmented log of the cairn before (segments.go), a bbolt file of the
// earliest builds (formats 1 and 2), and a damaged file of any format.
//
// The earliest builds kept, in format 2, three buckets:
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
// <id:8 BE><task>\x00<chunk:4 BE>.
var (
	bucketSnapshots   = []byte("snapshots")
	bucketCheckpoints = []byte("checkpoints")
	legacyBlobs       = []byte("blobs")
)

// earlier is a store read to move what of it verifies.
type earlier interface {
	// completed returns its completion records that verify, oldest
	// first.
	completed() []*checkpoint.Manifest
	// lastID is the highest id it shows taken.
	lastID() uint64
	// readState reads and verifies the snapshot h names.
	readState(h checkpoint.StateHandle) ([]byte, error)
	// damaged says it showed damage, and is to be kept aside once moved.
	damaged() bool
	close() error
}

// copyInto copies every completed checkpoint of from whose state verifies
// into to, oldest first (to's retention keeps the newest), with the
// snapshots of their chains, and the id taken; it returns how many it
// copied and lost. A checkpoint whose state cannot be read is lost; a
// write that fails fails the copy.
func copyInto(to *Store, from earlier, log *slog.Logger) (moved, lost int, err error) {
	for _, m := range from.completed() {
		err := copyCheckpoint(to, from, m)
		var damage *damageError
		switch {
		case errors.As(err, &damage) || errors.Is(err, checkpoint.ErrCorrupt):
			log.Error("checkpoint lost: its state does not verify", "id", m.ID, "err", err)
			to.Discard(m.ID)
			lost++
		case err != nil:
			return moved, lost, fmt.Errorf("checkpoint %d: %w", m.ID, err)
		default:
			moved++
		}
	}
	if err := to.SaveLastID(from.lastID()); err != nil {
		return moved, lost, fmt.Errorf("the id taken: %w", err)
	}
	return moved, lost, nil
}

// copyCheckpoint copies m's snapshots that to lacks, and its completion
// record.
func copyCheckpoint(to *Store, from earlier, m *checkpoint.Manifest) error {
	for _, a := range m.Subtasks {
		for _, h := range a.Handles() {
			to.mu.Lock()
			_, have := to.stored[h.Key]
			to.mu.Unlock()
			if have {
				continue
			}
			var data []byte
			if err := guard(func() (err error) {
				data, err = from.readState(h)
				return err
			}); err != nil {
				return err
			}
			id, task, err := parseHandleKey(h.Key)
			if err != nil {
				return &damageError{err}
			}
			to.takeIn(id, task, slices.Values([][]byte{data}))
		}
	}
	return to.Complete(m)
}

// boltFile reads a bbolt file of any format, also a damaged one, turning
// the faults its damage causes into errors.
type boltFile struct {
	db     *bolt.DB
	format byte
	broken bool // damaged: checkFile failed, or bbolt could not open it
	log    *slog.Logger
}

// openBoltFile opens the file at path read-only. A damaged one is padded
// first if it was cut short, so that its lost pages read as zeros; what it
// still holds that verifies can then be read.
func openBoltFile(path string, opts Options) *boltFile {
	f := &boltFile{log: opts.Logger}
	err := checkFile(path, opts)
	var damage *damageError
	if errors.As(err, &damage) {
		f.broken = true
		if m, err := checkHeader(path); err != nil && m.pageSize > 0 {
			if err := padTo(path, int64(m.highPage)*int64(m.pageSize)); err != nil {
				f.log.Error("cannot pad the damaged store", "err", err)
			}
		}
	}
	ro := opts
	ro.ReadOnly = true
	if err := guard(func() (err error) {
		f.db, err = bolt.Open(path, 0o600, boltOptions(ro))
		return err
	}); err != nil {
		f.broken = true
		f.log.Error("nothing salvaged: the damaged store cannot be opened", "err", err)
		return f
	}
	_ = guard(func() error {
		return f.db.View(func(tx *bolt.Tx) error {
			f.format = formatOf(tx)
			return nil
		})
	})
	return f
}

// formatOf says which format a file is of: 0 for a new one.
func formatOf(tx *bolt.Tx) byte {
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keyFormat); len(v) == 1 {
			return v[0]
		}
	}
	switch {
	case tx.Bucket(legacyBlobs) != nil:
		return 1
	case tx.Bucket(bucketSnapshots) != nil || tx.Bucket(bucketCheckpoints) != nil:
		return 2
	}
	return 0
}

func (f *boltFile) damaged() bool { return f.broken }

func (f *boltFile) close() error {
	if f.db == nil {
		return nil
	}
	return guard(f.db.Close)
}

func (f *boltFile) view(fn func(tx *bolt.Tx) error) error {
	if f.db == nil {
		return &damageError{errors.New("the file cannot be opened")}
	}
	return guard(func() error { return f.db.View(fn) })
}

func (f *boltFile) lastID() uint64 {
	var id uint64
	_ = f.view(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			if v := meta.Get(keyLastID); len(v) == 8 {
				id = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	for _, m := range f.completed() {
		id = max(id, m.ID)
	}
	return id
}

func (f *boltFile) completed() []*checkpoint.Manifest {
	if f.db == nil {
		return nil
	}
	if f.format == formatVersion {
		idx, err := readIndex(f.db, f.log)
		if err != nil {
			f.log.Error("the damaged store's records cannot all be read", "err", err)
		}
		slices.Reverse(idx.completed)
		return idx.completed
	}
	var ms []*checkpoint.Manifest
	if err := f.view(func(tx *bolt.Tx) error {
		records := tx.Bucket(bucketCheckpoints)
		if records == nil {
			return nil
		}
		return records.ForEach(func(k, v []byte) error {
			m, err := decodeEarlierRecord(v)
			if err != nil || len(k) != 8 || m.ID != binary.BigEndian.Uint64(k) {
				f.log.Error("skipping a damaged completion record", "key", fmt.Sprintf("%x", k), "err", err)
				return nil
			}
			ms = append(ms, m)
			return nil
		})
	}); err != nil {
		f.log.Error("no completion record can be read from the old store", "err", err)
	}
	return ms
}

// readState reads and verifies the snapshot h names, from its checkpoint's
// bucket (format 3), its own bucket (format 2) or the bucket of every
// chunk (format 1).
func (f *boltFile) readState(h checkpoint.StateHandle) ([]byte, error) {
	var data []byte
	err := f.view(func(tx *bolt.Tx) (err error) {
		if f.format == formatVersion {
			data, err = readState(tx, h)
		} else {
			data, err = readEarlierState(tx, h)
		}
		return err
	})
	return verified(h, data, err)
}

// readEarlierState reads the chunks of h's snapshot in a file of format 1
// or 2.
func readEarlierState(tx *bolt.Tx, h checkpoint.StateHandle) ([]byte, error) {
	id, task, err := parseHandleKey(h.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", checkpoint.ErrCorrupt, err)
	}
	prefix := binary.BigEndian.AppendUint64(nil, id)
	prefix = append(append(prefix, task...), 0)
	var data []byte
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
			return nil, err
		}
	} else if legacy := tx.Bucket(legacyBlobs); legacy != nil {
		c := legacy.Cursor()
		k, v := c.Seek(prefix)
		if err := chunks(c, k, v, prefix); err != nil {
			return nil, err
		}
	}
	if next == 0 {
		return nil, fmt.Errorf("%w: %s is missing", checkpoint.ErrCorrupt, h.Key)
	}
	return data, nil
}

// upgrade brings the store at path to this format before it is opened
// (see the package doc): it finishes a move that a crash interrupted, and
// moves the segmented log of the cairn before into the file. (Store.load
// moves a file of the earliest builds' formats.)
func upgrade(path string, opts Options) error {
	if err := finishMove(path, opts); err != nil {
		return err
	}
	return moveSegments(path, segmentsDir(path), opts)
}

// moving is the file a store is rebuilt in, beside path, before it is
// renamed to path.
func moving(path string) string { return path + ".moving" }

// finishMove deals with a rebuild (rebuild) that a crash interrupted: a
// whole one, whose file says what it was moved from, is renamed into
// place if nothing is there; another file of cairn's, whole, or empty, is
// removed, and the move will be done again. Anything else there, damaged
// or not cairn's, is set aside untouched (setAside).
func finishMove(path string, opts Options) error {
	tmp := moving(path)
	if _, err := os.Lstat(tmp); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) && movedMark(tmp) != "" {
		return renameDurable(tmp, path)
	}
	err := checkFile(tmp, opts)
	var damage *damageError
	var foreign *foreignError
	switch {
	case err == nil, errors.Is(err, errMissing):
		return os.Remove(tmp)
	case errors.As(err, &damage), errors.As(err, &foreign):
		what := "damaged"
		if foreign != nil {
			what = "foreign"
		}
		aside, serr := setAside(tmp, what)
		if serr != nil {
			return serr
		}
		opts.Logger.Error("an unfinished move of the checkpoint store is set aside untouched", "path", tmp, "aside", aside, "reason", err.Error())
		return nil
	}
	return fmt.Errorf("checkpoint store %s: %w", tmp, err)
}

// movedMark is what the file at path says it was moved from; "" if
// nothing, or it cannot be read.
func movedMark(path string) string {
	var mark string
	_ = guard(func() error {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond, OpenFile: datadir.OpenFile})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket(bucketMeta); meta != nil {
				mark = string(meta.Get(keyMoved))
			}
			return nil
		})
	})
	return mark
}

// rebuild writes a new store in moving(path) holding what of from
// verifies, marked as moved from mark (in a last transaction of its own:
// a file without the mark is not whole), and returns how many checkpoints
// it moved and lost. A write that fails (a full disk) fails it, and the
// new file is removed.
func rebuild(path string, from earlier, mark string, opts Options) (moved, lost int, err error) {
	tmp := moving(path)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, 0, err
	}
	o := Options{Retain: opts.Retain, Logger: opts.Logger, WriteFault: opts.WriteFault, tune: opts.tune}
	to := &Store{path: tmp, opts: o, pending: make(map[string]*snapshot)}
	if err := to.open(); err != nil {
		return 0, 0, errors.Join(err, os.Remove(tmp))
	}
	moved, lost, err = copyInto(to, from, opts.Logger)
	if err == nil {
		err = to.update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return meta.Put(keyMoved, []byte(mark))
		})
	}
	if err = errors.Join(err, to.Close()); err != nil {
		return moved, lost, errors.Join(err, os.Remove(tmp))
	}
	return moved, lost, nil
}

// replace rebuilds the store at path from the file there (of an earlier
// format, or damaged), and puts the new file in its place; with aside,
// the old file is kept aside (setAside) instead of replaced.
func replace(path, what string, aside bool, opts Options) error {
	from := openBoltFile(path, opts)
	moved, lost, err := rebuild(path, from, what, opts)
	err = errors.Join(err, from.close())
	if err != nil {
		return fmt.Errorf("moving the checkpoint store %s (%s) into format %d: %w", path, what, formatVersion, err)
	}
	if aside || from.damaged() {
		aside, err := setAside(path, "damaged")
		if err != nil {
			return err
		}
		opts.Logger.Warn("the damaged checkpoint store is kept aside", "path", aside)
	}
	if err := renameDurable(moving(path), path); err != nil {
		return err
	}
	opts.Logger.Info("checkpoint store moved into a new file", "path", path, "from", what, "checkpoints", moved, "lost", lost)
	return nil
}

// salvage sets the damaged file at path aside, and moves what of it
// verifies into a new file in its place.
func salvage(path string, damage *damageError, opts Options) error {
	opts.Logger.Error("checkpoint store is damaged; it is set aside, and what of it verifies moved into a new one", "path", path, "err", damage.cause)
	return replace(path, "a damaged file", true, opts)
}

// moveSegments moves the segmented log of the cairn before, in dir, into
// the store's file at path, once and safely across a crash: the file is
// made beside path (rebuild), marked with what dir holds, and renamed to
// path; then dir is removed, or if it showed damage renamed aside
// (dir.damaged-N). Where path is there already and dir still is, a crash
// came between the rename and dir's removal, or dir was written after the
// move (by an older cairn run on the same data directory, say), which the
// file does not hold. The mark tells them apart: in the first case dir
// goes; in the second the move fails, for neither can be chosen over the
// other without losing what the other holds. Without dir it does nothing.
func moveSegments(path, dir string, opts Options) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory (cairn kept its checkpoints there before)", dir)
	}
	mark, err := markOfDir(dir)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(path); err == nil {
		switch got := movedMark(path); got {
		case mark:
			return removeDurable(dir)
		case "":
			return fmt.Errorf("both %s and %s are there, and %s is not known to hold what %s does: keep one, and move the other away", dir, path, path, dir)
		default:
			return fmt.Errorf("%s was written to after it was moved into %s (by an older cairn?): keep one, and move the other away", dir, path)
		}
	}
	from, err := openSegments(dir, opts.Logger)
	if err != nil {
		return fmt.Errorf("moving the checkpoint store %s into %s: %w", dir, path, err)
	}
	moved, lost, err := rebuild(path, from, mark, opts)
	err = errors.Join(err, from.close())
	if err != nil {
		return fmt.Errorf("moving the checkpoint store %s into %s: %w", dir, path, err)
	}
	if err := renameDurable(moving(path), path); err != nil {
		return err
	}
	opts.Logger.Info("checkpoint store moved into a bbolt file", "from", dir, "to", path, "checkpoints", moved, "lost", lost)
	if from.damaged() {
		aside, err := setAside(dir, "damaged")
		if err == nil {
			opts.Logger.Warn("the damaged checkpoint store is kept aside", "path", aside)
		}
		return err
	}
	return removeDurable(dir)
}

// setAside renames the store at path (a file or a directory) that is
// damaged or foreign (what) to path.what-N, the first N free, for
// whoever wants to look at it, and returns that name. The rename changes
// nothing of what it holds.
func setAside(path, what string) (string, error) {
	for n := 1; ; n++ {
		aside := fmt.Sprintf("%s.%s-%d", path, what, n)
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			return aside, renameDurable(path, aside)
		}
	}
}

// renameDurable renames from to to, and syncs the directory.
func renameDurable(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// removeDurable removes the directory dir and all it holds, and syncs the
// directory above.
func removeDurable(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// damageError says a file is damaged, as opposed to locked or unreadable.
type damageError struct{ cause error }

func (e *damageError) Error() string { return e.cause.Error() }
func (e *damageError) Unwrap() error { return e.cause }

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
