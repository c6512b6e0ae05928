package localrecovery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
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
		highPage: binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}, true
}

// errMissing says there is no file yet.
var errMissing = errors.New("no file")

// checkFile checks, before bbolt maps the file, that it is whole: a
// verifying meta page, and at least as many bytes as its pages reach. A
// truncated file would otherwise fault when bbolt reads past its end. It
// returns the current meta.
func checkFile(path string) (boltMeta, error) {
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
