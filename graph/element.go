package graph

import "time"

// Record is one data element. Records travel by value inside batches, so
// moving a record costs no allocation; Payload is shared between copies and
// must be treated as immutable once emitted.
type Record struct {
	// Key is the partitioning key. A hash edge sets it from its key selector;
	// keyed state and keyed timers are scoped to it.
	Key string
	// Time is the record's event time in milliseconds (Unix epoch, by
	// convention); 0 when the record carries none.
	Time int64
	// Value is the record's numeric reading or an aggregate.
	Value float64
	// Payload is the structured part of the record (a decoded message, a join
	// result), or nil. Channel state (unaligned checkpoints) and the joins'
	// keyed state hold only the payload types of decoded messages and of
	// the built-in operators (AppendPayload): a record in flight with
	// another fails its checkpoint, and a join rejects it.
	Payload any
	// Origin says where the record came from, for a dead letter should an
	// operator reject it: the source's ingest log and offset, as the source
	// packed them (ingest.Logs.Origin unpacks them); 0 when not known (a
	// source without a log, a record an operator made, a record restored
	// from a snapshot).
	Origin uint64
}

// ControlKind says which control element, if any, ends a Batch.
type ControlKind uint8

const (
	// NoControl marks a batch of records only.
	NoControl ControlKind = iota
	// BarrierControl marks a checkpoint barrier.
	BarrierControl
	// WatermarkControl marks an event-time watermark.
	WatermarkControl
	// EndOfStreamControl marks the end of the channel: nothing follows it.
	EndOfStreamControl
)

func (k ControlKind) String() string {
	switch k {
	case NoControl:
		return "none"
	case BarrierControl:
		return "barrier"
	case WatermarkControl:
		return "watermark"
	case EndOfStreamControl:
		return "end-of-stream"
	}
	return "unknown"
}

// Barrier is a checkpoint barrier. It divides a channel into the records that
// belong to checkpoint ID's state (before it) and those that do not (after).
type Barrier struct {
	ID uint64
	// Triggered is when the coordinator triggered the checkpoint, on the job's
	// monotonic clock; subtasks use it to report their start delay.
	Triggered time.Duration
	// Unaligned is set on a barrier forwarded by a subtask that took the
	// checkpoint unaligned: it overtakes the records in front of it, and a
	// subtask it reaches takes the checkpoint unaligned too.
	Unaligned bool
	// Aligned marks a savepoint: aligned in every mode, so it holds no
	// channel state and restores under another parallelism.
	Aligned bool
}

// Control is an in-band control element. It is never reordered with the
// records of its channel.
type Control struct {
	Kind      ControlKind
	Barrier   Barrier // when Kind is BarrierControl
	Watermark int64   // when Kind is WatermarkControl
	// Idle, with a watermark, says its sender has no input now
	// (Idleness): the receiver takes its event time from its other
	// inputs until a watermark without it comes. Records on the channel
	// come after such a watermark.
	Idle bool
}

// Batch is the unit that crosses a channel: records in order, then an
// optional control element. A control element always ends a batch, so a
// barrier is never reordered with the records around it.
type Batch struct {
	Records []Record
	Control Control
}

// Reset empties b for reuse, keeping its record capacity.
func (b *Batch) Reset() {
	clear(b.Records) // drop Payload references
	b.Records = b.Records[:0]
	b.Control = Control{}
}
