package localrecovery

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/wire"
)

// The store's records, each one record of its log (package seglog, which
// frames and checksums it), starting with its kind (a byte); their fields
// are wire's.
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
	h := make(wire.Encoder, 0, 1+2*10+len(key)) // two uvarints of at most 10 bytes
	h.Byte(chunkRecord)
	h.String(key)
	h.Uvarint(uint64(index))
	return h
}

func encodeCompletion(m *checkpoint.Manifest) ([]byte, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	r := make(wire.Encoder, 0, 1+len(js))
	r.Byte(completionRecord)
	r.Raw(js)
	return r, nil
}

func encodeLastID(id uint64) []byte {
	var r wire.Encoder
	r.Byte(lastIDRecord)
	r.Uvarint(id)
	return r
}

// decodeEntry decodes a record.
func decodeEntry(data []byte) (entry, error) {
	d := wire.NewDecoder(data)
	e := entry{kind: d.Byte()}
	if err := d.Err(); err != nil {
		return e, fmt.Errorf("empty record: %w", err)
	}
	switch e.kind {
	case chunkRecord:
		e.key = string(d.Bytes())
		i := d.Uvarint()
		if d.Err() == nil && i > math.MaxInt32 {
			d.Fail(fmt.Errorf("chunk index %d", i))
		}
		e.index, e.data = int(i), d.Rest()
		if err := d.Err(); err != nil {
			return e, fmt.Errorf("chunk record: %w", err)
		}
	case completionRecord:
		e.manifest = new(checkpoint.Manifest)
		if err := json.Unmarshal(d.Rest(), e.manifest); err != nil {
			return e, fmt.Errorf("completion record: %w", err)
		}
	case lastIDRecord:
		e.id = d.Uvarint()
		if err := d.End(); err != nil {
			return e, fmt.Errorf("last id record: %w", err)
		}
	default:
		return e, fmt.Errorf("unknown record kind %q", e.kind)
	}
	return e, nil
}
