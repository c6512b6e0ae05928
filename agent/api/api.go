package api

// Status is the agent's state: the stable shape of `cairn status --json`.
// Durations are in milliseconds; fields are never removed, only added.
type Status struct {
	Agent    string `json:"agent"`    // host name
	Pipeline string `json:"pipeline"` // the pipeline file
	// State is "starting", "restoring", "running" or "stopping".
	State         string      `json:"state"`
	Mode          string      `json:"mode"` // "exactly-once" or "at-least-once"
	UptimeSeconds float64     `json:"uptime_seconds"`
	Checkpoints   Checkpoints `json:"checkpoints"`
	// RestoredFrom is null on a fresh start.
	RestoredFrom *Restored  `json:"restored_from"`
	Operators    []Operator `json:"operators"`
	DeadLetters  int64      `json:"dead_letters"`
	// IngestLag is how many logged MQTT messages wait to be processed.
	IngestLag int64 `json:"ingest_lag"`
	// ConfigError, if set, says why the last change of the pipeline file
	// was not applied; the pipeline runs as before.
	ConfigError string `json:"config_error,omitempty"`
	// InFlight are the checkpoints in flight, oldest first.
	InFlight []InFlight `json:"in_flight"`
}

// Checkpoints counts checkpoints since the agent started.
type Checkpoints struct {
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	InProgress int   `json:"in_progress"`
	// LastCompleted is null until one completes.
	LastCompleted *CheckpointInfo `json:"last_completed"`
}

// CheckpointInfo summarises a completed checkpoint.
type CheckpointInfo struct {
	ID         uint64 `json:"id"`
	DurationMS int64  `json:"duration_ms"`
	SizeBytes  int64  `json:"size_bytes"`
	// AlignmentMS is the longest barrier alignment among the subtasks.
	AlignmentMS int64 `json:"alignment_ms"`
	// Incremental is set when some subtask stored only changes.
	Incremental bool `json:"incremental"`
}

// Restored says which checkpoint the agent started from.
type Restored struct {
	ID uint64 `json:"id"`
	// Source is "local", "remote" or "savepoint".
	Source string `json:"source"`
}

// Operator is one node of the graph.
type Operator struct {
	ID          string `json:"id"`
	Parallelism int    `json:"parallelism"`
	// LateRecords, for windows and joins, were dropped for arriving after
	// their windows' allowed lateness.
	LateRecords int64     `json:"late_records"`
	Subtasks    []Subtask `json:"subtasks"`
}

// Subtask is one parallel instance of an operator.
type Subtask struct {
	Index      int   `json:"index"`
	RecordsIn  int64 `json:"records_in"`
	RecordsOut int64 `json:"records_out"`
	// BackpressureMS is the total time spent waiting for room downstream.
	BackpressureMS int64 `json:"backpressure_ms"`
	// Alignment is the barrier alignment in progress, if any.
	Alignment *Alignment `json:"alignment,omitempty"`
}

// Alignment is a subtask waiting for a checkpoint's barrier on its inputs.
type Alignment struct {
	CheckpointID uint64 `json:"checkpoint_id"`
	// StartedMS is when the first barrier arrived, on the agent's clock.
	StartedMS int64     `json:"started_ms"`
	Channels  []Channel `json:"channels"`
}

// Channel is one input channel's barrier state.
type Channel struct {
	Arrived bool  `json:"arrived"`
	AtMS    int64 `json:"at_ms,omitempty"`
	Ended   bool  `json:"ended,omitempty"`
}

// InFlight is a checkpoint in flight.
type InFlight struct {
	ID        uint64 `json:"id"`
	ElapsedMS int64  `json:"elapsed_ms"`
	Acked     int    `json:"acked"`
	Total     int    `json:"total"`
}

// CheckpointResponse answers POST /checkpoint and POST /savepoint.
type CheckpointResponse struct {
	ID uint64 `json:"id"`
	// Path is the savepoint file written, for POST /savepoint.
	Path string `json:"path,omitempty"`
}

// Error is the body of an error response.
type Error struct {
	Error string `json:"error"`
}
