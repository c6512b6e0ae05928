// Package ingest keeps what an agent's sources receive until checkpoints
// no longer need it (docs/DESIGN.md section 1): a durable, segmented log
// (package seglog) per source subtask, the dead letters, and the move of
// an earlier cairn's single bbolt file into them.
//
// A Log gives each message an offset, from 1, and holds it durably once
// Append returns: one fdatasync per Append, a group commit of the messages
// the caller gathered (mqttio's source decides when a group is due).
// Messages are stored in groups (group.go), one record of the segment
// each, deflated when that pays. Checkpoints record offsets, recovery
// rewinds to them, and the log is truncated, in whole segments, only below
// the oldest retained completed checkpoint, always keeping the newest
// RedeliveryWindow messages, by which a restarted source recognises the
// broker's redeliveries (Log.Logged). Bytes that do not verify are read
// past as a Message with Lost set.
//
// Logs are the logs of a data directory and its dead letters: Open is the
// one way in, which first moves an earlier cairn's ingest.db into them
// (MigrateBoltLogs); each log is opened in one place (Logs.Log, and the
// dead letters' openDeadLetterLog). A record's origin (graph.Record.Origin,
// Log.Origin) packs its log and offset, so that the dead letter of a
// record an operator rejects names the message it came from.
package ingest
