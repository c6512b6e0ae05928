// Package mqttio connects cairn to MQTT (docs/DESIGN.md section 1).
//
// Source subscribes with QoS 1 on a persistent session and appends every
// message to its durable ingest log (package ingest) before it
// acknowledges the message to the broker (invariant I8): PUBACKs go out,
// in receipt order, only after the group commit holding the message is
// fsynced. A group commit is one ingest.Log.Append, at most one per sync
// interval unless the broker's in-flight window fills (learned from what
// arrives: window.go), a megabyte of payload waits or the broker stops
// sending: the broker keeps every message not acknowledged, so waiting
// costs latency, never data. Checkpoints record the log's offsets, and
// recovery rewinds to them: MQTT input becomes replayable. Messages that
// do not decode, and those the log lost to damage, become dead letters,
// stored in the ingest logs and published. A QoS 0 mode skips the log and
// is at-most-once.
//
// Sink publishes with two-phase commit: records are staged in the sink's
// checkpointed state when the barrier passes and published at QoS 1 only
// when that checkpoint completes (I4). After a crash, staged output of the
// restored (completed) checkpoint is published again and output of
// incomplete checkpoints was never published. Every message carries a
// deterministic id, so delivery is at-least-once and exactly-once after the
// consumer drops repeated ids. A record whose topic no broker takes
// (CheckTopic) is rejected before it is staged: published, it would cost
// the sink its connection after every reconnection.
//
// The embedded MQTT server that a gateway's devices may publish to is
// package broker, which imports this one for the topic rules
// (CheckTopic, TopicTemplate) and Quiet.
package mqttio
