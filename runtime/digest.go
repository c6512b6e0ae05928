package runtime

import (
	"hash/crc32"
	"hash/maphash"
	"iter"

	"github.com/cairn-edge/cairn/checkpoint"
)

// A checkpoint that changes nothing writes nothing. A subtask's snapshot
// whose bytes are its base's again is not stored: its acknowledgement
// names the base's state (storeSnapshot). A checkpoint whose every subtask
// did so, at the same offsets and watermarks, restores to what the newest
// completion record written restores to: it completes without a record
// of its own (records.elide), and names that one (Manifest.SameAs). An
// idle pipeline so writes nothing, whatever its checkpoint interval; the
// ids of such checkpoints may be issued again after a crash, as nothing
// outside the agent names them (checkpoint package doc).

// storeSnapshot stores req's snapshot, unless it is its base's bytes
// again, and returns the acknowledgement. A snapshot whose keyed state
// did not change is encoded once to see; one whose keyed state changed is
// stored as it is encoded.
func storeSnapshot(store checkpoint.Store, t *task, req snapshotRequest) (checkpoint.Ack, error) {
	var d digest
	if !req.frozen.KeyedChanged() {
		d = digestOf(req.frozen.Parts())
		if chain, ok := t.chains.unchanged(d); ok {
			return t.reused(req, chain, d), nil
		}
	}
	parts := req.frozen.Parts()
	if d.size == 0 {
		parts = digesting(parts, &d)
	}
	h, err := store.PutState(req.id, t.id, parts)
	if err != nil {
		return checkpoint.Ack{}, err
	}
	return t.stored(req, h, d), nil
}

// records decides which checkpoints get a completion record of their own.
type records struct {
	last       *checkpoint.Manifest // the newest whose record the job's store holds
	savepoints map[uint64]bool      // in flight; a savepoint is always written
}

// written notes that m's completion record is in the job's store.
func (r *records) written(m *checkpoint.Manifest) { r.last = m }

// finalized forgets checkpoint id, whose completion record was written or
// failed to be.
func (r *records) finalized(id uint64) { delete(r.savepoints, id) }

// savepoint notes that checkpoint id is a savepoint.
func (r *records) savepoint(id uint64) {
	if r.savepoints == nil {
		r.savepoints = make(map[uint64]bool)
	}
	r.savepoints[id] = true
}

// elide reports whether m restores to the same as the newest checkpoint
// written, and so completes without a record; it then sets m.SameAs.
func (r *records) elide(m *checkpoint.Manifest) bool {
	if r.last == nil || r.savepoints[m.ID] || !checkpoint.SameState(m, r.last) {
		return false
	}
	m.SameAs = r.last.ID
	r.finalized(m.ID)
	return true
}

// digest identifies a snapshot's bytes: their length, CRC-32C and a 64-bit
// hash (hash/maphash, seeded per process). Equal digests are taken for
// equal bytes: a snapshot whose digest is its base's is not stored again.
type digest struct {
	size int64
	crc  uint32
	hash uint64
}

// digestSeed seeds every digest of the process.
var digestSeed = maphash.MakeSeed()

// crcTable is the Castagnoli table of the stores' handles.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// digesting passes parts through, computing their digest into d as they
// go; a range that starts over starts the digest over.
func digesting(parts iter.Seq[[]byte], d *digest) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		var h maphash.Hash
		h.SetSeed(digestSeed)
		*d = digest{}
		for p := range parts {
			d.size += int64(len(p))
			d.crc = crc32.Update(d.crc, crcTable, p)
			h.Write(p)
			d.hash = h.Sum64()
			if !yield(p) {
				return
			}
		}
	}
}

// digestOf encodes parts and returns their digest.
func digestOf(parts iter.Seq[[]byte]) digest {
	var d digest
	for range digesting(parts, &d) {
	}
	return d
}
