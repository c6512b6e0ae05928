// Package api holds the wire types of the agent's control API — HTTP and
// JSON over the unix socket <data_dir>/cairn.sock (mode 0600) — and Client,
// its one client implementation. It imports only the standard library, so
// that clients (the CLI, the terminal UI) depend on nothing else of the
// agent.
//
//	GET  /status       Status
//	GET  /events       server-sent events, one Status per event, at most 10 a second
//	GET  /checkpoints  []CheckpointInfo of the retained completed checkpoints, newest first
//	POST /checkpoint   triggers a checkpoint, waits for it: CheckpointResponse
//	POST /savepoint    the same, then writes it as a savepoint file in the data
//	                   directory's savepoints/: ?name=NAME (a plain file name;
//	                   default savepoint-ID.cairn), &force=1 to replace an
//	                   earlier savepoint of that name
//	POST /stop         stops the agent: a final checkpoint, or with ?savepoint=1
//	                   a savepoint, named as for POST /savepoint
//
// Errors are an HTTP status with an Error body.
package api
