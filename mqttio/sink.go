package mqttio

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/graph"
)

// SinkConfig configures a two-phase-commit MQTT sink.
type SinkConfig struct {
	Client ClientConfig
	// Topic is where records go; "{key}" in it is replaced by the record's
	// key. A record whose topic is not one a broker takes (CheckTopic) is
	// rejected (graph.RecordError), and a Topic that makes no valid topic
	// for any key (CheckTopicTemplate) fails Open.
	Topic  string
	Retain bool
	// Metrics, if set, receives the sink's counters.
	Metrics *SinkMetrics
	// Backlog, if set, counts the bytes the sink holds until the broker
	// acknowledges them, with those of the job's other sinks.
	Backlog *Backlog
	// Format is the shape of the messages (OutputFormat); its Check must
	// have passed.
	Format OutputFormat
}

// SinkMetrics are a sink's counters.
type SinkMetrics struct {
	Staged      atomic.Int64 // records staged for a checkpoint
	Published   atomic.Int64 // messages acknowledged by the broker
	Unencodable atomic.Int64 // records dropped: not encodable as JSON (NaN, ±Inf)
	// Renumbered counts the restores after which a subtask began a new
	// numbering (Output) rather than continue the restored one: outputs
	// its replay publishes again carry new ids.
	Renumbered atomic.Int64
	// Unordered counts the subtasks whose input is not ordered
	// (graph.TaskInfo.OrderedInput), whose every restore renumbers.
	Unordered atomic.Int64
}

// Output is the JSON of every message the sink publishes. ID is
// "<sink>-<epoch>-<subtask>-<position>-<hash>": the position of the
// message in what the sink subtask staged since the checkpoint epoch
// began its numbering, and a hash of the message (outputID). The same
// staged output always has the same id, so a consumer that drops repeated
// ids sees each message exactly once; the sink names itself, so ids are
// unique across the sinks of a pipeline.
// Where the sink's input is ordered (graph.TaskInfo.OrderedInput), a
// restore continues the restored numbering, so that after a fallback to
// an older checkpoint the outputs published again carry the ids they had;
// elsewhere a restore begins a new numbering (SinkMetrics.Renumbered).
// Output staged by a cairn before numberings keeps its id,
// "<checkpoint>-<subtask>-<sequence>".
type Output struct {
	ID      string  `json:"id"`
	Key     string  `json:"key,omitempty"`
	Time    int64   `json:"time,omitempty"`
	Value   float64 `json:"value"`
	Payload any     `json:"payload,omitempty"`
}

// NewSink returns the constructor of a sink node's subtasks.
func NewSink(cfg SinkConfig) func(subtask int) graph.Operator {
	if cfg.Metrics == nil {
		cfg.Metrics = new(SinkMetrics)
	}
	if cfg.Client.Logger == nil {
		cfg.Client.Logger = slog.Default()
	}
	topic := NewTopicTemplate(cfg.Topic)
	cfg.Format.prepare()
	return func(subtask int) graph.Operator {
		return &sink{cfg: cfg, subtask: subtask, topic: topic, name: "sink", id: "sink", numbering: numbering{subtask: subtask, parallelism: 1}}
	}
}

// sink stages records per checkpoint in its state and publishes a
// checkpoint's records once it completes.
//
// Staged output is held encoded (see batch), once, in blocks deflated as
// they fill: a snapshot writes the blocks not yet acknowledged into the
// state as they are, which shrinks as the broker acknowledges them,
// instead of re-encoding whole batches at every checkpoint.
type sink struct {
	graph.BaseOperator
	cfg     SinkConfig
	subtask int
	topic   TopicTemplate
	name    string         // "sink ID", for messages
	id      string         // the sink's id, in output ids
	ctx     *graph.Context // from Open; nil before
	client  paho.Client
	gate    *resumeGate // publish only while open
	// reconnects counts the client's reconnection attempts.
	reconnects atomic.Uint64

	current batch  // since the last barrier
	body    []byte // the message ProcessRecord encodes
	// numbering numbers what is staged (Output); its epoch is 0 until the
	// first barrier of a new numbering sets it.
	numbering numbering
	ordered   bool // graph.TaskInfo.OrderedInput

	mu        sync.Mutex
	pending   []*batch // snapshotted, oldest first, not yet all acknowledged by the broker
	committed uint64   // batches up to this checkpoint may be published

	wake chan struct{} // committed moved
	stop chan struct{}
	wg   sync.WaitGroup
}

func (s *sink) Open(ctx *graph.Context) error {
	if ctx != nil { // nil in tests that drive a sink by hand
		s.ctx, s.name, s.id = ctx, "sink "+ctx.Info().Operator, ctx.Info().Operator
		s.ordered, s.numbering.parallelism = ctx.Info().OrderedInput, ctx.Info().Parallelism
		if !s.ordered {
			s.cfg.Metrics.Unordered.Add(1)
		}
	}
	if s.topic.err != nil {
		return s.topic.err
	}
	var err error
	s.client, s.gate, err = s.cfg.Client.connect("-sink-"+strconv.Itoa(s.subtask), nil, nil, func() { s.reconnects.Add(1) })
	if err != nil {
		return err
	}
	s.wake = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.wg.Add(1)
	go s.publish()
	return nil
}

func (s *sink) ProcessRecord(_ int, r *graph.Record) error {
	// A topic the broker does not take would cost the connection, again
	// after every reconnection, and with it all later output: the record
	// is rejected instead, before it is staged.
	if err := s.topic.check(r.Key); err != nil {
		return graph.Reject(fmt.Errorf("%s: %w", s.name, err))
	}
	body, err := s.cfg.Format.appendBody(s.body[:0], r)
	s.body = body
	if err != nil {
		// Failing the job would fail it again on every replay of this
		// record: it is rejected (counted, logged once a minute, a dead
		// letter), and counted apart as one JSON cannot encode.
		s.cfg.Metrics.Unencodable.Add(1)
		return graph.Reject(fmt.Errorf("%s: %w", s.name, err))
	}
	s.cfg.Backlog.Add(int64(s.current.add(s.topic.parts, r.Key, body)))
	s.cfg.Metrics.Staged.Add(1)
	return nil
}

// SnapshotStateParts implements graph.StateParts: it stages the records
// since the last barrier under checkpoint id; the state holds every staged
// message not yet acknowledged by the broker, as the blocks that hold them
// (encodeBatches), which are never written again.
func (s *sink) SnapshotStateParts(id uint64) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.numbering.epoch == 0 {
		s.numbering.epoch = id
	}
	if s.current.size > 0 {
		b := s.current
		before := b.size
		b.seal()
		s.cfg.Backlog.Add(int64(b.size - before))
		b.checkpoint, b.subtask = id, s.subtask
		b.epoch, b.base = s.numbering.epoch, s.numbering.next
		for _, k := range b.blocks {
			s.numbering.next += uint64(k.count)
		}
		s.pending = append(s.pending, &b)
		s.current = batch{}
	}
	return encodeBatches(s.numbering, s.pending), nil
}

// SnapshotState is SnapshotStateParts joined, for callers other than the
// runtime.
func (s *sink) SnapshotState(id uint64) ([]byte, error) {
	parts, err := s.SnapshotStateParts(id)
	return bytes.Join(parts, nil), err
}

// RestoreState takes back batches of the restored checkpoint, which is
// complete: they are published (again). Where the input is ordered, the
// subtask goes on with the restored numbering (Output).
func (s *sink) RestoreState(data []byte) error {
	n, err := s.restore([][]byte{data})
	if err != nil {
		return err
	}
	if s.ordered && n[0].epoch != 0 && n[0].subtask == s.subtask && n[0].parallelism == s.numbering.parallelism {
		s.numbering = n[0]
	} else {
		s.cfg.Metrics.Renumbered.Add(1)
	}
	return nil
}

// RestoreStates implements graph.RescalableState: after a restore under
// another parallelism, a subtask publishes the batches of the old subtasks
// that fall to it, each with its own ids, in checkpoint order, and begins
// a new numbering.
func (s *sink) RestoreStates(states [][]byte) error {
	_, err := s.restore(states)
	s.cfg.Metrics.Renumbered.Add(1)
	return err
}

// restore takes back the batches of states and returns their numberings.
func (s *sink) restore(states [][]byte) ([]numbering, error) {
	var batches []*batch
	var ns []numbering
	for _, data := range states {
		n, some, err := decodeBatches(data, s.subtask)
		if err != nil {
			return nil, fmt.Errorf("sink state: %w", err)
		}
		ns = append(ns, n)
		for _, b := range some {
			if !b.badTopics {
				batches = append(batches, b)
				continue
			}
			kept, err := s.dropBadTopics(b)
			if err != nil {
				return nil, err
			}
			batches = append(batches, kept...)
		}
	}
	slices.SortStableFunc(batches, func(a, b *batch) int { return cmp.Compare(a.checkpoint, b.checkpoint) })
	var last uint64
	for _, b := range batches {
		last = max(last, b.checkpoint)
		s.cfg.Backlog.Add(int64(b.size))
	}
	s.mu.Lock()
	s.pending = batches
	s.mu.Unlock()
	return ns, s.CheckpointComplete(last)
}

// dropBadTopics returns the messages of b, which a cairn staged before it
// checked topics, but for those whose topics are not valid (CheckTopic),
// which it rejects (graph.Context.Reject): published, they would cost the
// connection after every reconnection, and with it all later output. The
// messages left keep their ids: b is cut into batches of the same
// checkpoint around each rejected one.
func (s *sink) dropBadTopics(b *batch) ([]*batch, error) {
	var kept []*batch
	c := b.cursor()
	piece := &batch{checkpoint: b.checkpoint, subtask: b.subtask, seq: c.seq, epoch: b.epoch, base: b.base}
	for {
		seq, topic, body, ok, err := c.message()
		if err != nil {
			return nil, fmt.Errorf("sink state: %w", err)
		}
		if !ok {
			break
		}
		terr := CheckTopic(topic)
		if terr == nil {
			piece.add([]string{topic}, "", body)
			continue
		}
		var out Output
		if err := json.Unmarshal(append([]byte(`{"id":""`), body...), &out); err != nil {
			out = Output{Payload: string(body)} // a body the sink wrote is JSON
		}
		err = fmt.Errorf("%s: %w (output %s, staged by a cairn before it checked topics; not published)", s.name, terr, outputID(nil, s.id, b, seq, body))
		if err := s.reject(&graph.Record{Key: out.Key, Time: out.Time, Value: out.Value, Payload: out.Payload}, err); err != nil {
			return nil, err
		}
		if piece.size > 0 {
			piece.seal()
			kept = append(kept, piece)
		}
		piece = &batch{checkpoint: b.checkpoint, subtask: b.subtask, seq: seq + 1, epoch: b.epoch, base: b.base}
	}
	if piece.size > 0 {
		piece.seal()
		kept = append(kept, piece)
	}
	return kept, nil
}

// reject rejects r, which is not a record ProcessRecord was given
// (graph.Context.Reject); before Open, it returns err.
func (s *sink) reject(r *graph.Record, err error) error {
	if s.ctx == nil {
		return err
	}
	return s.ctx.Reject(r, err)
}

// CheckpointComplete lets the publisher send every batch staged up to id
// (invariant I7). It never blocks: while the broker is away, committed
// batches wait in pending, and in the checkpoints' state.
func (s *sink) CheckpointComplete(id uint64) error {
	s.mu.Lock()
	s.committed = max(s.committed, id)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// CheckpointAborted keeps the batch: a later checkpoint's completion
// covers it.
func (s *sink) CheckpointAborted(uint64) {}

// publishWindow is how many messages the publisher keeps unacknowledged.
const publishWindow = 64

// sent is a message published and not yet known to be acknowledged.
type sent struct {
	b          *batch
	seq        uint64
	tok        paho.Token
	reconnects uint64 // the client's reconnection attempts before it was published
}

// publish sends committed batches in order at QoS 1, up to publishWindow
// messages ahead of the broker's acknowledgements, and drops each message
// from the state once the broker has acknowledged it.
//
// Only a token that completes within one connection counts: when paho
// resends its unacknowledged publishes after a reconnect, it completes
// their tokens as it sends them, before the broker acknowledges. So the
// publisher sends only while connected, and when a reconnection began while
// a message was out, or a publish failed, it forgets what is out and sends
// again from the oldest message not acknowledged, in order, under the same
// ids. paho resends its own copies in order too (an ordered store), so a
// consumer that drops repeated ids sees every message once, in order.
func (s *sink) publish() {
	defer s.wg.Done()
	var window []sent
	var next cursor // the next message to send; at the head when zero
	for {
		for len(window) < publishWindow {
			reconnects := s.reconnects.Load()
			if !s.connected() || len(window) > 0 && window[0].reconnects != reconnects {
				// Disconnected, or what is out was published before a
				// reconnection and must be sent again first, in order,
				// while paho resends its copies.
				break
			}
			b, seq, topic, body, ok, err := s.advance(&next)
			if err != nil {
				// A bug, not damage: decodeBatches checks every block.
				// Publishing on would skip output; stop and say so.
				s.cfg.Client.Logger.Error("sink cannot read its staged output; publishing stopped", "err", err)
				<-s.stop
				return
			}
			if !ok {
				break
			}
			// A payload of its own: paho keeps it until the broker acknowledges.
			payload := append(outputID(append(make([]byte, 0, len(body)+len(s.id)+56), `{"id":"`...), s.id, b, seq, body), '"')
			payload = append(payload, body...)
			window = append(window, sent{b: b, seq: seq, tok: s.client.Publish(topic, 1, s.cfg.Retain, payload), reconnects: reconnects})
		}
		if len(window) == 0 {
			var retry <-chan time.Time // while disconnected, look again soon
			if !s.connected() {
				retry = time.After(100 * time.Millisecond)
			}
			select {
			case <-s.wake:
			case <-retry:
			case <-s.stop:
				return
			}
			continue
		}
		out := window[0]
		select {
		case <-out.tok.Done():
		case <-s.stop:
			return
		}
		if out.tok.Error() == nil && s.reconnects.Load() == out.reconnects && s.acknowledged(out) {
			window = window[1:]
			s.cfg.Metrics.Published.Add(1)
			continue
		}
		if err := out.tok.Error(); err != nil {
			s.cfg.Client.Logger.Warn("MQTT publish failed; publishing again", "err", err)
			select {
			case <-time.After(500 * time.Millisecond):
			case <-s.stop:
				return
			}
		}
		window, next = nil, cursor{}
	}
}

// connected reports whether the client is connected and paho has taken
// the list of what it resends on this connection (resumeGate).
func (s *sink) connected() bool { return s.gate.ready(s.client) }

// advance returns the message at c among the committed batches and moves c
// past it; a zero c starts at the oldest message not acknowledged.
func (s *sink) advance(c *cursor) (b *batch, seq uint64, topic string, body []byte, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if c.b == nil {
			for len(s.pending) > 0 && s.pending[0].size == 0 {
				s.pending = s.pending[1:] // restored empty
			}
			if len(s.pending) == 0 || s.pending[0].checkpoint > s.committed {
				return nil, 0, "", nil, false, nil
			}
			*c = s.pending[0].cursor()
		}
		if seq, topic, body, ok, err := c.message(); ok || err != nil {
			return c.b, seq, topic, body, ok, err
		}
		i := slices.Index(s.pending, c.b)
		switch {
		case i < 0: // acknowledged whole and gone: go on from the oldest left
			*c = cursor{}
		case i+1 < len(s.pending) && s.pending[i+1].checkpoint <= s.committed:
			*c = s.pending[i+1].cursor()
		default:
			return nil, 0, "", nil, false, nil
		}
	}
}

// acknowledged drops out's message, which must be the oldest left, from the
// state; false if it is not.
func (s *sink) acknowledged(out sent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 || s.pending[0] != out.b || out.b.seq != out.seq || out.b.size == 0 {
		return false
	}
	s.cfg.Backlog.Add(int64(out.b.drop()))
	if out.b.size == 0 {
		s.pending = s.pending[1:]
	}
	return true
}

// Close stops publishing; what was not acknowledged stays in the last
// checkpoint's state and is published after a restore.
func (s *sink) Close() error {
	if s.stop != nil {
		close(s.stop)
		s.wg.Wait()
	}
	if s.client != nil {
		s.client.Disconnect(250)
	}
	// What is left stays in the checkpoint, and a restored sink counts it
	// again.
	s.mu.Lock()
	held := s.current.size
	for _, b := range s.pending {
		held += b.size
	}
	s.mu.Unlock()
	s.cfg.Backlog.Add(-int64(held))
	return nil
}
