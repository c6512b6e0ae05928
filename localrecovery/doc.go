// Package localrecovery is local recovery, as one package's promise: it
// keeps the agent's checkpoints in one bbolt file of its data directory,
// so that after a crash, power cut or reboot the agent restarts from its
// own disk, without the network, and it chooses what a job restores, local
// first (docs/DESIGN.md sections 2 and 4, invariants I4, I5, I6 and I9).
// Store implements checkpoint.Store; docs/checkpoints.md is the user's
// side of it.
//
// # The file
//
// <data_dir>/checkpoints.db holds a bucket per checkpoint, with its
// completion record and the chunks of the snapshots stored with it, and a
// bucket of the id taken (layout.go gives the keys). A snapshot is its
// chunks, in order, each at most ChunkSize bytes and followed by its
// CRC-32C (bbolt checksums only its meta pages); a state handle's size
// and CRC-32C cover the whole snapshot, which ReadState reassembles and
// verifies (invariant I9).
//
// # One transaction per checkpoint
//
// PutState takes a subtask's snapshot in, in memory, and writes nothing.
// Complete writes, in one bbolt write transaction, the snapshots the
// checkpoint names that the file lacks (in the checkpoint's own bucket),
// its completion record, and the deletes of retention, and commits: bbolt
// writes the transaction's pages, fdatasyncs, writes the meta page and
// fdatasyncs again. The checkpoint is complete once that returns (I4):
// before, nothing of it is in the file, after a crash or a failed write
// alike; a checkpoint that never completes left nothing to clean up. A
// checkpoint that changed nothing (checkpoint.Manifest.SameAs) is not
// given to the store, and writes nothing. Retention keeps the newest
// Retain completed checkpoints and the buckets their snapshots and chains
// are in (a bucket kept only for the snapshots newer checkpoints share
// loses its completion record: the file lists only what is retained),
// and deletes the other buckets whole: bbolt frees their pages
// without rewriting them, and the next transactions write into them, so
// the file stops growing. The price of one transaction is memory: a
// checkpoint's snapshots are held until it completes, and bbolt holds the
// pages of the transaction until it commits (the measurements below).
//
// # bbolt's options, for flash
//
// Chosen by measurement (BenchmarkOptions; docs/checkpoints.md has the
// figures): NoFreelistSync with the map free list (the free list is not
// written each commit, 12 KB a reference checkpoint instead of 16 KB, and
// found again by the scan of the file that opening it to write makes);
// 4 KiB pages (larger ones write more; 1 KiB ones a sixth less, but then
// a page is not a block, the store cannot count its writes as the disk
// takes them, and a write into an uncached block reads it first);
// InitialMmapSize 0 (a larger first map gained nothing, and a 32-bit
// gateway has little address space); NoGrowSync off (the file stops
// growing; bbolt says skipping the sync is unsafe on ext4); ChunkSize
// 1 MiB, and values under 64 KiB deflated where that saves a tenth
// (encodeValue), which takes a reference checkpoint's bucket from two
// leaf pages to one. bbolt's Batch is not used: there is one transaction
// per checkpoint, nothing to batch.
//
// # Opening, and damage
//
// Open checks the file before it opens it to write: its meta pages and
// size (a truncated file would fault when read), then, opened read-only,
// a walk of every bucket, page and key in a goroutine where a memory fault
// is an error, then bbolt's own consistency check (Tx.Check). A file that
// fails any of these, or that bbolt refuses to open, is damaged: it is
// set aside as checkpoints.db.damaged-N, and what of it verifies (every
// checkpoint whose record and snapshots read and verify, and the id
// taken) is moved into a new file in its place. A chunk whose bytes
// changed leaves the file's structure whole: it fails its checksum when
// it is read, and the restore falls back to an older checkpoint. Nothing
// that failed verification is restored.
//
// The highest id taken is also kept beside the store (highwater.go), so
// that ids only go up when the store is deleted, cut or set aside.
//
// The store's files are opened without following a link, and refused
// when another name links to them (datadir.OpenFile).
//
// # Earlier stores
//
// The cairn before this store kept its checkpoints in a segmented log in
// the directory <data_dir>/checkpoints (segments.go), and the earliest
// builds in checkpoints.db in formats 1 and 2 (earlier.go). Open moves
// either into a file of format 3, once and safely across a crash: the new
// file is written beside the store (checkpoints.db.moving), marked with
// what it was moved from in its last transaction, and renamed into place;
// then the segments' directory is removed (or, if it showed damage,
// renamed aside). A crash before the rename leaves a file without the
// mark, which the next Open removes and writes again; one after it, the
// segments, which the mark shows were moved, and go. Segments written
// after the move (an older cairn run on the data directory again) are not
// what the mark says: Open fails, naming both, and removes nothing. A
// write that fails (a full disk) fails the move and Open, and leaves the
// earlier store as it was.
//
// # What a job restores
//
// Choose lists the candidates in the agent's order of preference,
// verifies them, and hands the runtime the chosen one with the older ones
// of its store to fall back to. The order: a savepoint, when one is
// given, and nothing else; else the job's own store's completed
// checkpoints, newest first; if none of them verifies and remote storage
// is on, this device's uploads, newest first, or where it has none those
// of the device it restores from (restore_from_device). Before it turns
// to remote storage, Choose raises the job's id counter above every id
// this device uploaded (I6).
//
// Verifying a candidate reads every blob of its state (Verify), and
// Choose keeps what it read of the candidate it chooses: the runtime
// restores from those very bytes (Candidate.Reader), so that each blob is
// read once. Only the chosen candidate's blobs are held, each until the
// runtime reads it or forgets the candidate (the state of an operator the
// pipeline no longer has is never read): a gateway's memory holds one
// checkpoint's state in its stored form at most, not every candidate's.
//
// A restore falls back to an older candidate only past damage, a blob
// that fails its checksum (checkpoint.ErrCorrupt) or a snapshot that does
// not decode (graph.ErrCorruptSnapshot); any other failure fails the start
// (Fallback, which Choose and the runtime share). Where nothing can be
// restored though the job's store shows that checkpoints were taken,
// Choose refuses the start unless the loss is accepted
// (Sources.AcceptStateLoss). Choose reaches state only through
// checkpoint.Store, so that a savepoint and remote storage are candidates
// as the local store's checkpoints are.
package localrecovery
