// Package mqttio will connect cairn to MQTT: a source that appends every
// message to a durable ingest log before acknowledging it, a two-phase-commit
// sink that publishes only for completed checkpoints, and an embedded broker
// (DESIGN.md section 1).
//
// Not built yet; see the issue "MQTT in and out".
package mqttio
