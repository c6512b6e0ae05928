package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/mqttio"
)

// The fleet status: with brokers.<name>.status_topic set, the agent
// publishes its api.GatewayStatus, retained, to the topic's /json
// sibling (mqttio.StatusJSONTopic) over a client of its own, every
// status_interval and at once on a change that matters; `cairn top
// --fleet` shows every gateway's on one screen (docs/fleet.md).

// statusPoll is how often the agent looks for a change that matters
// (gatewayChanged), and so the longest such a change waits.
const statusPoll = time.Second

// statusCloseTimeout bounds the wait for the broker to take the final
// status and offline of an agent that stops.
const statusCloseTimeout = 2 * time.Second

// fleetStatus publishes the agent's status to the brokers that have a
// status topic, each at its own status_interval.
type fleetStatus struct {
	state   *state
	version string
	log     *slog.Logger
	brokers []statusBroker
	cancel  context.CancelFunc
	done    chan struct{}
}

type statusBroker struct {
	name     string
	agent    string // the agent's name on this broker: its client id base
	interval time.Duration
	pub      *mqttio.StatusPublisher
}

// startFleetStatus starts publishing st, as cairn version says, to every
// broker of cfg with a status topic; nil when none has one.
func startFleetStatus(cfg *config.Config, d *deps, st *state, version string) (*fleetStatus, error) {
	f := &fleetStatus{state: st, version: version, log: d.log, done: make(chan struct{})}
	for _, name := range slices.Sorted(maps.Keys(cfg.Brokers)) {
		b := cfg.Brokers[name]
		if b.StatusTopic == "" {
			continue
		}
		cc, err := d.clientConfig(cfg, name, "status")
		if err != nil {
			f.close()
			return nil, err
		}
		pub, err := cc.StartStatus("")
		if err != nil {
			f.close()
			return nil, fmt.Errorf("broker %q: status: %w", name, err)
		}
		f.brokers = append(f.brokers, statusBroker{name: name, agent: cmp.Or(b.ClientID, d.clientID), interval: b.StatusInterval, pub: pub})
	}
	if len(f.brokers) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(ctx)
	return f, nil
}

// run publishes until ctx is done.
func (f *fleetStatus) run(ctx context.Context) {
	defer close(f.done)
	type sent struct {
		at  time.Time
		msg api.GatewayStatus
	}
	last := make([]sent, len(f.brokers))
	tick := time.NewTicker(statusPoll)
	defer tick.Stop()
	for {
		now := time.Now()
		st := f.state.status()
		for i, b := range f.brokers {
			msg := gatewayStatus(st, b, f.version, last[i].at, now)
			// Due a tick early rather than late: the ticks come a poll
			// apart, give or take the time a status takes.
			due := now.Sub(last[i].at) >= b.interval-statusPoll/2
			if last[i].at.IsZero() || due || gatewayChanged(last[i].msg, msg) {
				b.pub.Publish(encodeGateway(msg))
				last[i] = sent{now, msg}
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// close publishes the agent's last status, state "stopped", and offline,
// and disconnects.
func (f *fleetStatus) close() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	now := time.Now()
	st := f.state.status()
	for _, b := range f.brokers {
		msg := gatewayStatus(st, b, f.version, now, now)
		msg.State = "stopped"
		b.pub.Close(encodeGateway(msg), statusCloseTimeout)
	}
}

func encodeGateway(msg api.GatewayStatus) []byte {
	b, err := json.Marshal(msg)
	if err != nil {
		panic(err) // plain fields only: cannot fail
	}
	return b
}

// gatewayStatus is the fleet status of st, taken at now, for the broker
// b, to which the last status went at since (zero: none yet): named by
// b's agent, the agent's client id base there (agents whose client_id is
// ${GATEWAY} each have their own name), at b's interval. since and now are read from time.Now: only the
// time between them counts. Its ages are st's time less st's times, what
// the monotonic clock measured (api.Status.TimeUnixMS): a step of the
// wall clock changes none.
func gatewayStatus(st api.Status, b statusBroker, version string, since, now time.Time) api.GatewayStatus {
	g := api.GatewayStatus{V: api.GatewayVersion, Agent: b.agent, Version: version, Pipeline: filepath.Base(st.Pipeline),
		State: st.State, Time: st.TimeUnixMS, IntervalMS: b.interval.Milliseconds(), UptimeS: int64(st.UptimeSeconds), Mode: st.Mode,
		IngestLag: st.IngestLag, DeadLetters: st.DeadLetters, IngestLost: st.Ingest.LostMessages, OutputBacklog: st.OutputBacklogBytes,
		Memory:     api.GatewayMemory{Resident: st.Memory.Resident, HeapLive: st.Memory.HeapLive, Limit: st.Memory.Limit},
		DiskPerDay: st.Disk.PerDayBytes, ConfigRejected: st.ConfigError != ""}
	switch in := st.Ingest; {
	case in.NotAcknowledgingSinceUnixMS != 0: // the worse of the two
		g.InputHeld = &api.GatewayHeld{Reason: "disk", Since: in.NotAcknowledgingSinceUnixMS, Detail: in.NotAcknowledgingReason}
	case st.InputHeld:
		g.InputHeld = &api.GatewayHeld{Reason: "output backlog",
			Detail: fmt.Sprintf("the sinks hold %d bytes their brokers have not taken", st.OutputBacklogBytes)}
	}
	for _, op := range st.Operators {
		g.Rejected += op.Rejected()
		g.BadTime += op.BadTimeRecords
		g.WatermarkLagMS = max(g.WatermarkLagMS, op.WatermarkLagMS)
	}
	for _, b := range st.Brokers {
		gb := api.GatewayBroker{Name: b.ID, Up: b.Connected, Clients: b.Clients, Connected: b.ConnectedClients}
		if b.SinceUnixMS > 0 { // else no client has told of its connection yet
			gb.Since = b.SinceUnixMS
		}
		g.Brokers = append(g.Brokers, gb)
	}
	c := st.Checkpoints
	g.Checkpoints = api.GatewayCheckpoints{IntervalMS: c.IntervalMS, Completed: c.Completed, Failed: c.Failed, Late: c.Late}
	for _, h := range st.History {
		switch {
		case h.Status != "completed":
			g.Checkpoints.RecentFailed++
		case h.Late:
			g.Checkpoints.RecentLate++
		}
	}
	if l := c.LastCompleted; l != nil {
		last := &api.GatewayCheckpoint{ID: l.ID, DurationMS: l.DurationMS, AlignmentMS: l.AlignmentMS, Size: l.SizeBytes,
			Kind: checkpointKind(*l), Late: l.Late}
		for _, h := range st.History { // the last completed's trigger time, if this run has it
			if h.ID == l.ID && h.TriggeredUnixMS != 0 {
				last.AgeMS = max(st.TimeUnixMS-h.TriggeredUnixMS-h.DurationMS, 0)
				last.Late = h.Late
			}
		}
		g.Checkpoints.Last = last
	}
	for i := len(st.History) - 1; i >= 0; i-- {
		if h := st.History[i]; h.Status != "completed" {
			g.Checkpoints.LastFailed = &api.GatewayFailure{ID: h.ID, AgeMS: max(st.TimeUnixMS-h.TriggeredUnixMS, 0), Cause: h.Cause}
			break
		}
	}
	if len(st.InFlight) > 0 {
		g.Checkpoints.InFlightMS = st.InFlight[0].ElapsedMS
	}
	g.Stall = worstStall(st, now.Sub(since))
	return g
}

// checkpointKind names what a completed checkpoint stored.
func checkpointKind(c api.CheckpointInfo) string {
	switch {
	case c.SameAs != 0:
		return "unchanged"
	case c.Unaligned:
		return "unaligned"
	case c.Incremental:
		return "incremental"
	}
	return "full"
}

// worstStall is the longest alignment of at least GatewayStallFloorMS in
// st: one in progress, or one that ended within the span before st's
// time.
func worstStall(st api.Status, span time.Duration) *api.GatewayStall {
	var worst *api.GatewayStall
	if a := st.Aligning(); len(a) > 0 {
		w := a[0]
		worst = &api.GatewayStall{Subtask: w.Subtask, DurationMS: w.Alignment.ElapsedMS, Backlog: w.Backlog, Checkpoint: w.Alignment.CheckpointID}
		if w.Laggard != nil {
			worst.WaitsFor = w.Laggard.From
		}
	}
	for _, s := range st.Stalls {
		ago := st.TimeUnixMS - s.EndedUnixMS()
		if ago > span.Milliseconds() || worst != nil && s.DurationMS <= worst.DurationMS {
			continue
		}
		worst = &api.GatewayStall{Subtask: s.Subtask, WaitsFor: s.WaitedFor, DurationMS: s.DurationMS, Backlog: s.Backlog,
			Checkpoint: s.CheckpointID, Ended: true, EndedAgoMS: max(ago, 0)}
	}
	if worst == nil || worst.DurationMS < api.GatewayStallFloorMS {
		return nil
	}
	return worst
}

// gatewayChanged reports whether next differs from prev in what is
// published at once: the state, a checkpoint failed or late, a broker
// lost or back, dead letters or rejections appearing, the input held or
// released, a change of the pipeline file refused.
func gatewayChanged(prev, next api.GatewayStatus) bool {
	brokers := func(g api.GatewayStatus) string {
		var b strings.Builder
		for _, br := range g.Brokers {
			fmt.Fprintf(&b, "%s=%v ", br.Name, br.Up)
		}
		return b.String()
	}
	return prev.State != next.State ||
		prev.Checkpoints.Failed != next.Checkpoints.Failed || prev.Checkpoints.Late != next.Checkpoints.Late ||
		brokers(prev) != brokers(next) ||
		(prev.DeadLetters == 0) != (next.DeadLetters == 0) || (prev.Rejected == 0) != (next.Rejected == 0) || (prev.BadTime == 0) != (next.BadTime == 0) || prev.IngestLost != next.IngestLost ||
		(prev.InputHeld == nil) != (next.InputHeld == nil) ||
		prev.ConfigRejected != next.ConfigRejected
}
