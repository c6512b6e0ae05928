package api

import "time"

// GatewayVersion is the version of GatewayStatus this cairn publishes.
// Fields are only added within a version, never removed or given another
// meaning: a reader ignores what it does not know, and a message of a
// higher version than it knows is one it may misread.
const GatewayVersion = 1

// GatewayStatus is what an agent publishes, as compact JSON, retained at
// QoS 1, to <status_topic>/json of each broker that has a status_topic:
// every brokers.<name>.status_interval and at once on a change that
// matters. It holds nothing secret: no broker URL, user or error text, no
// token, no payload. Durations are in milliseconds, sizes in bytes, times
// in Unix milliseconds on the agent's wall clock as it read at Time (Time
// less one is how long ago that was, on the agent's monotonic clock); a
// zero field is left out.
// docs/fleet.md lists the fields for consumers.
type GatewayStatus struct {
	V int `json:"v"` // GatewayVersion
	// Agent is the agent's name: its client id base on the broker (the
	// broker's client_id, else cairn-<host>);
	// Version is cairn's; Pipeline the pipeline file's name, without its
	// directory.
	Agent    string `json:"agent"`
	Version  string `json:"version,omitempty"`
	Pipeline string `json:"pipeline"`
	// State is "starting", "restoring", "running", "stopping" or, in the
	// last message of an agent that stopped, "stopped".
	State string `json:"state"`
	// Time is when the message was made; IntervalMS how long until the
	// next at the latest, so that a reader can tell a status that stopped
	// coming.
	Time       int64 `json:"time"`
	IntervalMS int64 `json:"interval_ms"`
	UptimeS    int64 `json:"uptime_s,omitempty"`
	// Mode is the checkpointing mode.
	Mode        string             `json:"mode,omitempty"`
	Checkpoints GatewayCheckpoints `json:"checkpoints"`
	// Stall is the longest barrier alignment since the message before:
	// one in progress, or one that ended in between (EndedAgoMS); absent
	// when none took 100 ms or more (GatewayStallFloorMS).
	Stall *GatewayStall `json:"stall,omitempty"`
	// IngestLag is the logged MQTT messages waiting to be processed;
	// WatermarkLagMS how far the event time of the operator that trails
	// most is behind the agent's clock (absent without event time).
	IngestLag      int64 `json:"ingest_lag,omitempty"`
	WatermarkLagMS int64 `json:"watermark_lag_ms,omitempty"`
	// DeadLetters are the dead letters the gateway keeps (Status's, which
	// `cairn deadletters` lists), Rejected the records operators rejected
	// since the pipeline started, and IngestLost the messages of its
	// ingest logs lost to damage since the agent started.
	DeadLetters int64 `json:"dead_letters,omitempty"`
	Rejected    int64 `json:"rejected,omitempty"`
	IngestLost  int64 `json:"ingest_lost,omitempty"`
	// BadTime are the readings whose event time the sources refused since
	// the agent started (Operator.BadTimeRecords): a device clock is wrong.
	BadTime int64 `json:"bad_time,omitempty"`
	// OutputBacklog is the output the sinks hold for their brokers;
	// InputHeld, when set, says why no new input goes through: "disk" (an
	// ingest log refuses appends: the input is not acknowledged, and the
	// broker keeps it), or "output backlog" (the sources read nothing new).
	OutputBacklog int64        `json:"output_backlog,omitempty"`
	InputHeld     *GatewayHeld `json:"input_held,omitempty"`
	// Brokers are the pipeline's brokers, by name in the config.
	Brokers []GatewayBroker `json:"brokers,omitempty"`
	// Memory is the agent's resident memory, live heap and memory limit.
	Memory GatewayMemory `json:"mem"`
	// DiskPerDay is what the agent writes to its data directory a day, at
	// the last hour's rate; left out until the agent has run 10 minutes
	// (Disk.PerDayBytes).
	DiskPerDay int64 `json:"disk_per_day,omitempty"`
	// ConfigRejected: the last change of the pipeline file was not
	// applied (`cairn status` on the gateway says why).
	ConfigRejected bool `json:"config_rejected,omitempty"`
}

// GatewayStallFloorMS is the shortest alignment a GatewayStatus reports.
const GatewayStallFloorMS = 100

// GatewayCheckpoints are a gateway's checkpoints since its pipeline
// (re)started.
type GatewayCheckpoints struct {
	IntervalMS int64 `json:"interval_ms"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed,omitempty"`
	Late       int64 `json:"late,omitempty"`
	// RecentFailed and RecentLate count those among the newest outcomes
	// (at most 32, cairn status's history): what a reader ranks by, for
	// a failure of last week is no failure now.
	RecentFailed int `json:"recent_failed,omitempty"`
	RecentLate   int `json:"recent_late,omitempty"`
	// Last is the last completed checkpoint; LastFailed the last failed
	// one, if one failed since the pipeline started.
	Last       *GatewayCheckpoint `json:"last,omitempty"`
	LastFailed *GatewayFailure    `json:"last_failed,omitempty"`
	// InFlightMS is how long the oldest checkpoint in flight has taken.
	InFlightMS int64 `json:"in_flight_ms,omitempty"`
}

// GatewayCheckpoint is a completed checkpoint.
type GatewayCheckpoint struct {
	ID         uint64 `json:"id"`
	AgeMS      int64  `json:"age_ms"` // since it completed
	DurationMS int64  `json:"duration_ms"`
	// AlignmentMS is its longest alignment; Size what it stored.
	AlignmentMS int64 `json:"alignment_ms,omitempty"`
	Size        int64 `json:"size,omitempty"`
	// Kind is "full", "incremental", "unaligned" or "unchanged" (it
	// stored nothing: nothing changed since the one before).
	Kind string `json:"kind"`
	Late bool   `json:"late,omitempty"`
}

// GatewayFailure is a failed checkpoint.
type GatewayFailure struct {
	ID    uint64 `json:"id"`
	AgeMS int64  `json:"age_ms"` // since it was triggered
	// Cause is why: "expired", "declined", "write failed", with the
	// runtime's reason after a colon.
	Cause string `json:"cause"`
}

// GatewayStall is a barrier alignment: a subtask holding the inputs
// whose barrier came until the others' come.
type GatewayStall struct {
	Subtask    string `json:"subtask"`     // operator/index
	WaitsFor   string `json:"waits_for"`   // the input it waits (or waited) for
	DurationMS int64  `json:"duration_ms"` // so far, or in all
	Backlog    int64  `json:"backlog,omitempty"`
	Checkpoint uint64 `json:"checkpoint"`
	// EndedAgoMS, for one that ended, is how long ago; absent for one in
	// progress.
	EndedAgoMS int64 `json:"ended_ago_ms,omitempty"`
	Ended      bool  `json:"ended,omitempty"`
}

// GatewayHeld says why the sources read no new input, and since when.
// Reason is "output backlog" (the sinks hold more than
// agent.max_output_backlog their brokers have not taken); other reasons
// may be added.
type GatewayHeld struct {
	Reason string `json:"reason"`
	Since  int64  `json:"since,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// GatewayBroker is one broker of the pipeline.
type GatewayBroker struct {
	Name string `json:"name"`
	// Up: every client of it is connected; Clients and Connected count
	// them; Since is when Up last changed.
	Up        bool  `json:"up"`
	Clients   int   `json:"clients"`
	Connected int   `json:"connected"`
	Since     int64 `json:"since,omitempty"`
}

// GatewayMemory is an agent's memory, in bytes.
type GatewayMemory struct {
	Resident int64 `json:"rss,omitempty"`
	HeapLive int64 `json:"heap"`
	Limit    int64 `json:"limit,omitempty"`
}

// FleetMessage is a message of a gateway's status topics as a fleet view
// receives it: online or offline on the status topic itself, or its
// GatewayStatus on the JSON sibling.
type FleetMessage struct {
	// Gateway is the gateway's name: the levels of the topic the status
	// filter's wildcards matched (gateways/+/status: gw-07).
	Gateway string
	Topic   string
	// JSON: the message is a GatewayStatus; else online or offline.
	JSON    bool
	Payload []byte
	// Retained: the broker kept it, and it may be old; At is when it came.
	Retained bool
	At       time.Time
}

// FleetLink is a fleet view's connection to the broker changing: up
// (connected and subscribed), or down and why.
type FleetLink struct {
	Up  bool
	Err string
	At  time.Time
}
