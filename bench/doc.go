// Package bench measures cairn: the scenarios of cairn-bench. Each
// scenario is a function that takes its sizes, does real work on real
// parts — the runtime, the stores' files, an MQTT broker, a `cairn run`
// process — and returns a Result whose fields are the figures and the
// ratios of measurements taken side by side in the same run:
//
//	pipeline   in-process graph throughput, checkpoints off and on
//	ingest     durable ingest-log appends, grouped and one fsync each
//	mqtt       through a broker into cairn and into a bare subscriber
//	snapshot   a whole and an incremental snapshot into the local store
//	restore    reading a whole snapshot back into keyed state
//	footprint  binary size, resident memory and CPU a reading of `cairn run`
//	wear       what `cairn run` writes to its disk, syncs and spends
//
// The machines cairn is measured on are small and shared, so absolute
// figures of two runs are hard to compare; a ratio of one run (checkpoints
// on against off, cairn against a bare subscriber) is the figure to trust.
//
// The go test benchmarks of runtime, mqttio and localrecovery call the same
// building blocks (RunPipeline, AppendGroups, MQTTRig, State), so that the
// two ways of measuring cannot drift apart.
//
// Results print as a table for people or as one JSON object per scenario
// (Print). JSON field names are stable: fields are added, never renamed or
// removed. Durations are in milliseconds, sizes in bytes, rates per second.
package bench
