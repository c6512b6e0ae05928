package localrecovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// bbolt's on-disk meta page (format version 2): a 16-byte page header, then
// magic, version, page size, flags (4 bytes each), root bucket (16), freelist
// page (8), high-water page id (8), txid (8), and an FNV-64a checksum of the
// 56 bytes before it. The file's two first pages are metas; the valid one
// with the higher txid is current.
const (
	metaOffset  = 16
	metaLen     = 56
	boltMagic   = 0xED0CDAED
	minPageSize = 512
	maxPageSize = 1 << 20
)

type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	highPage uint64 // pages in use: the file must hold highPage*pageSize bytes
	txid     uint64
}

// readMeta parses the meta at offset off of f; ok is false if it does not
// verify.
func readMeta(f *os.File, off int64) (boltMeta, bool) {
	buf := make([]byte, metaOffset+metaLen+8)
	if _, err := f.ReadAt(buf, off); err != nil {
		return boltMeta{}, false
	}
	m := buf[metaOffset:]
	h := fnv.New64a()
	h.Write(m[:metaLen])
	if binary.LittleEndian.Uint32(m[0:]) != boltMagic || h.Sum64() != binary.LittleEndian.Uint64(m[metaLen:]) {
		return boltMeta{}, false
	}
	return boltMeta{
		pageSize: binary.LittleEndian.Uint32(m[8:]),
		root:     binary.LittleEndian.Uint64(m[16:]),
		highPage: binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}, true
}

// errMissing says there is no file yet.
var errMissing = errors.New("no file")

// checkHeader checks, before bbolt maps the file, that it is whole: a
// verifying meta page, and at least as many bytes as its pages reach. A
// truncated file would otherwise fault when bbolt reads past its end. It
// returns the current meta.
func checkHeader(path string) (boltMeta, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return boltMeta{}, errMissing
	}
	if err != nil {
		return boltMeta{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return boltMeta{}, err
	}
	if st.Size() == 0 {
		return boltMeta{}, errMissing
	}
	m0, ok0 := readMeta(f, 0)
	var m1 boltMeta
	ok1 := false
	if ok0 && m0.pageSize >= minPageSize && m0.pageSize <= maxPageSize {
		m1, ok1 = readMeta(f, int64(m0.pageSize))
	} else {
		// The first meta is damaged: find the second at the usual sizes.
		for ps := int64(minPageSize); ps <= maxPageSize && !ok1; ps *= 2 {
			m1, ok1 = readMeta(f, ps)
			ok1 = ok1 && int64(m1.pageSize) == ps
		}
	}
	var m boltMeta
	switch {
	case ok0 && ok1:
		m = m0
		if m1.txid > m0.txid {
			m = m1
		}
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return boltMeta{}, fmt.Errorf("neither meta page verifies: not a bbolt file, or damaged")
	}
	if m.pageSize < minPageSize || m.pageSize > maxPageSize {
		return boltMeta{}, fmt.Errorf("meta page names page size %d", m.pageSize)
	}
	if need := int64(m.highPage) * int64(m.pageSize); st.Size() < need {
		return m, fmt.Errorf("truncated: the file is %d bytes, its pages reach %d", st.Size(), need)
	}
	return m, nil
}

// padTo extends the file at path with zeros to size bytes, so that reads of
// a truncated file's lost pages find zeros instead of faulting.
func padTo(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil || end >= size {
		return err
	}
	// Synced: the move's mark of the file (seglog.MoveInto) is of its
	// padded size, which must outlast a power cut as the mark does.
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// checkFile checks the store's file before it is opened to write, and
// returns errMissing when there is none (or it is empty), a *damageError
// when it is damaged, a *foreignError when it is a whole bbolt file that
// is not cairn's (ownerless), or another error (it is locked, or cannot
// be read):
// its header (checkHeader); then, opened read-only, a walk of every
// bucket, branch and leaf page and every key, in this goroutine, where a
// memory fault is an error (a page number that points past the end of
// the file, say); then bbolt's own consistency check (Tx.Check: every
// page reachable once or free, keys in order), which reads what the walk
// read. bbolt runs its check, and the scan of the free pages that opening
// a file to write makes when the free list is not synced, on goroutines
// of its own, where a fault would end the process; after the walk they
// read nothing it did not. A read-only open of a damaged file is checked
// the same way.
func checkFile(path string, opts Options) error {
	if _, err := checkHeader(path); err != nil {
		if errors.Is(err, errMissing) || os.IsPermission(err) {
			return err
		}
		return &damageError{err}
	}
	ro := opts
	ro.ReadOnly = true
	var db *bolt.DB
	if err := guard(func() (err error) {
		db, err = bolt.Open(path, 0o600, boltOptions(ro))
		return err
	}); err != nil {
		var damage *damageError
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return fmt.Errorf("%s is in use by a running cairn", path)
		case errors.As(err, &damage), errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return &damageError{err}
		}
		return err
	}
	defer guard(db.Close)
	var foreign string
	err := guard(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if err := walk(tx.Cursor(), tx.Bucket); err != nil {
				return err
			}
			var errs []error
			for err := range tx.Check() {
				errs = append(errs, err)
			}
			if len(errs) > 0 {
				return fmt.Errorf("bbolt's check: %w", errors.Join(errs...))
			}
			foreign = ownerless(tx)
			return nil
		})
	})
	if err != nil {
		var damage *damageError
		if !errors.As(err, &damage) {
			err = &damageError{err}
		}
		return err
	}
	if foreign != "" {
		return &foreignError{foreign}
	}
	return nil
}

// foreignError says a whole bbolt file is not cairn's store (ownerless):
// it is set aside untouched, never salvaged or written.
type foreignError struct{ why string }

func (e *foreignError) Error() string { return "not a checkpoint store of cairn's: " + e.why }

// walk reads every key under c, and every bucket's under it: the pages
// that hold them. bucket opens a nested bucket by name.
func walk(c *bolt.Cursor, bucket func([]byte) *bolt.Bucket) error {
	var sum byte
	for k, v := c.First(); k != nil; k, v = c.Next() {
		for _, b := range k {
			sum += b
		}
		if v == nil {
			if b := bucket(k); b != nil {
				if err := walk(b.Cursor(), b.Bucket); err != nil {
					return err
				}
			}
		}
	}
	walked.Add(int64(sum)) // keeps the reads
	return nil
}

// walked keeps the compiler from dropping walk's reads of the keys.
var walked atomic.Int64
