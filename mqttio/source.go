package mqttio

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
)

// SourceConfig configures an MQTT source.
type SourceConfig struct {
	// Name identifies the source; its subtasks' logs are Name/0, Name/1...
	Name   string
	Client ClientConfig
	// Topics are subscription filters. With a parallelism above 1 every
	// subtask subscribes to them all, on a session of its own, and logs
	// only the messages whose topic falls to it (the subtask a hash edge
	// keyed by the topic would send it to); it acknowledges the others
	// unlogged, in order, and leaves them to the subtask they fall to,
	// which has them on its own session; no filter may then be a shared
	// subscription, which would hand each message to one of them. So each
	// message is logged once, a topic's messages are in one log in the
	// order the broker sent them, and the broker keeps every subtask's
	// subscription as it keeps any (mosquitto 2.0 drops shared
	// subscriptions when it restarts: docs/DESIGN.md, section 1).
	Topics   []string
	Decoding Decoding
	// DeadLetterTopic, if set, also receives every dead letter as JSON
	// (QoS 1, at least once: a replay may send one again).
	DeadLetterTopic string
	// AtMostOnce subscribes with QoS 0 and keeps no log: fast, and a crash
	// loses what was received but not yet reflected in a checkpoint.
	AtMostOnce bool
	// Logs holds the durable ingest logs; required unless AtMostOnce.
	Logs *ingest.Logs
	// Ingress, if set, is the agent's own broker, which Client connects
	// to: a durable source takes the publishes of its Topics from it in
	// this process, before the broker acknowledges them to their
	// publishers, and subscribes to nothing (Client still publishes the
	// dead letters).
	Ingress Ingress
	// AcceptStateLoss lets a source start afresh on a log whose front a
	// checkpoint that is gone once covered (its first offset is above 1),
	// and restore a checkpoint whose offset is below the log's first: the
	// state of the messages between is lost. Without it, both refuse.
	AcceptStateLoss bool
	// SyncInterval and MaxInflight bound a group commit, one fsync that
	// makes every message waiting durable and acknowledges them. A message
	// is acknowledged to the broker only once it is durable (I8); waiting
	// costs latency, never data, since the broker keeps what is not
	// acknowledged. A group is committed once its first message waited
	// SyncInterval (default DefaultSyncInterval); at once when the broker's
	// in-flight window is full (mosquitto's max_inflight_messages), for the
	// broker sends no more until then; once the broker stops sending while
	// messages are owed; or once maxPendingBytes of payload wait. The
	// window is learned from what arrives (window.go), so a broker that
	// allows 20, 100 or 1,000 messages in flight gets one sync per window
	// or per interval. MaxInflight, if above 0, is a window known in
	// advance: a group is due once that many messages are owed, whatever
	// was learned, and a narrower window is still learned. Messages that
	// arrived while the previous commit was being written join the group:
	// a slow disk makes groups larger rather than ingest slower.
	SyncInterval time.Duration
	MaxInflight  int
	// MaxLag is how many logged messages may wait to be processed before
	// the source stops acknowledging, so that the broker holds back;
	// default 100000.
	MaxLag uint64
	// Metrics, if set, receives the source's counters.
	Metrics *SourceMetrics
	// RetainCheckpoints is how many completed checkpoints' worth of input
	// the log keeps, so that a restore can fall back to an older checkpoint;
	// keep it equal to the checkpoint store's retention (default 3).
	RetainCheckpoints int
}

// SourceMetrics are a source's counters, safe for concurrent use.
type SourceMetrics struct {
	Received    atomic.Int64 // messages from the broker
	Logged      atomic.Int64 // appended to the ingest log
	Redelivered atomic.Int64 // redeliveries already logged, acknowledged again
	// Skipped counts, for a source of parallelism above 1, the messages
	// whose topic falls to another subtask: received, acknowledged and not
	// logged here.
	Skipped     atomic.Int64
	DeadLetters atomic.Int64 // messages that could not be decoded
	// BadTimes counts those of DeadLetters whose event time was refused
	// (Decoding.TimeBounds): a device whose clock is wrong.
	BadTimes atomic.Int64
	Lag      atomic.Int64 // logged but not yet read, summed over subtasks' last reads
	// AppendFailures counts group commits the ingest log refused (a full
	// or failing disk); their messages were not acknowledged and are
	// retried.
	AppendFailures atomic.Int64
}

// DefaultSyncInterval is the default of SourceConfig.SyncInterval, chosen
// by measuring the bytes a gateway's load writes (docs/durability.md).
const DefaultSyncInterval = time.Second

// maxPendingBytes is the payload that makes a commit due, however few the
// messages: large messages do not wait in memory for the interval.
const maxPendingBytes = 1 << 20

func (c *SourceConfig) setDefaults() {
	c.MaxInflight = max(c.MaxInflight, 0)
	if c.SyncInterval <= 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.MaxLag == 0 {
		c.MaxLag = 100_000
	}
	if c.RetainCheckpoints <= 0 {
		c.RetainCheckpoints = 3
	}
	if c.Metrics == nil {
		c.Metrics = new(SourceMetrics)
	}
	if c.Client.Logger == nil {
		c.Client.Logger = slog.Default()
	}
}

// NewSource returns the constructor of a source node's subtasks.
func NewSource(cfg SourceConfig) func(subtask int) graph.Source {
	cfg.setDefaults()
	return func(subtask int) graph.Source { return &source{cfg: cfg, subtask: subtask} }
}

// source is one subtask: an ingester goroutine appends what the broker
// sends to the log and acknowledges it; Read reads the log.
type source struct {
	cfg      SourceConfig
	subtask  int
	parallel int
	log      *ingest.Log
	client   paho.Client
	gate     *resumeGate // dead letters are published only while open
	offset   uint64      // next offset to read

	intake   *intake
	consumed chan struct{} // Read made room under MaxLag
	stop     chan struct{}
	wg       sync.WaitGroup
	readAt   atomic.Uint64 // offset the reader has reached, for MaxLag
	lastLag  atomic.Int64  // this subtask's part of Metrics.Lag
	commits  []uint64      // offsets of the newest completed checkpoints, oldest first

	fast chan ingest.Message // AtMostOnce: messages straight to Read
	wake chan struct{}       // AtMostOnce: a message arrived

	detach func() // Ingress: stop taking its publishes

	// Readings whose event time was refused since the last report
	// (sayBadTimes), with the newest's reason and topic, and when the
	// last report was.
	badTimes                    int
	badTimeReason, badTimeTopic string
	badTimesSaid                time.Time
}

func (s *source) name() string { return s.cfg.Name + "/" + strconv.Itoa(s.subtask) }

func (s *source) Open(ctx *graph.Context, offset uint64) error {
	s.parallel = ctx.Info().Parallelism
	for _, t := range s.cfg.Topics {
		if s.parallel > 1 && IsShared(t) {
			return fmt.Errorf("source %s: topic %q is a shared subscription, which a source of parallelism %d cannot take: its subtasks share the topics out among themselves", s.cfg.Name, t, s.parallel)
		}
	}
	s.stop = make(chan struct{})
	if s.cfg.AtMostOnce {
		s.fast = make(chan ingest.Message, fastQueue)
		s.wake = make(chan struct{}, 1)
		return s.connect(0)
	}
	if s.cfg.Logs == nil {
		return errors.New("a durable MQTT source needs an ingest log")
	}
	var err error
	if s.log, err = s.cfg.Logs.Log(s.name()); err != nil {
		return err
	}
	if err := s.checkOffset(offset, ctx.Info().RestoredElsewhere); err != nil {
		return err
	}
	// A fresh start still owes the messages already acknowledged to the
	// broker: everything in the log.
	offset = max(offset, s.log.First())
	if err := s.log.SkipTo(offset); err != nil {
		return err
	}
	s.offset = offset
	s.readAt.Store(offset)
	logged, err := s.log.Logged(ingest.RedeliveryWindow)
	if err != nil {
		return err
	}
	s.intake = newIntake(s.cfg.SyncInterval, s.cfg.MaxInflight, s.cfg.Decoding.maxPayload()+1, logged)
	s.consumed = make(chan struct{}, 1)
	s.wg.Add(1)
	go s.ingest()
	if s.cfg.Ingress != nil {
		s.attach()
		return s.connect(-1)
	}
	return s.connect(1)
}

// checkOffset refuses to start reading the log at a checkpoint's offset
// (0: none) that would lose state or messages, unless AcceptStateLoss: the
// log's front was truncated past it (a fresh start: by a checkpoint that is
// gone), or the log is empty below it though the checkpoint is this
// agent's own (elsewhere: restored from another store), so that the
// messages acknowledged after the checkpoint went with the log.
func (s *source) checkOffset(offset uint64, elsewhere bool) error {
	first := s.log.First()
	var err error
	switch {
	case offset == 0 && first > 1:
		err = fmt.Errorf("ingest log %s starts at offset %d, but no checkpoint restores %s: the checkpoint that covered the messages below it is gone, and their state with it", s.name(), first, s.cfg.Name)
	case offset != 0 && offset < first:
		err = fmt.Errorf("checkpoint offset %d of %s is below its ingest log's first offset %d: the log was truncated or replaced, and the messages between are gone", offset, s.name(), first)
	case offset > first && s.log.Next() == first && !elsewhere:
		err = fmt.Errorf("ingest log %s is empty, but the checkpoint restored had read it to offset %d: the log was deleted or set aside as damaged (the log's WARN says which), and with it every message acknowledged after that checkpoint", s.name(), offset)
		first = offset
	default:
		return nil
	}
	if !s.cfg.AcceptStateLoss {
		return fmt.Errorf("%w (cairn run --accept-state-loss starts at offset %d anyway)", err, first)
	}
	s.cfg.Client.Logger.Warn("accepting lost state", "err", err, "offset", first)
	return nil
}

// connect connects the source's client and subscribes on every
// (re)connection, at qos: every subtask to every filter
// (SourceConfig.Topics). It also drops the shared subscriptions
// ($share/<client id>/<filter>) through which an earlier cairn spread a
// parallel source's input, after subscribing, so that no message falls
// between the two; a session that holds none acknowledges the
// unsubscription all the same. A qos below 0 subscribes to nothing: the
// client publishes only (SourceConfig.Ingress).
func (s *source) connect(qos int) error {
	suffix := "-" + strconv.Itoa(s.subtask)
	filters := make(map[string]byte)
	var shared []string
	for _, t := range s.cfg.Topics {
		if qos < 0 {
			break
		}
		filters[t] = byte(qos)
		shared = append(shared, "$share/"+s.cfg.Client.ClientID+"/"+t)
	}
	var err error
	client := s.cfg.Client
	client.MaxPayload = s.cfg.Decoding.maxPayload() // more is a dead letter: it need not arrive whole
	s.client, s.gate, err = client.connect(suffix, func(c paho.Client) {
		if s.intake != nil {
			s.intake.connected() // perhaps to another broker: its window is learned anew
		}
		if len(filters) == 0 {
			return
		}
		sub := c.SubscribeMultiple(filters, nil) // messages go to onMessage
		unsub := c.Unsubscribe(shared...)
		go func() {
			if sub.Wait(); sub.Error() != nil {
				s.cfg.Client.Logger.Error("MQTT subscribe failed", "source", s.name(), "err", sub.Error())
			}
			if unsub.Wait(); unsub.Error() != nil {
				s.cfg.Client.Logger.Warn("MQTT unsubscribe from an earlier cairn's shared subscription failed", "source", s.name(), "err", unsub.Error())
			}
		}()
	}, s.onMessage, nil)
	return err
}

// IsShared reports whether filter is a shared subscription
// ($share/<group>/<filter>), which the broker spreads over the sessions of
// its group.
func IsShared(filter string) bool { return strings.HasPrefix(filter, "$share/") }

// topicSubtask is the subtask of a source of parallelism n that logs the
// messages of topic: the subtask a hash edge of n channels sends the key
// topic to. It rests on graph.KeyGroup, which never changes (snapshots
// depend on it too), so every version of cairn puts a topic in the same
// log.
func topicSubtask(topic string, n int) int {
	return graph.SubtaskForKeyGroup(graph.KeyGroup(topic, graph.DefaultMaxParallelism), n, graph.DefaultMaxParallelism)
}

// onMessage runs on paho's goroutine; blocking here is backpressure.
func (s *source) onMessage(_ paho.Client, m paho.Message) {
	s.cfg.Metrics.Received.Add(1)
	other := s.parallel > 1 && topicSubtask(m.Topic(), s.parallel) != s.subtask
	if other {
		s.cfg.Metrics.Skipped.Add(1)
	}
	if s.fast != nil {
		m.Ack() // QoS 0 needs none; harmless
		if other {
			return
		}
		// A payload over the limit is a dead letter, kept in part (intake).
		payload := m.Payload()
		payload = payload[:min(len(payload), s.cfg.Decoding.maxPayload()+1)]
		select {
		case s.fast <- ingest.Message{Topic: m.Topic(), Payload: payload, Received: time.Now()}:
		case <-s.stop:
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
		return
	}
	// Another subtask's message is acknowledged in its turn, with the
	// group that holds it, for PUBACKs go out in receipt order.
	if _, redelivered := s.intake.add(m, "", s.stop, other); redelivered {
		s.cfg.Metrics.Redelivered.Add(1) // its PUBACK was lost: acknowledged again, in order
	}
}

// retryBase is the wait before the first retry of a failed append; it
// doubles with every failure, up to a second.
const retryBase = 50 * time.Millisecond

// maxGroups bounds, in groups of SourceConfig.MaxInflight when it is set,
// what may be owed while a commit is written.
const maxGroups = 8

// fastQueue is how many messages an at-most-once source holds for Read
// before paho's goroutine waits.
const fastQueue = 256

// ingest appends the messages of the intake to the log in group commits
// and acknowledges them in receipt order once the group is durable
// (invariant I8). A group is committed when the intake says it is due:
// the broker's window is full, the broker stopped sending, or its first
// message waited SyncInterval (intake.due). It holds back by not
// acknowledging, so the broker's in-flight window bounds what waits. One
// timer wakes it, for the interval or a pause, whichever comes first.
func (s *source) ingest() {
	defer s.wg.Done()
	var msgs []ingest.Message
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var armed time.Time // when the timer fires; zero: it is stopped
	backoff := retryBase
	failures := 0       // consecutive failed appends: retry only when the timer says
	var retry time.Time // when, after a failure
	learned := 0        // the broker's window, as last logged
	lagging := func() bool {
		next, read := s.log.Next(), s.readAt.Load()
		return next > read && next-read > s.cfg.MaxLag
	}
	// flush commits what is pending; what arrived while the commit before
	// was written joins it, so that on a slow disk groups grow and the
	// rate holds.
	flush := func(now time.Time) {
		group := s.intake.take()
		msgs = msgs[:0]
		for _, in := range group {
			if !in.logged {
				msgs = append(msgs, ingest.Message{Topic: in.m.Topic(), Payload: in.payload, Received: now, PacketID: in.m.MessageID(), Publisher: in.publisher})
			}
		}
		if len(msgs) > 0 {
			if _, err := s.log.Append(msgs); err != nil {
				// Nothing is acknowledged; the broker holds back and
				// redelivers after a crash. Retry with backoff.
				s.intake.putBack(group)
				s.cfg.Metrics.AppendFailures.Add(1)
				failures++
				backoff = min(2*backoff, time.Second)
				s.cfg.Client.Logger.Error("ingest log append failed; not acknowledging, retrying", "source", s.name(),
					"messages", len(msgs), "failures", failures, "retry_in", backoff, "err", err)
				retry = time.Now().Add(backoff)
				clear(msgs)
				return
			}
		}
		if failures > 0 {
			s.cfg.Client.Logger.Info("ingest log append succeeded again", "source", s.name(), "failures", failures, "messages", len(msgs))
			failures = 0
		}
		backoff = retryBase
		s.intake.committed(group)
		for _, in := range group {
			in.m.Ack()
		}
		s.intake.release(group)
		s.cfg.Metrics.Logged.Add(int64(len(msgs)))
		s.updateLag() // the reader may not read for a while: held, or backpressured
		clear(msgs)   // the slice is reused: let go of the payloads
	}
	for {
		now := time.Now()
		why, next := s.intake.due(now)
		if w := s.intake.learned(); w != learned {
			learned = w
			s.cfg.Client.Logger.Debug("the broker's in-flight window, as learned", "source", s.name(), "window", w, "limit", s.cfg.MaxInflight)
		}
		if failures > 0 && why != notDue {
			// While appends fail, retry only when the backoff says.
			if now.Before(retry) {
				why, next = notDue, retry
			}
		}
		// A commit held back by MaxLag waits for the reader's progress
		// (consumed), not for a timer.
		if why != notDue && lagging() {
			why, next = notDue, time.Time{}
		}
		if why != notDue {
			flush(now)
			continue
		}
		if !next.Equal(armed) {
			if armed = next; next.IsZero() {
				timer.Stop()
			} else {
				timer.Reset(max(next.Sub(now), 0))
			}
		}
		select {
		case <-s.intake.kick:
		case <-timer.C:
			armed = time.Time{}
		case <-s.consumed:
			// Only a commit held back by MaxLag goes now: flushing
			// whenever the reader reads would cut groups short, and
			// every commit costs an fsync.
		case <-s.stop:
			return // unacknowledged messages are redelivered by the broker
		}
	}
}

func (s *source) Read(buf []graph.Record) (int, error) {
	if s.fast != nil {
		return s.readFast(buf)
	}
	n := 0
	var dead []ingest.DeadLetter
	next, err := s.log.Read(s.offset, len(buf), func(off uint64, m ingest.Message) error {
		if m.Lost != nil {
			if m.Lost.Count == 0 {
				return nil // bytes that held no message
			}
			dl := ingest.DeadLetter{Cause: ingest.CauseDamaged, Source: s.name(), Offset: off, Reason: fmt.Sprintf("ingest log damaged: %d messages lost, offsets %d to %d: %s",
				m.Lost.Count, off, off+uint64(m.Lost.Count)-1, m.Lost.Reason)}
			dl.Payload, dl.Size = ingest.DeadLetterPayload(m.Payload)
			dead = append(dead, dl)
			return nil
		}
		if err := s.cfg.Decoding.decode(m, &buf[n]); err != nil {
			dl := ingest.DeadLetter{Cause: s.causeOf(err), Source: s.name(), Offset: off, Topic: m.Topic, Reason: err.Error()}
			dl.Payload, dl.Size = ingest.DeadLetterPayload(m.Payload)
			dead = append(dead, dl)
			return nil
		}
		buf[n].Origin = s.log.Origin(off)
		n++
		return nil
	})
	if err == nil && len(dead) > 0 {
		// Stored together, one sync for the batch's dead letters,
		// before the source reads on.
		s.cfg.Metrics.DeadLetters.Add(int64(len(dead)))
		s.sayBadTimes(dead)
		var stored []ingest.StoredDeadLetter
		stored, err = s.cfg.Logs.StoreDeadLetters(dead)
		s.publishDeadLetters(stored)
	}
	s.offset = next
	s.readAt.Store(next)
	s.updateLag()
	select {
	case s.consumed <- struct{}{}:
	default:
	}
	return n, err
}

// causeOf is the dead-letter cause of decoding error err.
func (s *source) causeOf(err error) string {
	var de *DecodeError
	if errors.As(err, &de) && de.BadTime {
		s.cfg.Metrics.BadTimes.Add(1)
		return ingest.CauseBadTime
	}
	return ingest.CauseUndecodable
}

// badTimeReport is how often a source logs the readings whose event time
// it refused: a device with a wrong clock sends one every reading.
const badTimeReport = time.Minute

// sayBadTimes logs, at most once per badTimeReport, how many of the dead
// letters since the last report had their event time refused, with the
// newest one's reason. The dead letters themselves are all stored.
func (s *source) sayBadTimes(dead []ingest.DeadLetter) {
	for i := range dead {
		if dead[i].Cause != ingest.CauseBadTime {
			continue
		}
		s.badTimes++
		s.badTimeReason, s.badTimeTopic = dead[i].Reason, dead[i].Topic
	}
	if s.badTimes == 0 || (!s.badTimesSaid.IsZero() && time.Since(s.badTimesSaid) < badTimeReport) {
		return
	}
	s.cfg.Client.Logger.Warn("readings with an impossible event time set aside as dead letters", "source", s.name(), "count", s.badTimes,
		"newest_topic", s.badTimeTopic, "newest_reason", s.badTimeReason)
	s.badTimes, s.badTimesSaid = 0, time.Now()
}

// publishDeadLetters sends dead letters to DeadLetterTopic without waiting:
// they are stored already, or logged one by one by an at-most-once
// source, which keeps no log. While the client is not connected, or paho
// has not yet listed what it resends on this connection, it sends none
// (paho would race with itself over them, see resumeGate) and says so.
func (s *source) publishDeadLetters(dead []ingest.StoredDeadLetter) {
	if s.cfg.DeadLetterTopic == "" {
		return
	}
	if !s.gate.ready(s.client) {
		kept := "stored in the ingest log file"
		if s.fast != nil {
			kept = "logged above; an at-most-once source keeps no dead letters"
		}
		s.cfg.Client.Logger.Warn("dead letters not published to their topic while the broker connection is down",
			"source", s.name(), "count", len(dead), "topic", s.cfg.DeadLetterTopic, "kept", kept)
		return
	}
	for _, dl := range dead {
		if payload, err := json.Marshal(dl.Shown()); err == nil {
			s.client.Publish(s.cfg.DeadLetterTopic, 1, false, payload)
		}
	}
}

func (s *source) readFast(buf []graph.Record) (int, error) {
	n := 0
	for n < len(buf) {
		select {
		case m := <-s.fast:
			if err := s.cfg.Decoding.decode(m, &buf[n]); err != nil {
				s.cfg.Metrics.DeadLetters.Add(1)
				s.cfg.Client.Logger.Warn("dead letter", "source", s.name(), "topic", m.Topic, "reason", err.Error())
				dl := ingest.StoredDeadLetter{DeadLetter: ingest.DeadLetter{Cause: s.causeOf(err), Source: s.name(), Topic: m.Topic, Reason: err.Error(), Time: time.Now().UTC()}}
				dl.Payload, dl.Size = ingest.DeadLetterPayload(m.Payload)
				s.publishDeadLetters([]ingest.StoredDeadLetter{dl})
				continue
			}
			n++
			s.offset++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (s *source) Offset() uint64 { return s.offset }

func (s *source) Ready() <-chan struct{} {
	if s.fast != nil {
		return s.wake
	}
	return s.log.Grew()
}

// CommitOffset truncates the log below the offset of the oldest of the
// RetainCheckpoints newest completed checkpoints: a restore that falls back
// to an older retained checkpoint still finds its input. Checkpoints at the
// same offset count once: one that changed nothing has no record of its
// own in the store, so retains nothing there (Manifest.SameAs), and
// counting it would truncate below a checkpoint the store still keeps.
func (s *source) CommitOffset(offset uint64) error {
	if s.log == nil {
		return nil
	}
	if n := len(s.commits); n > 0 && s.commits[n-1] == offset {
		return nil
	}
	s.commits = append(s.commits, offset)
	if len(s.commits) > s.cfg.RetainCheckpoints {
		s.commits = s.commits[len(s.commits)-s.cfg.RetainCheckpoints:]
	}
	return s.log.Truncate(s.commits[0])
}

func (s *source) Close() error {
	if s.detach != nil {
		s.detach()
	}
	if s.stop != nil {
		close(s.stop)
	}
	if s.client != nil {
		s.client.Disconnect(250)
	}
	s.wg.Wait()
	s.cfg.Metrics.Lag.Add(-s.lastLag.Swap(0))
	return nil
}

// updateLag sets this subtask's part of Metrics.Lag to the messages logged
// and not yet read. Both the reader and the ingest goroutine call it.
func (s *source) updateLag() {
	lag := int64(s.log.Next()) - int64(s.readAt.Load())
	s.cfg.Metrics.Lag.Add(lag - s.lastLag.Swap(lag))
}
