package runtime

import (
	"fmt"
	"math"
	"slices"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/wire"
)

// Channel state of unaligned checkpoints.
//
// What travels on a channel is numbered from 1 in the order it is sent,
// records and control elements apart (position), separately by the sender
// (outChannel.sent) and the receiver (task.received and task.processed), so
// a barrier that overtakes them carries a mark: the position of its sender
// on the channel when it was sent. When a subtask snapshots before every
// barrier arrived, the channel state of input channel c is what lies after
// from[c] (what was processed at the snapshot) up to until[c] (the mark of
// c's barrier): the records, and the watermarks among them in their
// places, so that a record replayed meets the event time it met the first
// time. They are captured as they are received — the ones already queued
// at once — and still processed as usual; the asynchronous phase stores
// them once every channel's are in. A barrier is always handled before
// anything that follows it is processed (the executors drain control
// messages before a batch), so a snapshot never includes what lies past
// its channel's mark.

// position is how far along a channel: the records, and the control
// elements (watermarks, aligned barriers, its end), sent, received or
// processed on it. A batch's control element follows its records.
type position struct{ records, controls uint64 }

// after is p past batch b.
func (p position) after(b *graph.Batch) position {
	p.records += uint64(len(b.Records))
	if b.Control.Kind != graph.NoControl {
		p.controls++
	}
	return p
}

// openMark is the end of a channel's capture while its barrier is pending.
var openMark = position{math.MaxUint64, math.MaxUint64}

// channelState is an input channel's part of an unaligned snapshot: the
// records in flight, and the watermarks among them.
type channelState struct {
	records    []graph.Record
	watermarks []watermarkInFlight
}

// watermarkInFlight is a watermark control element of a channel's state.
type watermarkInFlight struct {
	after   int           // how many of the channel state's records precede it
	control graph.Control // of kind graph.WatermarkControl
	seq     uint64        // its number among the channel's control elements, while captured; not stored
}

// capture collects the channel state of one unaligned snapshot.
type capture struct {
	id          uint64
	from, until []position
	channels    []channelState
	barriersIn  bool // every barrier arrived or its channel ended
	result      chan inflightResult
}

// inflightResult hands a capture's outcome to the asynchronous phase.
type inflightResult struct {
	data    []byte // the encoded channel state; nil when there was none
	records int64
	aborted bool // the checkpoint was aborted or declined: no ack
	err     error
}

func newCapture(id uint64, processed []position) *capture {
	c := &capture{id: id, from: slices.Clone(processed), until: make([]position, len(processed)),
		channels: make([]channelState, len(processed)), result: make(chan inflightResult, 1)}
	for ch := range c.until {
		c.until[ch] = openMark
	}
	return c
}

// take captures what of batch b, received on channel ch after position
// before, belongs to the channel's state.
func (c *capture) take(ch int, before position, b *graph.Batch) {
	cs := &c.channels[ch]
	for i := range b.Records {
		if n := before.records + uint64(i) + 1; n > c.from[ch].records && n <= c.until[ch].records {
			cs.records = append(cs.records, b.Records[i])
		}
	}
	if b.Control.Kind == graph.WatermarkControl {
		if n := before.controls + 1; n > c.from[ch].controls && n <= c.until[ch].controls {
			cs.watermarks = append(cs.watermarks, watermarkInFlight{after: len(cs.records), control: b.Control, seq: n})
		}
	}
}

// close ends channel ch's capture at mark, dropping what was captured past
// it while the mark was unknown.
func (c *capture) close(ch int, mark position) error {
	if from := c.from[ch]; mark.records < from.records || mark.controls < from.controls {
		return fmt.Errorf("checkpoint %d: channel %d processed %d records and %d control elements before a snapshot whose barrier came after %d and %d",
			c.id, ch, from.records, from.controls, mark.records, mark.controls)
	}
	c.until[ch] = mark
	cs := &c.channels[ch]
	if keep := mark.records - c.from[ch].records; uint64(len(cs.records)) > keep {
		cs.records = cs.records[:keep]
	}
	cs.watermarks = slices.DeleteFunc(cs.watermarks, func(w watermarkInFlight) bool { return w.seq > mark.controls })
	return nil
}

// complete reports whether every channel's state has been received.
func (c *capture) complete(received []position) bool {
	if !c.barriersIn {
		return false
	}
	for ch, u := range c.until {
		if u == openMark || received[ch].records < u.records || received[ch].controls < u.controls {
			return false
		}
	}
	return true
}

// finish hands the channel state to the asynchronous phase.
func (c *capture) finish() {
	var n, w int64
	for _, cs := range c.channels {
		n, w = n+int64(len(cs.records)), w+int64(len(cs.watermarks))
	}
	if n == 0 && w == 0 {
		c.result <- inflightResult{}
		return
	}
	data, err := encodeChannelState(c.channels)
	c.result <- inflightResult{data: data, records: n, err: err}
}

// abort releases the asynchronous phase without an acknowledgement.
func (c *capture) abort() { c.result <- inflightResult{aborted: true} }

// Channel state is encoded with package wire: the header of magic
// channelStateMagic and version channelStateVersion, the count of input
// channels, and for each the count of its records, each as its key
// (length-prefixed), time (varint), value (float64), origin (uvarint) and
// payload (graph.AppendPayload, whose bytes are of this version too), then
// the count of its watermarks, each as the count of records before it
// (uvarint), the watermark (varint) and whether its sender was idle
// (bool). Version 2, still read, had no watermarks; version 1, still read,
// was encoding/gob's (inflightgob.go).
const (
	channelStateMagic   = "CRNC"
	channelStateVersion = 3
)

// minRecordBytes and minWatermarkBytes are the fewest bytes a record and
// a watermark take, which bound how many a damaged count can make the
// decoder allocate.
const (
	minRecordBytes    = 12 // key, time, value (8), origin, payload
	minWatermarkBytes = 3  // after, watermark, idle
)

// encodeChannelState encodes per-channel state. A payload of a type other
// than the built-in operators' and decoded messages' is an error.
func encodeChannelState(channels []channelState) ([]byte, error) {
	var e wire.Encoder
	e.Header(channelStateMagic, channelStateVersion)
	e.Uvarint(uint64(len(channels)))
	for _, cs := range channels {
		e.Uvarint(uint64(len(cs.records)))
		for i := range cs.records {
			r := &cs.records[i]
			e.String(r.Key)
			e.Varint(r.Time)
			e.Float64(r.Value)
			e.Uvarint(r.Origin)
			if err := graph.AppendPayload(&e, r.Payload); err != nil {
				return nil, fmt.Errorf("encoding records in flight: %w", err)
			}
		}
		e.Uvarint(uint64(len(cs.watermarks)))
		for _, w := range cs.watermarks {
			e.Uvarint(uint64(w.after))
			e.Varint(w.control.Watermark)
			e.Bool(w.control.Idle)
		}
	}
	return e, nil
}

// decodeChannelState decodes what encodeChannelState wrote, or a cairn
// before it, for a subtask with the given number of input channels.
func decodeChannelState(data []byte, channels int) ([]channelState, error) {
	d := wire.NewDecoder(data)
	var out []channelState
	switch v := d.Header(channelStateMagic); {
	case d.Err() != nil:
	case v == 1:
		recs, err := decodeGobChannelState(d.Rest())
		if err != nil {
			return nil, fmt.Errorf("decoding channel state of version 1: %w", err)
		}
		out = make([]channelState, len(recs))
		for ch := range recs {
			out[ch].records = recs[ch]
		}
	case v != 2 && v != channelStateVersion:
		d.Fail(fmt.Errorf("unknown version %d", v))
	default:
		out = make([]channelState, d.Count(1))
		for ch := 0; ch < len(out) && d.Err() == nil; ch++ {
			cs := &out[ch]
			if n := d.Count(minRecordBytes); n > 0 {
				cs.records = make([]graph.Record, n)
			}
			for i := 0; i < len(cs.records) && d.Err() == nil; i++ {
				r := &cs.records[i]
				r.Key = string(d.Bytes())
				r.Time = d.Varint()
				r.Value = d.Float64()
				r.Origin = d.Uvarint()
				r.Payload = graph.DecodePayload(&d)
			}
			if v == 2 {
				continue
			}
			if n := d.Count(minWatermarkBytes); n > 0 {
				cs.watermarks = make([]watermarkInFlight, n)
			}
			last := 0
			for i := 0; i < len(cs.watermarks) && d.Err() == nil; i++ {
				w := &cs.watermarks[i]
				after := d.Uvarint()
				if after < uint64(last) || after > uint64(len(cs.records)) {
					d.Fail(fmt.Errorf("channel %d: a watermark after record %d of %d, past one after %d", ch, after, len(cs.records), last))
					break
				}
				w.after, last = int(after), int(after)
				w.control = graph.Control{Kind: graph.WatermarkControl, Watermark: d.Varint(), Idle: d.Bool()}
			}
		}
	}
	if err := d.End(); err != nil {
		return nil, fmt.Errorf("decoding channel state: %w", err)
	}
	if len(out) != channels {
		return nil, fmt.Errorf("channel state of %d input channels for a subtask with %d", len(out), channels)
	}
	return out, nil
}

// noteBarrier records the mark of barrier b on channel ch and closes the
// channel's capture if b's checkpoint is being captured.
func (t *task) noteBarrier(ch int, b graph.Barrier, mark position) error {
	if b.ID != t.markID {
		t.markID = b.ID
		clear(t.marked)
	}
	t.marks[ch], t.marked[ch] = mark, true
	if c := t.capture; c != nil && c.id == b.ID && c.until[ch] == openMark {
		return c.close(ch, mark)
	}
	return nil
}

// startCapture begins the channel state of unaligned snapshot id: channels
// whose barrier already arrived end at its mark, ended channels hold
// nothing, and the records already received and not processed are taken at
// once.
func (t *task) startCapture(id uint64) (*capture, error) {
	c := newCapture(id, t.processed)
	ended := t.handler.Alignment().Ended
	for ch := range c.until {
		var err error
		switch {
		case t.markID == id && t.marked[ch]:
			err = c.close(ch, t.marks[ch])
		case ch < len(ended) && ended[ch]:
			err = c.close(ch, t.processed[ch])
		}
		if err != nil {
			return nil, err
		}
		at := t.processed[ch]
		for _, b := range t.inbox.queued(ch) {
			c.take(ch, at, b)
			at = at.after(b)
		}
	}
	return c, nil
}

// receive counts a batch taken off channel ch, before it is processed, and
// captures its records if they are channel state.
func (t *task) receive(ch int, b *graph.Batch) {
	before := t.received[ch]
	t.received[ch] = before.after(b)
	if c := t.capture; c != nil {
		c.take(ch, before, b)
		t.checkCapture()
	}
}

// checkCapture hands a complete capture to the asynchronous phase.
func (t *task) checkCapture() {
	if c := t.capture; c != nil && c.complete(t.received) {
		t.capture = nil
		c.finish()
	}
}

// dropCapture ends the capture of checkpoint id, which will not complete.
func (t *task) dropCapture(id uint64) {
	if c := t.capture; c != nil && c.id == id {
		t.capture = nil
		c.abort()
	}
}

// fullyCaptured reports whether every record of the batch last received on
// ch is channel state of the capture in progress, so that its credit can go
// back before it is processed: it is part of the checkpoint already.
func (t *task) fullyCaptured(ch int) bool {
	c := t.capture
	return c != nil && (c.until[ch] == openMark || t.received[ch].records <= c.until[ch].records)
}

// replay processes the channel state a restore brought back, before any new
// input (invariant I5): each channel's records, and its watermarks in their
// places.
func (t *task) replay() error {
	for ch, cs := range t.recovered {
		done := 0
		for _, w := range cs.watermarks {
			if err := t.processRecords(ch, cs.records[done:w.after]); err != nil {
				return err
			}
			if err := t.watermarkArrived(ch, w.control); err != nil {
				return err
			}
			done = w.after
		}
		if err := t.processRecords(ch, cs.records[done:]); err != nil {
			return err
		}
	}
	t.recovered = nil
	return t.err
}

// restoreChannelState reads the channel state of own, if any, for a
// subtask with the given input channels.
func restoreChannelState(own *restored, store checkpoint.Store, channels int) ([]channelState, error) {
	if own == nil || own.ack.InFlight == nil {
		return nil, nil
	}
	data, err := store.ReadState(*own.ack.InFlight)
	if err != nil {
		return nil, err
	}
	return decodeChannelState(data, channels)
}

// storeChannelState stores a capture's outcome r with ack. It reports
// false when there is nothing to acknowledge: the checkpoint was aborted
// (no reason) or the state could not be stored (the reason to decline).
func storeChannelState(store checkpoint.Store, ack *checkpoint.Ack, r inflightResult) (bool, string) {
	switch {
	case r.aborted:
		return false, ""
	case r.err != nil:
		return false, r.err.Error()
	case r.data == nil:
		return true, ""
	}
	h, err := store.PutState(ack.ID, checkpoint.InFlightTask(ack.Task), slices.Values([][]byte{r.data}))
	if err != nil {
		return false, "storing channel state: " + err.Error()
	}
	ack.InFlight = &h
	ack.Stats.InFlightRecords, ack.Stats.InFlightBytes = r.records, h.Size
	return true, ""
}
