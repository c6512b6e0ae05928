package localrecovery

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/cairn-edge/cairn/checkpoint"
)

// The layout of the store's bbolt file, format 3 (the package doc says
// why it is so). Its names are text, for the bbolt command (`bbolt
// buckets`, `bbolt keys`: docs/checkpoints.md). Top-level buckets:
//
//	"meta"                 "magic"      → "cairn checkpoint store": the
//	                                      file is cairn's (ownerless)
//	                       "format"     → 1 byte: 3
//	                       "last_id"    → 8 bytes big-endian: an id taken (SaveLastID)
//	                       "moved_from" → what an earlier store held when it was
//	                                      moved into this file (rebuild)
//	"checkpoint <id:%020d>" a checkpoint's bucket:
//	                       "record"                     → its completion record: the
//	                                                      manifest as JSON, as a value
//	                       "state/<task>/<chunk:%08d>"  → a chunk of the subtask's
//	                                                      snapshot, as a value
//
// where a value is checksummed, and deflated when small (encodeValue).
//
// A checkpoint's bucket may lack its record: it holds the snapshots a
// store of format 2 kept under a checkpoint whose record had gone, which
// a retained checkpoint's chain names. Formats 1 and 2 (earlier.go) are
// moved into format 3 when opened.
//
// A file is cairn's by its magic. Files written before the magic, of
// every format, are cairn's by their shape: a format of 1 to 3 in meta,
// and no top-level bucket but those of that format; they are given the
// magic when opened to write (those of formats 1 and 2 with the new file
// they move into). A bbolt file without a bucket is one bbolt made and
// cairn had not written to yet. Any other file is not cairn's store, and
// is set aside untouched (Open).
const formatVersion = 3

var (
	bucketMeta      = []byte("meta")
	keyMagic        = []byte("magic")
	magic           = []byte("cairn checkpoint store")
	keyFormat       = []byte("format")
	keyLastID       = []byte("last_id")
	keyMoved        = []byte("moved_from")
	keyRecord       = []byte("record")
	checkpointNamed = "checkpoint "
	statePrefix     = "state/"
)

// ownerless returns why the file tx reads is not a checkpoint store of
// cairn's, "" if it is one (the layout's doc): it holds the magic; or a
// format of 1 to 3 in meta and no top-level bucket but that format's; or
// no bucket at all.
func ownerless(tx *bolt.Tx) string {
	meta := tx.Bucket(bucketMeta)
	if meta != nil && bytes.Equal(meta.Get(keyMagic), magic) {
		return ""
	}
	var names []string
	tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		names = append(names, string(name))
		return nil
	})
	if len(names) == 0 {
		return ""
	}
	if meta == nil || len(meta.Get(keyFormat)) != 1 {
		return fmt.Sprintf("it has no cairn mark, nor a format in a bucket %q (its buckets: %s)", bucketMeta, quoted(names))
	}
	format := meta.Get(keyFormat)[0]
	for _, name := range names {
		ok := name == string(bucketMeta)
		switch format {
		case 1:
			ok = ok || name == string(legacyBlobs) || name == string(bucketCheckpoints)
		case 2:
			ok = ok || name == string(bucketSnapshots) || name == string(bucketCheckpoints)
		case formatVersion:
			_, isCheckpoint := parseCheckpointBucket([]byte(name))
			ok = ok || isCheckpoint
		}
		if !ok {
			return fmt.Sprintf("it has no cairn mark, and a bucket %q, which cairn's store of format %d does not have", name, format)
		}
	}
	return ""
}

// quoted lists names, quoted, the first 5 of them.
func quoted(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(names)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}

// crc32c is the Castagnoli table of every checksum the store writes.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// checkpointBucket is the name of checkpoint id's bucket.
func checkpointBucket(id uint64) []byte {
	return fmt.Appendf(nil, "%s%020d", checkpointNamed, id)
}

// parseCheckpointBucket returns the id of a checkpoint bucket's name;
// false for another top-level bucket.
func parseCheckpointBucket(name []byte) (uint64, bool) {
	digits, ok := bytes.CutPrefix(name, []byte(checkpointNamed))
	if !ok || len(digits) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(string(digits), 10, 64)
	return id, err == nil
}

// chunkKey is the key of chunk i of task's snapshot in its checkpoint's
// bucket.
func chunkKey(task string, i uint32) []byte {
	return fmt.Appendf(nil, "%s%08d", snapshotPrefix(task), i)
}

// snapshotPrefix is what the keys of task's chunks start with.
func snapshotPrefix(task string) []byte {
	return []byte(statePrefix + task + "/")
}

// parseChunkKey returns the task and index of a chunk's key.
func parseChunkKey(k []byte) (task string, i uint32, ok bool) {
	rest, ok := bytes.CutPrefix(k, []byte(statePrefix))
	slash := bytes.LastIndexByte(rest, '/')
	if !ok || slash <= 0 || len(rest)-slash-1 != 8 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(string(rest[slash+1:]), 10, 32)
	if err != nil {
		return "", 0, false
	}
	return string(rest[:slash]), uint32(n), true
}

// A value of a checkpoint's bucket, a completion record or a chunk, is
// stored as an encoding (a byte: valueRaw or valueDeflate), the length
// of what it holds (uvarint), the bytes stored (deflated or not), then
// the CRC-32C of everything before it (4 bytes BE). A small value is
// deflated where that saves a tenth: at the reference load a
// checkpoint's record and snapshots then fit a page, where raw they take
// two (docs/checkpoints.md); a large one is stored raw, so that a large
// state's restore reads and checks its bytes and no more.
const (
	valueRaw     = 0
	valueDeflate = 1
	// deflateBelow is the size under which a value is deflated.
	deflateBelow = 64 << 10
	// maxRecord bounds what a record inflates to.
	maxRecord = 64 << 20
)

var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // the level is valid
	return w
}}

var inflaters = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}

// encodeValue is data as stored, in a new slice: deflated if it is
// smaller than deflateBelow and deflating saves a tenth.
func encodeValue(data []byte) []byte {
	head := binary.AppendUvarint([]byte{valueRaw}, uint64(len(data)))
	if len(data) < deflateBelow && len(data) >= 64 {
		var z bytes.Buffer
		z.Write(binary.AppendUvarint([]byte{valueDeflate}, uint64(len(data))))
		w := deflaters.Get().(*flate.Writer)
		w.Reset(&z)
		_, err := w.Write(data)
		if err = errors.Join(err, w.Close()); err == nil && z.Len()-len(head) < len(data)*9/10 {
			deflaters.Put(w)
			return binary.BigEndian.AppendUint32(z.Bytes(), crc32.Checksum(z.Bytes(), crc32c))
		}
		deflaters.Put(w)
	}
	v := make([]byte, 0, len(head)+len(data)+4)
	v = append(append(v, head...), data...)
	return binary.BigEndian.AppendUint32(v, crc32.Checksum(v, crc32c))
}

// valueSize is the length of what a stored value holds, from its header.
func valueSize(v []byte) (int64, bool) {
	if len(v) < 1+1+4 || v[0] > valueDeflate {
		return 0, false
	}
	n, k := binary.Uvarint(v[1:])
	return int64(n), k > 0 && n <= math.MaxInt32
}

// decodeValue verifies a stored value and returns what it holds, at most
// limit bytes: v's own bytes if it is raw.
func decodeValue(v []byte, limit int) ([]byte, error) {
	n, ok := valueSize(v)
	if !ok {
		return nil, errors.New("not a value of the store")
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(body, crc32c) != sum {
		return nil, errors.New("fails its checksum")
	}
	stored := body[1+uvarintLen(uint64(n)):]
	if n > int64(limit) {
		return nil, fmt.Errorf("holds %d bytes, more than %d", n, limit)
	}
	if v[0] == valueRaw {
		if int64(len(stored)) != n {
			return nil, fmt.Errorf("holds %d bytes, says %d", len(stored), n)
		}
		return stored, nil
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(stored), nil); err != nil {
		return nil, err
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("does not inflate to its %d bytes: %v", n, err)
	}
	if k, _ := r.Read(make([]byte, 1)); k > 0 {
		return nil, fmt.Errorf("inflates to more than its %d bytes", n)
	}
	return data, nil
}

func uvarintLen(n uint64) int { return len(binary.AppendUvarint(nil, n)) }

// encodeRecord is a completion record as stored in format 3: the
// manifest as JSON, as a value (encodeValue).
func encodeRecord(m *checkpoint.Manifest) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return encodeValue(js), nil
}

// decodeRecord decodes and verifies a completion record of format 3.
func decodeRecord(v []byte) (*checkpoint.Manifest, error) {
	js, err := decodeValue(v, maxRecord)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	m := new(checkpoint.Manifest)
	if err := json.Unmarshal(js, m); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeEarlierRecord decodes and verifies a completion record of
// formats 1 and 2: the manifest as JSON, then its CRC-32C (4 bytes BE).
func decodeEarlierRecord(v []byte) (*checkpoint.Manifest, error) {
	if len(v) < 4 {
		return nil, errors.New("record too short")
	}
	js, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(js, crc32c) != sum {
		return nil, errors.New("record checksum mismatch")
	}
	m := new(checkpoint.Manifest)
	if err := json.Unmarshal(js, m); err != nil {
		return nil, err
	}
	return m, nil
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

// isChunkOf says whether k is a key of a chunk of the snapshot whose keys
// start with prefix.
func isChunkOf(k, prefix []byte) bool {
	return len(k) == len(prefix)+8 && bytes.HasPrefix(k, prefix)
}
