// Package agent is the daemon: it reads a pipeline file (package
// agent/config), starts the embedded brokers it asks for, opens the
// checkpoint store and the ingest log in the data directory, builds the
// graph, restores the newest intact checkpoint, and runs the pipeline until
// it is told to stop, taking a final checkpoint then (DESIGN.md section 5).
//
// Still to come (the agent issue stays open): the control API and `cairn
// status`, live reload, metrics, and the dedupe, join and threshold
// operators.
package agent
