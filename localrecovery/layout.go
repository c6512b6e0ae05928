package localrecovery

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/cairn-edge/cairn/checkpoint"
)

// The layout of the store's bbolt file, format 3 (the package doc says
// why it is so). Its names are text, for the bbolt command (`bbolt
// buckets`, `bbolt keys`: docs/checkpoints.md). Top-level buckets:
//
//	"meta"                 "format"     → 1 byte: 3
//	                       "last_id"    → 8 bytes big-endian: an id taken (SaveLastID)
//	                       "moved_from" → what an earlier store held when it was
//	                                      moved into this file (rebuild)
//	"checkpoint <id:%020d>" a checkpoint's bucket:
//	                       "record"                     → its completion record: the
//	                                                      manifest as JSON, then its
//	                                                      CRC-32C (4 bytes BE)
//	                       "state/<task>/<chunk:%08d>"  → a chunk of the subtask's
//	                                                      snapshot, then the chunk's
//	                                                      CRC-32C (4 bytes BE)
//
// A checkpoint's bucket may lack its record: it holds the snapshots a
// store of format 2 kept under a checkpoint whose record had gone, which
// a retained checkpoint's chain names. Formats 1 and 2 (earlier.go) are
// moved into format 3 when opened.
const formatVersion = 3

var (
	bucketMeta      = []byte("meta")
	keyFormat       = []byte("format")
	keyLastID       = []byte("last_id")
	keyMoved        = []byte("moved_from")
	keyRecord       = []byte("record")
	checkpointNamed = "checkpoint "
	statePrefix     = "state/"
)

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

// chunkValue is a chunk as stored: its bytes, then their CRC-32C.
func chunkValue(chunk []byte) []byte {
	v := make([]byte, 0, len(chunk)+4)
	return binary.BigEndian.AppendUint32(append(v, chunk...), crc32.Checksum(chunk, crc32c))
}

// chunkData verifies a stored chunk and returns its bytes (v's).
func chunkData(v []byte) ([]byte, error) {
	if len(v) < 4 {
		return nil, errors.New("a chunk shorter than its checksum")
	}
	data, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(data, crc32c) != sum {
		return nil, errors.New("a chunk fails its checksum")
	}
	return data, nil
}

// encodeRecord is a completion record as stored (formats 1 to 3).
func encodeRecord(m *checkpoint.Manifest) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint32(js, crc32.Checksum(js, crc32c)), nil
}

// decodeRecord decodes and verifies a completion record.
func decodeRecord(v []byte) (*checkpoint.Manifest, error) {
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
