// Package checkpoint is cairn's checkpoint-barrier protocol (asynchronous
// barrier snapshotting, after Apache Flink) written as deterministic state
// machines, in the manner of etcd's raft: no goroutines, no I/O, no clock.
//
// Handler runs inside every subtask. It is told of barriers and ended inputs
// (Step) and of the time (Tick), and answers with ordered actions: block or
// unblock an input channel, take the synchronous snapshot, forward the
// barrier, decline the checkpoint. Its behaviour per mode is a step function
// chosen at construction: exactly-once aligned, at-least-once.
//
// Coordinator runs once per job. It is told the time, acknowledgements,
// declines, and the outcome of writing completion records, and answers with a
// Ready: checkpoints to trigger at the sources, a completion record to
// write, checkpoints completed or aborted, and whether the job must fail.
//
// Callers carry out actions in the order given. Two rules keep the
// invariants of docs/DESIGN.md section 2:
//   - start a Coordinator after the highest id of any completion record
//     written (Store.LastID), so that ids only grow across restarts (I6);
//   - a checkpoint is complete only once Ready.Completed names it, which
//     happens after the caller reported its completion record durable (I4).
//
// An id need not be persisted when it is issued: until its completion
// record is durable nothing outside the agent depends on the checkpoint
// (sinks publish, logs truncate and uploads start only once it is
// complete), so after a crash the id may be issued again to another.
//
// Store is the interface of checkpoint storage; MemStore implements it in
// memory for tests, and package localrecovery on disk.
package checkpoint
