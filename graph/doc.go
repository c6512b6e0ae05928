// Package graph is cairn's dataflow model: the stream elements that travel
// between subtasks (record batches, barriers, watermarks, end of stream), the
// operator and source API, keyed state partitioned into key groups, event-time
// timers, the encoding of a subtask's state snapshot, and the topology builder
// that validates a graph before it runs.
//
// The package imports, besides the standard library, only package wire,
// DDSketch (github.com/DataDog/sketches-go: the quantiles of windows,
// sketch.go) and HyperLogLog (github.com/axiomhq/hyperloglog: their
// distinct counts, distinct.go). It holds no goroutines: the runtime package executes a
// Topology, and the checkpoint package decides when state is snapshotted.
//
// Key groups. Keyed state is split into MaxParallelism key groups (default
// 128). A key belongs to exactly one key group, and a key group to exactly one
// subtask of a keyed operator, so a snapshot taken at one parallelism can be
// restored at another by handing key groups to their new owners. Each group
// is split again into 16 shards, each holding its keys' values encoded by
// their Codec in one byte arena (shard.go): keyed state costs the heap
// about its encoded size, with no pointers for the collector to follow, and
// a snapshot copies a shard only when it is next written.
package graph
