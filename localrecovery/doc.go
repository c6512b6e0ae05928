// Package localrecovery keeps checkpoints in one bbolt file under the agent's
// data directory, so that after a crash, power cut or reboot the agent
// restarts from its own disk, without the network (DESIGN.md sections 2 and
// 4). Store implements checkpoint.Store.
//
// # File layout
//
// One bbolt file (conventionally <data_dir>/checkpoints.db) with three
// buckets:
//
//	meta         "format"  → 1 byte, the layout version (2)
//	             "last_id" → 8 bytes big-endian: the highest checkpoint id
//	                         ever issued (invariant I6)
//	snapshots    <id:8 BE><task>\x00 → a bucket per subtask snapshot,
//	                 <part:4 BE> → a bucket per write transaction (4 MiB),
//	                     <chunk:4 BE> → up to 1 MiB of the snapshot; chunks
//	                                    are numbered across parts
//	checkpoints  <id:8 BE> → the completion record: the manifest as JSON,
//	                         then its CRC-32C (4 bytes BE)
//
// A bucket per snapshot, and per transaction within it, keeps what was
// written apart in the B+tree: storing writes new pages only, and deleting
// a snapshot frees its pages after reading their headers. In format 1, whose file Open migrates, every chunk shared
// one bucket ("blobs", keys <id><task>\x00<chunk>), and bbolt rewrote
// leaves holding the chunks of neighbouring snapshots on every insert and
// delete, reading them back through its memory map: under a steady load
// the agent's resident memory grew by most of the file.
//
// A state handle's key is "<id>/<task>"; its size and CRC-32C cover the
// whole snapshot, which ReadState reassembles from the chunks and verifies
// (invariant I9).
//
// # Write order
//
// A subtask's snapshot is written in transactions of up to TxBytes, each
// gathered from the snapshot's encoder after the one before has committed,
// so that storing a snapshot takes about TxBytes of memory whatever its
// size; one whose writing stops half way is referenced by no completion
// record and goes at the next Open or retention. The completion record is written last, in its own transaction, after every
// blob it names is durable: a checkpoint without a record is not complete
// (I4), whatever blobs it left behind. Retention runs in a further
// transaction: it keeps the newest Retain completed checkpoints and deletes
// every blob none of them references, along with blobs of checkpoints that
// never completed.
//
// # Damage
//
// Open checks the file's consistency. A file that bbolt cannot open or that
// fails the check is renamed aside (<path>.damaged-N) and the checkpoints
// that can still be read from it and verify are copied into a fresh file;
// the log says which were kept and which lost, and why. Completed lists only
// checkpoints whose completion record verifies, and ReadState verifies every
// snapshot before it is used, so a restore that meets damage falls back to
// an older checkpoint (runtime.Options.Restore).
package localrecovery
