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
//
// Run makes one Agent, which owns what it starts: Agent.start starts it
// all in one order (agent.go), Agent.shutdown stops it in the reverse
// order, and between them Agent.run runs one incarnation after another
// (incarnation.go): a job of the graph that build makes of the config
// (build.go), until a reload replaces it or the agent stops. Three types
// serve what the agent knows of itself, across incarnations: state holds
// it and says it as the status (status.go), controlAPI answers the control
// API from it (control.go), exporter writes the metrics (metrics.go); the
// listeners that serve them are listen.go's. No function of the package
// takes more than 5 parameters (TestFunctionsTakeFewParameters).
package agent
