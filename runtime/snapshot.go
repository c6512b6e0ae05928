package runtime

import (
	"hash/crc32"
	"hash/maphash"
	"iter"
	"slices"
	"sync"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
)

// The asynchronous phase of a subtask's snapshot, the chains of its
// incremental snapshots (chains), and what it stores only once.
//
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

// chain is a stored snapshot and what it needs to be restored: the handles
// of an incremental chain, oldest (whole) first, ending with the snapshot's
// own, the keyed-state version it closed, and, when this process encoded
// it, the digest of its bytes.
type chain struct {
	version graph.Version
	handles []checkpoint.StateHandle
	digest  digest
}

// same reports whether the snapshot of digest d equals this chain's own:
// known, and the same bytes.
func (c *chain) same(d digest) bool { return c.digest.size > 0 && c.digest == d }

// chains tracks a subtask's snapshots for incremental checkpoints: base is
// the newest snapshot of a completed checkpoint, the one new increments
// build on; taken are snapshots whose checkpoint has no outcome yet. The
// asynchronous phase fills in handles, so a mutex guards taken.
type chains struct {
	incremental bool
	maxLen      int
	base        chain // no handles: nothing to build on yet
	mu          sync.Mutex
	taken       map[uint64]*chain
}

// next returns the base version and handles for the snapshot about to be
// taken, and whether it is incremental; a whole snapshot folds a chain
// that reached its maximum length.
func (c *chains) next() (graph.Version, []checkpoint.StateHandle, bool) {
	if !c.incremental || len(c.base.handles) == 0 || len(c.base.handles) >= c.maxLen {
		return c.base.version, nil, false
	}
	return c.base.version, c.base.handles, true
}

func (c *chains) took(id uint64, version graph.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.taken == nil {
		c.taken = make(map[uint64]*chain)
	}
	c.taken[id] = &chain{version: version}
}

// stored records where checkpoint id's snapshot went, and its digest;
// called by the asynchronous phase.
func (c *chains) stored(id uint64, handles []checkpoint.StateHandle, d digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.taken[id]; t != nil {
		t.handles, t.digest = handles, d
	}
}

// unchanged returns the chain of the base snapshot, if a snapshot of
// digest d would store the very same bytes again: the base's handles then
// describe the new snapshot too. Applying an incremental snapshot twice
// changes nothing (it sets keys and deletes keys), so a delta equal to the
// base's own adds nothing to the base's chain.
func (c *chains) unchanged(d digest) ([]checkpoint.StateHandle, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.base.handles) == 0 || !c.base.same(d) {
		return nil, false
	}
	return slices.Clone(c.base.handles), true
}

// completed makes checkpoint id's snapshot the base, if it was stored.
func (c *chains) completed(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.taken[id]; t != nil && t.handles != nil {
		c.base = *t
	}
	for k := range c.taken {
		if k <= id {
			delete(c.taken, k)
		}
	}
}

func (c *chains) aborted(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.taken, id)
}
