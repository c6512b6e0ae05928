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
// Records on a channel are numbered from 1 in the order they are sent,
// separately by the sender (outChannel.sent) and the receiver (task.received
// and task.processed), so a barrier that overtakes records carries a mark:
// the number of records its sender had sent on the channel before it. When a
// subtask snapshots before every barrier arrived, the channel state of input
// channel c is the records numbered from[c]+1 (the first not processed at
// the snapshot) to until[c] (the mark of c's barrier). They are captured as
// they are received — the ones already queued at once — and still processed
// as usual; the asynchronous phase stores them once every channel's are in.
// A barrier is always handled before any record that follows it is
// processed (the executors drain control messages before a batch), so a
// snapshot never includes a record numbered above its channel's mark.

// openMark is the end of a channel's capture while its barrier is pending.
const openMark = math.MaxUint64

// capture collects the channel state of one unaligned snapshot.
type capture struct {
	id          uint64
	from, until []uint64
	records     [][]graph.Record
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

func newCapture(id uint64, processed []uint64) *capture {
	c := &capture{id: id, from: slices.Clone(processed), until: make([]uint64, len(processed)),
		records: make([][]graph.Record, len(processed)), result: make(chan inflightResult, 1)}
	for ch := range c.until {
		c.until[ch] = openMark
	}
	return c
}

// take captures the records of recs, numbered from first on, that belong
// to channel ch's state.
func (c *capture) take(ch int, first uint64, recs []graph.Record) {
	for i := range recs {
		if n := first + uint64(i); n > c.from[ch] && n <= c.until[ch] {
			c.records[ch] = append(c.records[ch], recs[i])
		}
	}
}

// close ends channel ch's capture at mark, dropping records captured past
// it while the mark was unknown.
func (c *capture) close(ch int, mark uint64) error {
	if mark < c.from[ch] {
		return fmt.Errorf("checkpoint %d: channel %d processed %d records before a snapshot whose barrier came after %d",
			c.id, ch, c.from[ch], mark)
	}
	c.until[ch] = mark
	if keep := mark - c.from[ch]; uint64(len(c.records[ch])) > keep {
		c.records[ch] = c.records[ch][:keep]
	}
	return nil
}

// complete reports whether every channel's state has been received.
func (c *capture) complete(received []uint64) bool {
	if !c.barriersIn {
		return false
	}
	for ch, u := range c.until {
		if u == openMark || received[ch] < u {
			return false
		}
	}
	return true
}

// finish hands the channel state to the asynchronous phase.
func (c *capture) finish() {
	var n int64
	for _, recs := range c.records {
		n += int64(len(recs))
	}
	if n == 0 {
		c.result <- inflightResult{}
		return
	}
	data, err := encodeChannelState(c.records)
	c.result <- inflightResult{data: data, records: n, err: err}
}

// abort releases the asynchronous phase without an acknowledgement.
func (c *capture) abort() { c.result <- inflightResult{aborted: true} }

// Channel state is encoded with package wire: the header of magic
// channelStateMagic and version channelStateVersion, the count of input
// channels, and for each the count of its records, each as its key
// (length-prefixed), time (varint), value (float64), origin (uvarint) and
// payload (graph.AppendPayload, whose bytes are of this version too).
// Version 1, still read, was encoding/gob's (inflightgob.go).
const (
	channelStateMagic   = "CRNC"
	channelStateVersion = 2
)

// minRecordBytes is the fewest bytes a record takes, which bounds how
// many a damaged count can make the decoder allocate.
const minRecordBytes = 12 // key, time, value (8), origin, payload

// encodeChannelState encodes per-channel records. A payload of a type
// other than the built-in operators' and decoded messages' is an error.
func encodeChannelState(channels [][]graph.Record) ([]byte, error) {
	var e wire.Encoder
	e.Header(channelStateMagic, channelStateVersion)
	e.Uvarint(uint64(len(channels)))
	for _, recs := range channels {
		e.Uvarint(uint64(len(recs)))
		for i := range recs {
			r := &recs[i]
			e.String(r.Key)
			e.Varint(r.Time)
			e.Float64(r.Value)
			e.Uvarint(r.Origin)
			if err := graph.AppendPayload(&e, r.Payload); err != nil {
				return nil, fmt.Errorf("encoding records in flight: %w", err)
			}
		}
	}
	return e, nil
}

// decodeChannelState decodes what encodeChannelState wrote, or a cairn
// before it, for a subtask with the given number of input channels.
func decodeChannelState(data []byte, channels int) ([][]graph.Record, error) {
	d := wire.NewDecoder(data)
	var out [][]graph.Record
	switch v := d.Header(channelStateMagic); {
	case d.Err() != nil:
	case v == 1:
		var err error
		if out, err = decodeGobChannelState(d.Rest()); err != nil {
			return nil, fmt.Errorf("decoding channel state of version 1: %w", err)
		}
	case v != channelStateVersion:
		d.Fail(fmt.Errorf("unknown version %d", v))
	default:
		out = make([][]graph.Record, d.Count(1))
		for ch := 0; ch < len(out) && d.Err() == nil; ch++ {
			n := d.Count(minRecordBytes)
			if n > 0 {
				out[ch] = make([]graph.Record, n)
			}
			for i := 0; i < n && d.Err() == nil; i++ {
				r := &out[ch][i]
				r.Key = string(d.Bytes())
				r.Time = d.Varint()
				r.Value = d.Float64()
				r.Origin = d.Uvarint()
				r.Payload = graph.DecodePayload(&d)
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
func (t *task) noteBarrier(ch int, b graph.Barrier, mark uint64) error {
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
		next := t.processed[ch] + 1
		for _, b := range t.inbox.queued(ch) {
			c.take(ch, next, b.Records)
			next += uint64(len(b.Records))
		}
	}
	return c, nil
}

// receive counts a batch taken off channel ch, before it is processed, and
// captures its records if they are channel state.
func (t *task) receive(ch int, b *graph.Batch) {
	first := t.received[ch] + 1
	t.received[ch] += uint64(len(b.Records))
	if c := t.capture; c != nil {
		c.take(ch, first, b.Records)
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
	return c != nil && (c.until[ch] == openMark || t.received[ch] <= c.until[ch])
}

// replay processes the channel state a restore brought back, before any new
// input (invariant I5).
func (t *task) replay() error {
	for ch, recs := range t.recovered {
		if len(recs) > 0 {
			if err := t.processRecords(ch, recs); err != nil {
				return err
			}
		}
	}
	t.recovered = nil
	return t.err
}

// restoreChannelState reads the channel state of own, if any, for a
// subtask with the given input channels.
func restoreChannelState(own *restored, store checkpoint.Store, channels int) ([][]graph.Record, error) {
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
