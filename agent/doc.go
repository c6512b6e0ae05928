// Package agent is the daemon: it reads a pipeline file (package
// agent/config), starts the embedded brokers it asks for, opens the
// checkpoint store and the ingest log in the data directory, builds the
// graph, restores the checkpoint package recovery chooses (the newest
// intact one), and runs the pipeline until it is told to stop, taking a
// final checkpoint then (docs/DESIGN.md section 5).
//
// It serves the control API (package agent/api) on <data_dir>/cairn.sock,
// and optionally on TCP with a bearer token and Prometheus metrics; it
// reloads the pipeline when the file changes or on SIGHUP.
package agent
