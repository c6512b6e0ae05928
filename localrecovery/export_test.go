package localrecovery

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Damage helpers for tests that play a disk that went wrong, and the check
// each restart of a test makes; the store must be closed.

// CheckFile is the check Open makes of the file at path before it opens it
// to write: nil, or why it is damaged (bbolt's Tx.Check among others).
func CheckFile(path string) error {
	err := checkFile(path, Options{Logger: slog.New(slog.DiscardHandler)})
	if errors.Is(err, errMissing) {
		return nil
	}
	return err
}

// FlipNewestBlob flips one bit in the middle of a snapshot stored with the
// newest completed checkpoint, in its leaf or overflow page, and returns
// the checkpoint's id: its chunk fails its checksum, the file's structure
// is whole.
func FlipNewestBlob(path string) (uint64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	var id uint64
	var value []byte
	err = db.View(func(tx *bolt.Tx) error {
		c := tx.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			cid, ok := parseCheckpointBucket(k)
			b := tx.Bucket(k)
			if !ok || b.Get(keyRecord) == nil {
				continue
			}
			bc := b.Cursor()
			for ck, v := bc.First(); ck != nil; ck, v = bc.Next() {
				if _, i, ok := parseChunkKey(ck); ok && i == 0 && len(v) > 8 {
					id, value = cid, slices.Clone(v)
					return nil
				}
			}
			return errors.New("the newest checkpoint stored no snapshot of its own")
		}
		return errors.New("no completed checkpoint")
	})
	db.Close()
	if err != nil {
		return 0, err
	}
	// Where the value is in the file (bbolt copies an inline bucket's
	// values that are not aligned, so its pointer may not tell).
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	at := bytes.Index(data, value)
	if at < 0 || bytes.Contains(data[at+1:], value) {
		return 0, fmt.Errorf("checkpoint %d's chunk is not in the file once", id)
	}
	return id, flipByte(path, int64(at+len(value)/2), 0x08)
}

// flipByte flips the bits mask of the byte at off of the file at path.
func flipByte(path string, off int64, mask byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return err
	}
	b[0] ^= mask
	_, err = f.WriteAt(b[:], off)
	return err
}

// FlipPage flips, in a page of the type given ("branch" or "leaf") that a
// top-level bucket, the newest first, or else the root bucket starts at,
// the high bits of its first element's page number (branch) or its type
// (leaf): the file's structure is damaged, as bit rot in a page would
// leave it.
func FlipPage(path, typ string) error {
	m, err := checkHeader(path)
	if err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		return err
	}
	pgid := 0
	err = db.View(func(tx *bolt.Tx) error {
		roots := []int{}
		c := tx.Cursor()
		for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
			if b := tx.Bucket(k); b != nil && b.Root() != 0 {
				roots = append(roots, int(b.Root()))
			}
		}
		for _, root := range append(roots, int(m.root)) {
			info, err := tx.Page(root)
			if err != nil {
				return err
			}
			if info.Type == typ {
				pgid = root
				return nil
			}
		}
		return fmt.Errorf("no bucket starts at a %s page", typ)
	})
	db.Close()
	if err != nil {
		return err
	}
	// A page: id (8), flags (2), count (2), overflow (4), then its
	// elements: a branch's pos, ksize (4 each) and page id (8); a leaf's
	// flags, pos, ksize, vsize (4 each). A leaf's type is flipped, not an
	// element's position: a position flipped in a high bit points far
	// outside the file's mapping, where a test process under -race may
	// have memory of its own, which reads without a fault and, as
	// garbage, may even pass the check (the test failed so, at random).
	off := int64(pgid)*int64(m.pageSize) + 8 // the leaf's flags, low byte: 0x02, a leaf, becomes 0x12, no type
	if typ == "branch" {
		off = int64(pgid)*int64(m.pageSize) + 16 + 8 + 5 // the first page id's bits 40-47
	}
	return flipByte(path, off, 0x10)
}

// TruncateHalf cuts the file at path to half the pages it uses, as a copy
// that stopped half way would leave it.
func TruncateHalf(path string) error {
	m, err := checkHeader(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, int64(m.highPage/2)*int64(m.pageSize))
}

// Tuned is opts with bbolt's options changed by tune (BenchmarkOptions).
func Tuned(opts Options, tune func(*bolt.Options)) Options {
	opts.tune = tune
	return opts
}

// SetChunkSize makes the chunks of snapshots n bytes, and returns what
// sets them back (BenchmarkOptions).
func SetChunkSize(n int) func() {
	was := chunkSize
	chunkSize = n
	return func() { chunkSize = was }
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }
