// Package recovery holds what restores have in common (docs/DESIGN.md
// section 2, invariant I9): the candidates a job may restore, each with
// the store that holds its state; the verification of a checkpoint's
// state; and the rule of fallback that a restore follows, to an older
// candidate only past damage, a blob that fails its checksum
// (checkpoint.ErrCorrupt) or a snapshot that does not decode
// (graph.ErrCorruptSnapshot), never past any other failure.
//
// The package does no I/O of its own: it reaches state only through
// checkpoint.Store.
package recovery
