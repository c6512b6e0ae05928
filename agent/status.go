package agent

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/mqttio"
	"github.com/cairn-edge/cairn/runtime"
)

// state is what the agent knows of itself across reloads, and says as
// its status (api.Status): the running incarnation, whether it restores
// or stops, why the last change of the pipeline file was not applied, and
// what the ingest logs, the disk and the alignments show.
type state struct {
	pipeline string
	host     string
	stopping atomic.Bool
	// restoring is set from when recovery reads the state of the next
	// incarnation until it is set: the status says "restoring" meanwhile,
	// as it does until that incarnation's job has restored.
	restoring atomic.Bool
	current   atomic.Pointer[incarnation]
	// remote is set when remote upload is on.
	remote *remoteSide
	// wear counts what the agent writes to its data directory.
	wear *wear
	// logs holds the ingest logs and the dead letters, in dataDir.
	logs    *ingest.Logs
	dataDir string
	// embedded are the embedded brokers, by name.
	embedded map[string]*broker.Server
	// stalls are the alignments that ended, of every incarnation.
	stalls *stalls

	mu          sync.Mutex
	configError string // why the last change of the file was not applied
	rebuilt     string // api.Status.Rebuilt
}

func (s *state) set(inc incarnation) {
	s.current.Store(&inc)
	s.restoring.Store(false)
}

// setRebuilt sets api.Status.Rebuilt to why.
func (s *state) setRebuilt(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebuilt = why
}

func (s *state) setConfigError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.configError = ""
	if err != nil {
		s.configError = err.Error()
	}
}

// status builds the API's Status from the job's, with its times on the
// wall clock as it reads now (api.Status.TimeUnixMS).
func (s *state) status() api.Status {
	now := readClocks()
	out := api.Status{Agent: s.host, Pipeline: s.pipeline, State: "starting", Memory: memoryNow()}
	if s.wear != nil {
		out.Disk = s.wear.status(now.mono)
	}
	s.mu.Lock()
	out.ConfigError, out.Rebuilt = s.configError, s.rebuilt
	s.mu.Unlock()
	if s.logs != nil {
		out.Ingest = ingestStatus(s.logs.Health(), s.dataDir, now)
		kept, _ := s.logs.DeadLetterCounts()
		out.DeadLetterCauses = make(map[string]int64)
		for _, cause := range ingest.Causes {
			out.DeadLetterCauses[cause] = kept[cause]
			out.DeadLetters += kept[cause]
		}
	}
	inc := s.current.Load()
	if inc == nil {
		if s.restoring.Load() {
			out.State = "restoring"
		}
		s.observe(&out, nil, runtime.Status{}, now)
		return out
	}
	st := inc.job.Status()
	out.Mode, out.State, out.UptimeSeconds = inc.mode, "running", st.Uptime.Seconds()
	out.Checkpoints = api.Checkpoints{Completed: st.Completed, Failed: st.Failed, InProgress: len(st.Pending)}
	switch {
	case s.stopping.Load():
		out.State = "stopping"
	case s.restoring.Load(), inc.restoring && st.RestoredFrom == nil:
		out.State = "restoring"
	}
	if m := st.LastCompleted; m != nil {
		info := CheckpointInfo(m)
		s.remote.uploadState(&info)
		out.Checkpoints.LastCompleted = &info
	}
	if m := st.RestoredFrom; m != nil {
		out.RestoredFrom = &api.Restored{ID: m.ID, Source: inc.restoredSource}
	}
	for _, p := range st.Pending {
		out.InFlight = append(out.InFlight, api.InFlight{ID: p.ID, ElapsedMS: (st.Uptime - p.Triggered).Milliseconds(), Acked: len(p.Acked), Total: len(st.Tasks)})
	}
	byOp := make(map[string]int)
	for _, t := range st.Tasks {
		i, ok := byOp[t.ID.Operator]
		if !ok {
			i = len(out.Operators)
			byOp[t.ID.Operator] = i
			out.Operators = append(out.Operators, api.Operator{ID: t.ID.Operator})
			if l := inc.late[t.ID.Operator]; l != nil {
				out.Operators[i].LateRecords = l.Load()
			}
			if u := inc.unmatched[t.ID.Operator]; u != nil {
				out.Operators[i].UnmatchedRecords = u.Load()
			}
			if m := inc.sources[t.ID.Operator]; m != nil {
				out.Operators[i].BadTimeRecords = m.BadTimes.Load()
			}
			if m := inc.sinks[t.ID.Operator]; m != nil {
				out.Operators[i].Sink = &api.SinkCounts{Staged: m.Staged.Load(), Published: m.Published.Load(), Unencodable: m.Unencodable.Load(),
					ReplayStableIDs: m.Unordered.Load() == 0, Renumbered: m.Renumbered.Load()}
			}
		}
		op := &out.Operators[i]
		op.Parallelism++
		sub := api.Subtask{Index: t.ID.Subtask, RecordsIn: t.RecordsIn, RecordsOut: t.RecordsOut, Rejected: t.Rejected, BackpressureMS: t.Backpressure.Milliseconds()}
		for _, q := range t.Queued {
			sub.Queued += q
		}
		if a := t.Alignment; a.ID != 0 {
			al := &api.Alignment{CheckpointID: a.ID, StartedMS: a.Started.Milliseconds(),
				ElapsedMS: (st.Uptime - a.Started).Milliseconds(), BufferedRecords: t.Buffered, Unaligned: a.Unaligned, Blocking: a.Blocking}
			for ch, at := range a.Arrived {
				al.Channels = append(al.Channels, api.Channel{
					From: t.Upstream[ch].String(), Arrived: at >= 0, AtMS: max(0, at.Milliseconds()),
					Ended: a.Ended[ch], Queued: t.Queued[ch],
				})
			}
			sub.Alignment = al
		}
		op.Subtasks = append(op.Subtasks, sub)
	}
	for _, o := range st.History {
		info := api.CheckpointInfo{ID: o.ID, Status: "failed", Cause: o.Reason.String()}
		if o.Cause != "" {
			info.Cause += ": " + o.Cause
		}
		if o.Manifest != nil {
			info = CheckpointInfo(o.Manifest)
			s.remote.uploadState(&info)
		}
		info.TriggeredUnixMS = now.unixMS(st.Started.Add(o.Triggered))
		info.DurationMS = o.Duration.Milliseconds()
		out.History = append(out.History, info)
	}
	for _, name := range slices.Sorted(maps.Keys(inc.brokers)) {
		b := brokerStatus(name, inc.brokers[name].Status(), now)
		if br := s.embedded[name]; br != nil {
			b.Refused = br.Refusals()
			b.OfflineDropped = br.OfflineDrops()
			b.EndedSessions = br.EndedSessions()
		}
		out.Brokers = append(out.Brokers, b)
	}
	out.OutputBacklogBytes, out.InputHeld = inc.backlog.Bytes()
	for _, m := range inc.sources {
		out.IngestLag += m.Lag.Load()
		out.IngestFailures += m.AppendFailures.Load()
	}
	s.observe(&out, inc, st, now)
	return out
}

// brokerStatus is what the clients of broker name know of it, b, as the
// control API says it at now.
func brokerStatus(name string, b mqttio.BrokerStatus, now clocks) api.Broker {
	return api.Broker{ID: name, Connected: b.Connected == b.Clients, Clients: b.Clients, ConnectedClients: b.Connected,
		SinceUnixMS: now.unixMS(b.Since), LastError: b.LastError, LastErrorUnixMS: now.unixMS(b.LastErrorAt)}
}

// ingestStatus is the ingest logs' health h as the control API says it
// at now, with the paths of the data directory's files relative to it:
// data_dir may take something from the environment, which the agent
// shows nowhere.
func ingestStatus(h ingest.Health, dataDir string, now clocks) api.Ingest {
	relative := func(s string) string {
		if dataDir == "" {
			return s
		}
		return strings.ReplaceAll(s, strings.TrimSuffix(dataDir, "/")+"/", "")
	}
	return api.Ingest{DamagedRecords: h.DamagedRecords, LostMessages: h.LostMessages, LastDamage: relative(h.LastDamage),
		NotAcknowledgingReason: relative(h.RefusingError), NotAcknowledgingSinceUnixMS: now.unixMS(h.RefusingSince)}
}

// CheckpointInfo summarises a completed checkpoint for the control API.
func CheckpointInfo(m *checkpoint.Manifest) api.CheckpointInfo {
	info := api.CheckpointInfo{ID: m.ID, Status: "completed", DurationMS: m.Duration.Milliseconds(), SameAs: m.SameAs, Mode: m.Mode.String()}
	for _, a := range m.Subtasks {
		info.SizeBytes += a.Stats.StateSize
		info.AlignmentMS = max(info.AlignmentMS, a.Stats.Alignment.Milliseconds())
		info.StartDelayMS = max(info.StartDelayMS, a.Stats.StartDelay.Milliseconds())
		info.SyncMS = max(info.SyncMS, a.Stats.Sync.Milliseconds())
		info.AsyncMS = max(info.AsyncMS, a.Stats.Async.Milliseconds())
		info.Incremental = info.Incremental || len(a.Base) > 0
		info.Unaligned = info.Unaligned || a.Stats.Unaligned
		info.TimedOut = info.TimedOut || a.Stats.TimedOut
		info.InFlightBytes += a.Stats.InFlightBytes
	}
	return info
}
