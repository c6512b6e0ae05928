package localrecovery

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/cairn-edge/cairn/checkpoint"
)

// The store's records, each one record of its log (package seglog, which
// frames and checksums it), starting with its kind.
const (
	// chunkRecord: the snapshot's key (uvarint length, bytes), the
	// chunk's index (uvarint), the chunk's bytes.
	chunkRecord = 'C'
	// completionRecord: the manifest as JSON.
	completionRecord = 'M'
	// lastIDRecord: a checkpoint id (uvarint) taken (SaveLastID).
	lastIDRecord = 'L'
)

// entry is a decoded record.
type entry struct {
	kind     byte
	key      string // chunk
	index    int    // chunk
	data     []byte // chunk: its bytes, valid as long as the record's
	manifest *checkpoint.Manifest
	id       uint64 // last id
}

// chunkHeader is a chunk record's bytes before its data.
func chunkHeader(key string, index int) []byte {
	h := append(make([]byte, 0, 1+binary.MaxVarintLen64*2+len(key)), chunkRecord)
	h = binary.AppendUvarint(h, uint64(len(key)))
	h = append(h, key...)
	return binary.AppendUvarint(h, uint64(index))
}

func encodeCompletion(m *checkpoint.Manifest) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte{completionRecord}, js...), nil
}

func encodeLastID(id uint64) []byte { return binary.AppendUvarint([]byte{lastIDRecord}, id) }

// decodeEntry decodes a record.
func decodeEntry(data []byte) (entry, error) {
	if len(data) == 0 {
		return entry{}, errors.New("empty record")
	}
	e := entry{kind: data[0]}
	p := data[1:]
	switch e.kind {
	case chunkRecord:
		n, k := binary.Uvarint(p)
		if k <= 0 || n > uint64(len(p)-k) {
			return e, errors.New("chunk record: bad key")
		}
		e.key, p = string(p[k:k+int(n)]), p[k+int(n):]
		i, k := binary.Uvarint(p)
		if k <= 0 || i > math.MaxInt32 {
			return e, errors.New("chunk record: bad index")
		}
		e.index, e.data = int(i), p[k:]
	case completionRecord:
		e.manifest = new(checkpoint.Manifest)
		if err := json.Unmarshal(p, e.manifest); err != nil {
			return e, fmt.Errorf("completion record: %w", err)
		}
	case lastIDRecord:
		id, k := binary.Uvarint(p)
		if k <= 0 || k != len(p) {
			return e, errors.New("last id record: bad id")
		}
		e.id = id
	default:
		return e, fmt.Errorf("unknown record kind %q", e.kind)
	}
	return e, nil
}
