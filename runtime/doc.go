// Package runtime executes a graph.Topology: one goroutine per subtask,
// bounded channels of record batches with credit-based flow control, and the
// checkpoint protocol of package checkpoint driven with real time.
//
// The subtask logic (task) is single-threaded and knows nothing of
// goroutines: it is handed one batch at a time and told the time, so the
// same code runs under the goroutine executor (Job) and under the seeded,
// deterministic scheduler of the simulation tests. What a subtask has
// received and not processed is its inbox, a state machine that applies
// the barrier handler's Block and Unblock effects and holds the channels'
// credits; both executors put batches into it and process what it says is
// ready, so the simulation runs the production queue and credit code.
//
// Files, one concern each: job.go (the Job, its options, start and
// stop), plan.go (a topology turned into wired subtasks), task.go (a
// subtask's logic), inbox.go (its input), output.go (its output),
// snapshot.go (the asynchronous phase of its snapshots, incremental
// chains, snapshots stored once), inflight.go (channel state of unaligned
// checkpoints), inflightgob.go (its version 1, which encoding/gob wrote,
// read without gob), link.go (links between goroutines and control
// messages),
// executor.go (the goroutine of each subtask), coordinate.go (the
// coordinator's goroutine), restore.go (reading a checkpoint back),
// status.go (views and counters for displays).
//
// Flow control. Every channel from an upstream subtask to a downstream one
// has a fixed number of credits (batches in flight). A sender takes a credit
// before it sends and blocks when none is left; the receiver returns the
// credit once it has processed the batch. All channels into a subtask share
// one mailbox, so a subtask waits on one Go channel whatever its number of
// inputs. A channel blocked for alignment keeps its batches, and therefore
// its credits, so its sender slows down and nothing is dropped.
//
// Why here and not in graph: the runtime drives checkpoint's state machines,
// and checkpoint imports graph, so the runtime sits above both.
package runtime
