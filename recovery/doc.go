// Package recovery decides what a job restores (docs/DESIGN.md sections 2
// and 5, invariants I5, I6 and I9): it lists the candidates in the agent's
// order of preference, verifies them, and hands the runtime the chosen one
// with the older ones of its store to fall back to.
//
// The order: a savepoint, when one is given, and nothing else; else the
// job's own store's completed checkpoints, newest first; if none of them
// verifies and remote storage is on, this device's uploads, newest first,
// or where it has none those of the device it restores from
// (restore_from_device). Before it turns to remote storage, Choose raises
// the job's id counter above every id this device uploaded (I6).
//
// Verifying a candidate reads every blob of its state (Verify), and Choose
// keeps what it read of the candidate it chooses: the runtime restores
// from those very bytes (Candidate.Reader), so that each blob is read
// once. Only the chosen candidate's blobs are held, each until the
// runtime reads it or forgets the candidate (the state of an operator
// the pipeline no longer has is never read): a gateway's memory holds one
// checkpoint's state in its stored form at most, not every candidate's.
//
// A restore falls back to an older candidate only past damage, a blob
// that fails its checksum (checkpoint.ErrCorrupt) or a snapshot that does
// not decode (graph.ErrCorruptSnapshot); any other failure fails the start
// (Fallback, which Choose and the runtime share). Where nothing can be
// restored though the job's store shows that checkpoints were taken,
// Choose refuses the start unless the loss is accepted
// (Sources.AcceptStateLoss).
//
// The package does no I/O of its own: it reaches state only through
// checkpoint.Store.
package recovery
