// Package localrecovery keeps checkpoints in a directory of the agent's data
// directory, so that after a crash, power cut or reboot the agent restarts
// from its own disk, without the network (docs/DESIGN.md sections 2 and 4).
// Store implements checkpoint.Store.
//
// # Layout
//
// The store is a segmented log (package seglog; conventionally
// <data_dir>/checkpoints), whose checksummed records are, each starting
// with its kind:
//
//	chunk       'C', a snapshot's key "<id>/<task>", the chunk's index, and
//	            up to ChunkSize bytes of the snapshot
//	completion  'M', a checkpoint's manifest as JSON
//	last id     'L', an id taken (SaveLastID)
//
// A snapshot is its chunks, in order; a state handle's size and CRC-32C
// cover the whole of it, which ReadState reassembles and verifies
// (invariant I9). Open reads the whole log into an index in memory: where
// each snapshot's chunks are, and the completion records.
//
// # Write order
//
// A subtask's snapshot is appended as it is encoded, a record a chunk,
// without a sync. A checkpoint's completion record is appended after every
// snapshot it names, and then one fdatasync makes the record and all
// before it durable: a checkpoint is complete once it returns (I4), and a
// record the log lost to a power cut takes nothing with it that it names.
// A checkpoint is so one sync and the pages of what changed. Retention
// keeps the newest Retain completed checkpoints, what they name (the
// chains of incremental snapshots), and everything of checkpoints in
// flight; it deletes the segments before the oldest of those records,
// whole.
//
// # Damage
//
// A write torn by a power cut at the end of the log is cut when it is
// opened (package seglog). A record that fails its checksum in an older
// segment hides the rest of that segment: a completion record lost so is
// not listed, and a snapshot lost so fails verification when it is
// restored, so that the restore falls back to an older checkpoint
// (package recovery). Nothing that failed verification is restored.
//
// # Earlier stores
//
// cairn kept its checkpoints in one bbolt file before, <dir>.db (bolt.go
// describes it). Open moves the completed checkpoints of such a file that
// verify, and its id counter, into the log, once (seglog.MoveInto: safe
// across a crash), and removes the file; of a damaged one, what verifies
// is moved and the file kept aside (<dir>.db.damaged-N). A write that
// fails fails the move and Open, and keeps the file; so does a file
// written to after it was moved (by an older cairn), which is not removed.
package localrecovery
