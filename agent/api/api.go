package api

import (
	"strconv"
	"time"
)

// Status is the agent's state: the stable shape of `cairn status --json`.
// Durations are in milliseconds; fields are never removed, only added.
type Status struct {
	Agent    string `json:"agent"`    // host name
	Pipeline string `json:"pipeline"` // the pipeline file
	// State is "starting", "restoring", "running" or "stopping".
	State         string  `json:"state"`
	Mode          string  `json:"mode"` // "exactly-once" or "at-least-once"
	UptimeSeconds float64 `json:"uptime_seconds"`
	// TimeUnixMS is when the status was taken, on the agent's wall clock.
	// The other times of the status (*UnixMS, but the watermarks, which
	// are event time) are on that clock as it read then: TimeUnixMS less
	// one is how long ago that was, as the monotonic clock measured it,
	// whatever steps the wall clock took since.
	TimeUnixMS  int64       `json:"time_unix_ms"`
	Checkpoints Checkpoints `json:"checkpoints"`
	// RestoredFrom is null on a fresh start.
	RestoredFrom *Restored  `json:"restored_from"`
	Operators    []Operator `json:"operators"`
	// DeadLetters counts the dead letters the data directory keeps, which
	// `cairn deadletters` lists, across restarts; DeadLetterCauses, by
	// cause (DeadLetter.Cause).
	DeadLetters      int64            `json:"dead_letters"`
	DeadLetterCauses map[string]int64 `json:"dead_letter_causes"`
	// Brokers are the MQTT brokers the pipeline's clients talk to, by
	// name in the config.
	Brokers []Broker `json:"brokers"`
	// IngestLag is how many logged MQTT messages wait to be processed.
	IngestLag int64 `json:"ingest_lag"`
	// IngestFailures counts group commits the ingest log refused (a full
	// or failing disk): their messages were not acknowledged and are
	// retried.
	IngestFailures int64 `json:"ingest_failures"`
	// Ingest says what went wrong with the ingest logs.
	Ingest Ingest `json:"ingest"`
	// OutputBacklogBytes is the output the sinks hold until their brokers
	// acknowledge it; InputHeld is true while it is over
	// agent.max_output_backlog and the sources read nothing new.
	OutputBacklogBytes int64 `json:"output_backlog_bytes"`
	InputHeld          bool  `json:"input_held"`
	// Memory is the agent process's memory.
	Memory Memory `json:"memory"`
	// Disk is what the agent wrote to its data directory.
	Disk Disk `json:"disk"`
	// ConfigError, if set, says why the last change of the pipeline file
	// was not applied; the pipeline runs as before.
	ConfigError string `json:"config_error,omitempty"`
	// Rebuilt, if set, says that the agent started with no checkpoint
	// store and no checkpoint id mark but an ingest log that holds every
	// message from its first offset: the pipeline's state was rebuilt by
	// replaying the log, not restored.
	Rebuilt string `json:"rebuilt,omitempty"`
	// InFlight are the checkpoints in flight, oldest first.
	InFlight []InFlight `json:"in_flight"`
	// History holds this run's newest checkpoint outcomes, completed and
	// failed, oldest first (at most 32).
	History []CheckpointInfo `json:"history"`
	// Stalls are the recent alignment stalls: for each of this run's
	// newest checkpoints (at most 32) whose subtasks aligned, the longest
	// alignment, oldest first.
	Stalls []Stall `json:"stalls"`
}

// Ingest is what went wrong with the ingest logs since the agent started,
// and what goes wrong now.
type Ingest struct {
	// DamagedRecords counts the ranges of the logs found lost to damage
	// (bytes that do not verify, with records after them that do: bit rot;
	// a segment cut short or removed) and read past; LostMessages, the
	// messages they held. Each range is a dead letter of its source when
	// the source reads it. LastDamage describes the newest.
	DamagedRecords int64  `json:"damaged_records"`
	LostMessages   int64  `json:"lost_messages"`
	LastDamage     string `json:"last_damage,omitempty"`
	// NotAcknowledgingSinceUnixMS is set while an ingest log refuses
	// appends (a full or failing disk): since then the input waiting is not
	// acknowledged to the broker, which keeps it and holds back the rest.
	// NotAcknowledgingReason is the newest error; it names the file.
	NotAcknowledgingSinceUnixMS int64  `json:"not_acknowledging_since_unix_ms,omitempty"`
	NotAcknowledgingReason      string `json:"not_acknowledging_reason,omitempty"`
}

// Stall is a blocking barrier alignment that ended: a subtask held the
// inputs whose barrier had come until the others' came.
type Stall struct {
	CheckpointID uint64 `json:"checkpoint_id"`
	// Subtask aligned ("operator/index"); WaitedFor is the input it
	// waited for last: the sender of the barrier that came last, or, when
	// none came, the pending input with the largest backlog.
	Subtask   string `json:"subtask"`
	WaitedFor string `json:"waited_for"`
	// StartedUnixMS is when the first barrier came; DurationMS how long
	// the alignment took.
	StartedUnixMS int64 `json:"started_unix_ms"`
	DurationMS    int64 `json:"duration_ms"`
	// Backlog is the most records seen waiting on that input and in its
	// sender's inputs during the alignment; BufferedRecords were held
	// back on the inputs whose barrier had come.
	Backlog         int64 `json:"backlog"`
	BufferedRecords int64 `json:"buffered_records"`
	// Outcome is "aligned" (the snapshot was taken once every barrier
	// came), "timed out" (checkpoints.alignment_timeout: the snapshot was
	// taken unaligned) or "abandoned" (the checkpoint failed first).
	Outcome string `json:"outcome"`
}

// EndedUnixMS is when the stall ended.
func (s Stall) EndedUnixMS() int64 { return s.StartedUnixMS + s.DurationMS }

// Memory is a process's memory, in bytes.
type Memory struct {
	// Resident is its resident set (VmRSS): 0 where the system does not
	// tell.
	Resident int64 `json:"resident_bytes"`
	// HeapLive is the Go heap's live data at the last collection (before
	// the first, what it holds); HeapGoal, the size the heap may reach
	// before the next.
	HeapLive int64 `json:"heap_live_bytes"`
	HeapGoal int64 `json:"heap_goal_bytes"`
	// Limit is the soft limit of agent.memory_limit (or GOMEMLIMIT); 0
	// when there is none.
	Limit int64 `json:"limit_bytes"`
}

// NearLimit reports whether the live heap is within a tenth of the memory
// limit: the garbage collector then runs almost without pause, and the
// agent slows down rather than grow.
func (m Memory) NearLimit() bool { return m.Limit > 0 && m.HeapLive >= m.Limit-m.Limit/10 }

// Checkpoints counts checkpoints since the pipeline (re)started.
type Checkpoints struct {
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
	// Late are the completed ones that took more than half the interval.
	Late       int64 `json:"late"`
	InProgress int   `json:"in_progress"`
	// IntervalMS is checkpoints.interval.
	IntervalMS int64 `json:"interval_ms"`
	// LastCompleted is null until one completes.
	LastCompleted *CheckpointInfo `json:"last_completed"`
}

// CheckpointInfo summarises a checkpoint, with the columns of Flink's
// checkpoint history. The per-subtask figures are the largest among the
// subtasks.
type CheckpointInfo struct {
	ID uint64 `json:"id"`
	// Status is "completed" or "failed"; Cause says why one failed.
	Status string `json:"status"`
	Cause  string `json:"cause,omitempty"`
	// TriggeredUnixMS is the trigger time (Unix milliseconds); 0 when not
	// known (checkpoints of an earlier run, read from the store).
	TriggeredUnixMS int64 `json:"triggered_unix_ms,omitempty"`
	// DurationMS runs from the trigger to the completion or failure; Late
	// says it took more than half the checkpoint interval.
	DurationMS int64 `json:"duration_ms"`
	Late       bool  `json:"late,omitempty"`
	// SizeBytes is what the checkpoint stored: the snapshots of the
	// subtasks whose state changed (the others name the state stored
	// before).
	SizeBytes    int64 `json:"size_bytes"`
	AlignmentMS  int64 `json:"alignment_ms"`
	StartDelayMS int64 `json:"start_delay_ms"`
	SyncMS       int64 `json:"sync_ms"`
	AsyncMS      int64 `json:"async_ms"`
	// Incremental is set when some subtask stored only changes.
	Incremental bool `json:"incremental"`
	// SameAs, when set, is the checkpoint this one changed nothing since:
	// it stored nothing at all, not even a completion record of its own.
	SameAs uint64 `json:"same_as,omitempty"`
	// Unaligned is set when some subtask snapshotted before all its
	// barriers arrived; TimedOut when one did so because its alignment
	// timed out (aligned checkpoints with a timeout).
	Unaligned bool `json:"unaligned,omitempty"`
	TimedOut  bool `json:"timed_out,omitempty"`
	// InFlightBytes is the in-flight data persisted with the checkpoint
	// (unaligned checkpoints); 0 for aligned ones.
	InFlightBytes int64 `json:"in_flight_bytes"`
	// Upload is the remote upload state ("pending", "uploaded", "failed",
	// or "skipped" when the upload fell behind and went on with a newer
	// checkpoint); empty when remote upload is off or the state is not
	// known. UploadError says why an upload failed or was skipped.
	Upload      string `json:"upload,omitempty"`
	UploadError string `json:"upload_error,omitempty"`
	// Mode is the checkpointing mode it was taken in: "exactly-once",
	// "at-least-once" or "unaligned".
	Mode string `json:"mode,omitempty"`
	// Damage, set only by a listing that verifies (GET
	// /checkpoints?verify=1, cairn checkpoints --verify), says why the
	// checkpoint's state fails verification: it cannot be restored.
	Damage string `json:"damage,omitempty"`
}

// Restored says which checkpoint the agent started from.
type Restored struct {
	ID uint64 `json:"id"`
	// Source is "local", "remote" or "savepoint".
	Source string `json:"source"`
}

// Broker is what the pipeline's clients of one broker know of it.
type Broker struct {
	ID string `json:"id"`
	// Connected: every client of the broker (a source subtask's, a sink's)
	// is connected; ConnectedClients of Clients are.
	Connected        bool  `json:"connected"`
	Clients          int   `json:"clients"`
	ConnectedClients int   `json:"connected_clients"`
	SinceUnixMS      int64 `json:"since_unix_ms"` // when Connected last changed
	// LastError is the newest failure to connect or lost connection.
	LastError       string `json:"last_error,omitempty"`
	LastErrorUnixMS int64  `json:"last_error_unix_ms,omitempty"`
	// Refused, of an embedded broker, counts what it refused its clients
	// since it started (a failed login, a topic not granted, a limit, a
	// CONNECT MQTT forbids), by the message of the log lines that tell
	// of them.
	Refused map[string]int64 `json:"refused,omitempty"`
	// OfflineDropped, of an embedded broker, counts the messages it
	// dropped from each session while its client was gone (the oldest,
	// for newer ones, over the limits), by client id, for the sessions it
	// holds.
	OfflineDropped map[string]int64 `json:"offline_dropped,omitempty"`
	// EndedSessions, of an embedded broker, counts the sessions whose
	// client was gone that it ended since it started, by why: "after
	// offline_session_expiry", "for a new session over max_clients" (or
	// max_sessions_per_address). No refusal: Refused counts none of them.
	EndedSessions map[string]int64 `json:"ended_sessions,omitempty"`
}

// Operator is one node of the graph.
type Operator struct {
	ID          string `json:"id"`
	Parallelism int    `json:"parallelism"`
	// LateRecords, for windows and joins, were dropped for arriving after
	// their windows' allowed lateness, or, for an interval join, after
	// nothing could join them.
	LateRecords int64 `json:"late_records"`
	// UnmatchedRecords, for a lookup join, were dropped for having no
	// table record of their key yet.
	UnmatchedRecords int64 `json:"unmatched_records,omitempty"`
	// BadTimeRecords, for a source, are the readings whose event time it
	// refused since the agent started (max_future, max_past, min_time: a
	// device clock that is wrong), each a dead letter.
	BadTimeRecords int64 `json:"bad_time_records,omitempty"`
	// Sink, for a sink, counts what it stages and what its broker took.
	Sink *SinkCounts `json:"sink,omitempty"`
	// WatermarkUnixMS is the operator's event time, the least of its
	// subtasks' watermarks (milliseconds since the epoch), and
	// WatermarkLagMS how far it trails the agent's wall clock; both 0
	// where the records carry no event time, or none came yet.
	WatermarkUnixMS int64     `json:"watermark_unix_ms,omitempty"`
	WatermarkLagMS  int64     `json:"watermark_lag_ms,omitempty"`
	Subtasks        []Subtask `json:"subtasks"`
}

// SinkCounts are a sink's records: staged for a checkpoint, published
// and acknowledged by the broker once it completed, and rejected as not
// encodable as JSON (also counted in the sink's rejected records, and
// dead letters). A sink emits no records downstream, so its records out
// are 0.
type SinkCounts struct {
	Staged      int64 `json:"staged"`
	Published   int64 `json:"published"`
	Unencodable int64 `json:"unencodable"`
	// ReplayStableIDs says the sink's input is ordered: outputs it
	// publishes again after a restore (a fallback past a damaged
	// checkpoint) carry the ids they had. Renumbered counts the restores
	// after which a subtask began new ids instead (mqttio.Output).
	ReplayStableIDs bool  `json:"replay_stable_ids"`
	Renumbered      int64 `json:"renumbered"`
}

// Records sums the records o's subtasks took in and gave out.
func (o Operator) Records() (in, out int64) {
	for _, s := range o.Subtasks {
		in, out = in+s.RecordsIn, out+s.RecordsOut
	}
	return in, out
}

// Rejected sums the records o's subtasks rejected.
func (o Operator) Rejected() (n int64) {
	for _, s := range o.Subtasks {
		n += s.Rejected
	}
	return n
}

// RecordsOut is how many records operator id gave out, over its subtasks;
// 0 if s has no such operator.
func (s Status) RecordsOut(id string) int64 {
	for _, op := range s.Operators {
		if op.ID == id {
			_, out := op.Records()
			return out
		}
	}
	return 0
}

// Subtask is one parallel instance of an operator.
type Subtask struct {
	Index      int   `json:"index"`
	RecordsIn  int64 `json:"records_in"`
	RecordsOut int64 `json:"records_out"`
	// Rejected are the records the operator rejected (a reading without
	// the field its expression uses, say), dead-lettered or dropped as its
	// on_error says.
	Rejected int64 `json:"rejected"`
	// BackpressureMS is the total time spent waiting for room downstream.
	BackpressureMS int64 `json:"backpressure_ms"`
	// Alignment is the barrier alignment in progress, if any.
	Alignment *Alignment `json:"alignment,omitempty"`
	// Queued is the records waiting in the subtask's input channels.
	Queued int64 `json:"queued"`
	// WatermarkUnixMS is the subtask's event time; 0 when it has none.
	WatermarkUnixMS int64 `json:"watermark_unix_ms,omitempty"`
}

// Alignment is a subtask waiting for a checkpoint's barrier on its inputs.
type Alignment struct {
	CheckpointID uint64 `json:"checkpoint_id"`
	// StartedMS is when the first barrier arrived, on the agent's clock.
	StartedMS int64 `json:"started_ms"`
	// ElapsedMS is the alignment time so far.
	ElapsedMS int64 `json:"elapsed_ms"`
	// BufferedRecords are held back on the channels whose barrier arrived.
	BufferedRecords int64 `json:"buffered_records"`
	// Unaligned: the subtask has snapshotted and captures the records in
	// flight until the pending barriers arrive.
	Unaligned bool `json:"unaligned,omitempty"`
	// Blocking: the inputs whose barrier arrived are held until the
	// others' come (exactly-once, or a savepoint in any mode): the
	// alignment stalls the subtask.
	Blocking bool      `json:"blocking,omitempty"`
	Channels []Channel `json:"channels"`
}

// Aligning is a blocking alignment in progress (Status.Aligning).
type Aligning struct {
	Subtask   string // "operator/index"
	Alignment *Alignment
	// Laggard is the pending input with the largest backlog; nil when
	// every input's barrier arrived or the input ended (the snapshot is
	// next).
	Laggard *Channel
	// Backlog is the laggard's: the records queued in its channel and in
	// its sender's inputs.
	Backlog int64
}

// Aligning lists the subtasks' blocking alignments in progress, longest
// first, each with the input it waits for.
func (s Status) Aligning() []Aligning {
	queued := map[string]int64{}
	for _, op := range s.Operators {
		for _, st := range op.Subtasks {
			queued[op.ID+"/"+strconv.Itoa(st.Index)] = st.Queued
		}
	}
	var out []Aligning
	for _, op := range s.Operators {
		for _, st := range op.Subtasks {
			a := st.Alignment
			if a == nil || !a.Blocking {
				continue
			}
			al := Aligning{Subtask: op.ID + "/" + strconv.Itoa(st.Index), Alignment: a, Backlog: -1}
			for i := range a.Channels {
				c := &a.Channels[i]
				if c.Arrived || c.Ended {
					continue
				}
				if b := c.Queued + queued[c.From]; b > al.Backlog {
					al.Laggard, al.Backlog = c, b
				}
			}
			al.Backlog = max(al.Backlog, 0)
			out = append(out, al)
		}
	}
	for i := 1; i < len(out); i++ { // a few: by insertion, stable
		for j := i; j > 0 && out[j].Alignment.ElapsedMS > out[j-1].Alignment.ElapsedMS; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Channel is one input channel's barrier state.
type Channel struct {
	// From is the upstream subtask, as "operator/index".
	From    string `json:"from"`
	Arrived bool   `json:"arrived"`
	AtMS    int64  `json:"at_ms,omitempty"`
	Ended   bool   `json:"ended,omitempty"`
	// Queued is the channel's backlog: records sent, not yet processed.
	Queued int64 `json:"queued"`
}

// InFlight is a checkpoint in flight.
type InFlight struct {
	ID        uint64 `json:"id"`
	ElapsedMS int64  `json:"elapsed_ms"`
	Acked     int    `json:"acked"`
	Total     int    `json:"total"`
	// Subtasks are every subtask's acknowledgement, in the order of the
	// operators.
	Subtasks []Ack `json:"subtasks"`
}

// Ack is a subtask's acknowledgement of a checkpoint in flight.
type Ack struct {
	Subtask string `json:"subtask"` // "operator/index"
	Acked   bool   `json:"acked"`
	// AtMS is when it came, after the trigger.
	AtMS int64 `json:"at_ms,omitempty"`
}

// CheckpointResponse answers POST /checkpoint, POST /savepoint and POST
// /stop.
type CheckpointResponse struct {
	// ID is the checkpoint taken; for POST /stop without a savepoint, the
	// final checkpoint, 0 if none completed (the last completed stands).
	ID uint64 `json:"id"`
	// Path is the savepoint file written, for POST /savepoint.
	Path string `json:"path,omitempty"`
}

// Error is the body of an error response.
type Error struct {
	Error string `json:"error"`
}

// Disk is what the agent wrote to storage since it started, which on flash
// wears it out.
type Disk struct {
	// WrittenBytes is what the kernel wrote back for the agent's writes
	// (/proc/self/io write_bytes): the pages of its files and the file
	// system's own pages for them. Where the kernel does not tell, it is
	// the sum of the files' pages.
	WrittenBytes int64 `json:"written_bytes"`
	// Syncs are the fsyncs and fdatasyncs of the agent's files.
	Syncs int64 `json:"syncs"`
	// PerDayBytes is the rate of the last hour (or since the start, when
	// shorter), extrapolated to a day; PerDaySpanSeconds, the span it is
	// the rate of. Both are 0 until the agent has run 10 minutes: a few
	// seconds of a start say nothing of a day.
	PerDayBytes       int64      `json:"per_day_bytes"`
	PerDaySpanSeconds float64    `json:"per_day_span_seconds"`
	Files             []DiskFile `json:"files"`
}

// DiskFile is what the agent wrote to some of its files: "ingest" (the
// ingest logs and dead letters) or "checkpoints" (the checkpoint store),
// as pages of 4 KiB, counted as the kernel counts them, and the syncs.
type DiskFile struct {
	Name         string `json:"name"`
	WrittenBytes int64  `json:"written_bytes"`
	Syncs        int64  `json:"syncs"`
}

// DeadLetter is a stored dead letter: a message its source could not
// decode, or a record an operator rejected, with the reason.
type DeadLetter struct {
	// Seq is its place in the store: reading from Seq+1 on returns only
	// those stored after it.
	Seq uint64 `json:"seq"`
	// Time is when it was stored; zero for those an older cairn stored.
	Time time.Time `json:"time,omitzero"`
	// Cause is why: "undecodable" (a message its source could not
	// decode), "bad_time" (a message whose event time its source refused:
	// a device clock that is wrong), "damaged" (messages lost to damage
	// in the ingest log),
	// "rejected" (a record an operator rejected) or "unpublishable" (a
	// record a sink rejected).
	Cause string `json:"cause"`
	// Source is the source that received it; Operator, for a rejected
	// record, the subtask ("id/subtask") that rejected it.
	Source   string `json:"source,omitempty"`
	Operator string `json:"operator,omitempty"`
	// Topic and Offset (in its source's ingest log) are where a message
	// came from; empty and 0 for a rejected record.
	Topic  string `json:"topic,omitempty"`
	Offset uint64 `json:"offset,omitempty"`
	Reason string `json:"reason"`
	// Payload is the message or record as stored: its first 4 KiB
	// (ingest.MaxDeadLetterPayload), as text, or in base64 where
	// PayloadEncoding says "base64" (it is no UTF-8 text); PayloadBytes is
	// its whole length. The shape is ingest.ShownDeadLetter's, which a
	// source's dead_letter_topic carries too.
	Payload         string `json:"payload"`
	PayloadEncoding string `json:"payload_encoding,omitempty"`
	PayloadBytes    int    `json:"payload_bytes"`
}

// DeadLetters is a page of stored dead letters, oldest first; Next is the
// seq to read from for those stored after them.
type DeadLetters struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
	Next        uint64       `json:"next"`
}
