package mqttio

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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
	// key.
	Topic  string
	Retain bool
	// Metrics, if set, receives the sink's counters.
	Metrics *SinkMetrics
}

// SinkMetrics are a sink's counters.
type SinkMetrics struct {
	Staged      atomic.Int64 // records staged for a checkpoint
	Published   atomic.Int64 // messages acknowledged by the broker
	Unencodable atomic.Int64 // records dropped: not encodable as JSON (NaN, ±Inf)
}

// Output is the JSON of every message the sink publishes. ID is
// "<checkpoint>-<subtask>-<sequence>": the same output always has the same
// id, so a consumer that drops repeated ids sees each record exactly once.
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
	return func(subtask int) graph.Operator { return &sink{cfg: cfg, subtask: subtask} }
}

// staged is one checkpoint's output of a subtask.
type staged struct {
	Checkpoint uint64    `json:"c"`
	Messages   []message `json:"m"`
	// Subtask is the sink subtask that staged the batch (absent in states
	// written before it was recorded: the restoring subtask's own). Its
	// messages' ids name it, so that a batch published again after a
	// restore under another parallelism keeps its ids.
	Subtask *int `json:"s,omitempty"`
}

// origin returns the subtask whose ids b's messages carry.
func (b *staged) origin(own int) int {
	if b.Subtask != nil {
		return *b.Subtask
	}
	return own
}

type message struct {
	Topic string `json:"t"`
	Body  []byte `json:"b"` // the Output JSON after its id
}

// sink stages records per checkpoint in its state and publishes a
// checkpoint's records once it completes.
type sink struct {
	graph.BaseOperator
	cfg     SinkConfig
	subtask int
	client  paho.Client

	current []message // since the last barrier

	mu        sync.Mutex
	pending   []*staged // snapshotted, oldest first, not yet all acknowledged by the broker
	committed uint64    // batches up to this checkpoint may be published

	wake chan struct{} // committed moved
	stop chan struct{}
	wg   sync.WaitGroup
}

func (s *sink) Open(*graph.Context) error {
	var err error
	s.client, err = s.cfg.Client.connect("-sink-"+strconv.Itoa(s.subtask), nil, nil)
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
	body, err := json.Marshal(Output{Key: r.Key, Time: r.Time, Value: r.Value, Payload: r.Payload})
	if err != nil {
		// Failing the job would fail it again on every replay of this
		// record: drop it, and say so.
		s.cfg.Metrics.Unencodable.Add(1)
		s.cfg.Client.Logger.Warn("sink dropped a record it cannot encode as JSON", "key", r.Key, "err", err)
		return nil
	}
	s.current = append(s.current, message{Topic: strings.ReplaceAll(s.cfg.Topic, "{key}", r.Key), Body: body[len(`{"id":""`):]})
	s.cfg.Metrics.Staged.Add(1)
	return nil
}

// SnapshotState stages the records since the last barrier under checkpoint
// id; the state holds every staged batch not yet acknowledged by the broker.
func (s *sink) SnapshotState(id uint64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.current) > 0 {
		s.pending = append(s.pending, &staged{Checkpoint: id, Messages: s.current, Subtask: &s.subtask})
		s.current = nil
	}
	if len(s.pending) == 0 {
		return nil, nil
	}
	return json.Marshal(s.pending)
}

// RestoreState takes back batches of the restored checkpoint, which is
// complete: they are published (again).
func (s *sink) RestoreState(data []byte) error { return s.RestoreStates([][]byte{data}) }

// RestoreStates implements graph.RescalableState: after a restore under
// another parallelism, a subtask publishes the batches of the old subtasks
// that fall to it, each with its own ids, in checkpoint order.
func (s *sink) RestoreStates(states [][]byte) error {
	var batches []*staged
	for _, data := range states {
		var some []*staged
		if err := json.Unmarshal(data, &some); err != nil {
			return fmt.Errorf("sink state: %w", err)
		}
		batches = append(batches, some...)
	}
	slices.SortStableFunc(batches, func(a, b *staged) int { return cmp.Compare(a.Checkpoint, b.Checkpoint) })
	s.mu.Lock()
	s.pending = batches
	s.mu.Unlock()
	var last uint64
	for _, b := range batches {
		last = max(last, b.Checkpoint)
	}
	return s.CheckpointComplete(last)
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

// next returns the oldest committed batch, or nil.
func (s *sink) next() *staged {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) > 0 && s.pending[0].Checkpoint <= s.committed {
		return s.pending[0]
	}
	return nil
}

// CheckpointAborted keeps the batch: a later checkpoint's completion
// covers it.
func (s *sink) CheckpointAborted(uint64) {}

// publish sends committed batches, oldest first, at QoS 1 and forgets a
// batch once the broker acknowledged all of it.
func (s *sink) publish() {
	defer s.wg.Done()
	for {
		b := s.next()
		if b == nil {
			select {
			case <-s.wake:
				continue
			case <-s.stop:
				return
			}
		}
		for i, m := range b.Messages {
			payload := fmt.Appendf(make([]byte, 0, len(m.Body)+32), `{"id":"%d-%d-%d"`, b.Checkpoint, b.origin(s.subtask), i)
			payload = append(payload, m.Body...)
			if !s.publishOne(m.Topic, payload) {
				return
			}
			s.cfg.Metrics.Published.Add(1)
		}
		s.mu.Lock()
		if len(s.pending) > 0 && s.pending[0] == b {
			s.pending = s.pending[1:]
		}
		s.mu.Unlock()
	}
}

// publishOne publishes until the broker acknowledges; false means the sink
// is closing.
func (s *sink) publishOne(topic string, payload []byte) bool {
	for {
		tok := s.client.Publish(topic, 1, s.cfg.Retain, payload)
		select {
		case <-tok.Done():
		case <-s.stop:
			return false
		}
		if tok.Error() == nil {
			return true
		}
		s.cfg.Client.Logger.Warn("MQTT publish failed; retrying", "topic", topic, "err", tok.Error())
		select {
		case <-time.After(500 * time.Millisecond):
		case <-s.stop:
			return false
		}
	}
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
	return nil
}
