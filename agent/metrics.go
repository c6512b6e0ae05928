package agent

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/ingest"
)

// docs/operations.md's Metrics section lists every metric written here, with its
// type, meaning and buckets: a change here changes that list.

// exporter writes the agent's metrics from its state and from what it
// observes of the checkpoints and alignments of every incarnation.
type exporter struct {
	state *state
	// build says which cairn this is, and checkpoints (required: every
	// incarnation reports to it) what their checkpoints did.
	build       BuildInfo
	checkpoints *checkpointMetrics
}

// handler serves GET /metrics.
func (c *exporter) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		c.write(w)
	})
	return mux
}

// write writes the agent's metrics in the Prometheus text format
// (version 0.0.4): every family's HELP and TYPE once, then its series.
// Counters count since the agent started, across reloads.
func (c *exporter) write(w io.Writer) {
	e := exposition{w}
	st := c.state.status()
	counted := c.counts()
	ckpt := c.checkpoints.snapshot()
	counter := func(name, help string) {
		e.family(name, "counter", help)
		series := counted[name]
		for _, l := range slices.Sorted(maps.Keys(series)) {
			e.sample(name, l, series[l])
		}
	}
	gauge := func(name, help string, v float64) {
		e.family(name, "gauge", help)
		e.sample(name, "", v)
	}
	e.family("cairn_build_info", "gauge", "Always 1: the labels say which cairn this is.")
	e.sample("cairn_build_info", labels("version", c.build.Version, "commit", c.build.Commit, "goversion", goVersion()), 1)

	e.family("cairn_checkpoints_completed_total", "counter", "Checkpoints completed since the agent started.")
	e.sample("cairn_checkpoints_completed_total", "", float64(ckpt.duration.count))
	e.family("cairn_checkpoints_failed_total", "counter", "Checkpoints that failed (declined, expired, not written) since the agent started.")
	e.sample("cairn_checkpoints_failed_total", "", float64(ckpt.failed))
	e.family("cairn_checkpoints_late_total", "counter", "Checkpoints that completed taking more than half the checkpoint interval, since the agent started.")
	e.sample("cairn_checkpoints_late_total", "", float64(ckpt.late))
	gauge("cairn_checkpoints_in_progress", "Checkpoints in flight.", float64(st.Checkpoints.InProgress))
	e.family("cairn_checkpoint_duration_seconds", "histogram", "Completed checkpoints by their duration, trigger to completion.")
	ckpt.duration.write(e, "cairn_checkpoint_duration_seconds", "")
	e.family("cairn_checkpoint_alignment_seconds", "histogram", "Completed checkpoints by their longest barrier alignment.")
	ckpt.alignment.write(e, "cairn_checkpoint_alignment_seconds", "")
	e.family("cairn_checkpoint_size_bytes", "histogram", "Completed checkpoints by the bytes they stored.")
	ckpt.size.write(e, "cairn_checkpoint_size_bytes", "")
	c.writeStallMetrics(e, st)
	if l := st.Checkpoints.LastCompleted; l != nil {
		gauge("cairn_checkpoint_last_duration_seconds", "Duration of the last completed checkpoint, trigger to completion.", float64(l.DurationMS)/1000)
		gauge("cairn_checkpoint_last_size_bytes", "Bytes stored by the last completed checkpoint.", float64(l.SizeBytes))
		gauge("cairn_checkpoint_last_alignment_seconds", "Longest barrier alignment of the last completed checkpoint.", float64(l.AlignmentMS)/1000)
		gauge("cairn_checkpoint_last_id", "Id of the last completed checkpoint.", float64(l.ID))
	}
	counter("cairn_records_in_total", "Records a subtask received.")
	counter("cairn_records_rejected_total", "Records a subtask's operator rejected (dead-lettered or dropped, as its on_error says).")
	counter("cairn_records_out_total", "Records a subtask emitted.")
	counter("cairn_backpressure_seconds_total", "Time a subtask waited for room downstream.")
	counter("cairn_late_records_total", "Records a window dropped for arriving after its allowed lateness, or an interval join after nothing could join them.")
	counter("cairn_unmatched_records_total", "Records a lookup join dropped for having no table record of their key yet.")
	counter("cairn_source_bad_time_records_total", "Readings whose event time a source refused (max_future, max_past, min_time): dead letters of cause bad_time.")
	var kept, added map[string]int64
	if c.state.logs != nil {
		kept, added = c.state.logs.DeadLetterCounts()
	}
	e.family("cairn_dead_letters_total", "counter", "Dead letters stored since the agent started, by cause: undecodable, bad_time, damaged, rejected, unpublishable.")
	for _, cause := range ingest.Causes {
		e.sample("cairn_dead_letters_total", labels("cause", cause), float64(added[cause]))
	}
	e.family("cairn_dead_letters", "gauge", "Dead letters the data directory keeps, which cairn deadletters lists, by cause.")
	for _, cause := range ingest.Causes {
		e.sample("cairn_dead_letters", labels("cause", cause), float64(kept[cause]))
	}
	counter("cairn_sink_records_staged_total", "Records a sink staged for a checkpoint.")
	counter("cairn_sink_messages_published_total", "Messages a sink published that its broker acknowledged.")
	counter("cairn_sink_records_unencodable_total", "Records a sink dropped as not encodable as JSON (NaN, ±Inf).")
	counter("cairn_sink_renumbered_total", "Restores after which a sink subtask began new output ids: what it publishes again has other ids than the first time.")
	e.family("cairn_sink_ids_replay_stable", "gauge", "1 while a sink's input is ordered, so that outputs published again after a restore keep their ids, else 0.")
	for _, o := range st.Operators {
		if o.Sink != nil {
			e.sample("cairn_sink_ids_replay_stable", labels("sink", o.ID), bit(o.Sink.ReplayStableIDs))
		}
	}
	e.family("cairn_mqtt_connected", "gauge", "1 while every client of the broker is connected, else 0.")
	for _, b := range st.Brokers {
		e.sample("cairn_mqtt_connected", labels("broker", b.ID), bit(b.Connected))
	}
	e.family("cairn_broker_offline_dropped_total", "counter", "Messages an embedded broker dropped from a session while its client was gone (its oldest, for newer ones, over the limits), by client id, for the sessions it holds.")
	for _, b := range st.Brokers {
		for _, id := range slices.Sorted(maps.Keys(b.OfflineDropped)) {
			e.sample("cairn_broker_offline_dropped_total", labels("broker", b.ID, "client", id), float64(b.OfflineDropped[id]))
		}
	}
	e.family("cairn_broker_offline_sessions_ended_total", "counter", "Sessions whose client was gone that an embedded broker ended, by why: after offline_session_expiry, or for a new session over max_clients or max_sessions_per_address.")
	for _, b := range st.Brokers {
		for _, why := range slices.Sorted(maps.Keys(b.EndedSessions)) {
			e.sample("cairn_broker_offline_sessions_ended_total", labels("broker", b.ID, "reason", why), float64(b.EndedSessions[why]))
		}
	}
	gauge("cairn_ingest_lag_messages", "Logged MQTT messages waiting to be processed.", float64(st.IngestLag))
	counter("cairn_ingest_append_failures_total", "Ingest log group commits that failed (full or failing disk); their messages were not acknowledged.")
	e.family("cairn_ingest_damaged_records_total", "counter", "Ranges of the ingest logs found lost to damage (bytes that do not verify, with records after them that do) and read past, since the agent started.")
	e.sample("cairn_ingest_damaged_records_total", "", float64(st.Ingest.DamagedRecords))
	e.family("cairn_ingest_lost_messages_total", "counter", "Messages the damaged ranges of the ingest logs held, since the agent started.")
	e.sample("cairn_ingest_lost_messages_total", "", float64(st.Ingest.LostMessages))
	unacknowledged := 0.0
	if since := st.Ingest.NotAcknowledgingSinceUnixMS; since != 0 {
		unacknowledged = max(0, float64(st.TimeUnixMS-since)/1000)
	}
	gauge("cairn_input_unacknowledged", "1 while an ingest log refuses appends (a full or failing disk): input is not acknowledged to the broker, which keeps it.", bit(st.Ingest.NotAcknowledgingSinceUnixMS != 0))
	gauge("cairn_input_unacknowledged_seconds", "How long an ingest log has refused appends, 0 while it takes them.", unacknowledged)
	gauge("cairn_output_backlog_bytes", "Output the sinks hold until their brokers acknowledge it.", float64(st.OutputBacklogBytes))
	gauge("cairn_input_held", "1 while the output backlog is over agent.max_output_backlog and sources read nothing new.", bit(st.InputHeld))
	e.family("cairn_disk_written_bytes_total", "counter", "Bytes the agent made the kernel write to a file of its data directory (whole pages), since it started.")
	for _, f := range st.Disk.Files {
		e.sample("cairn_disk_written_bytes_total", labels("file", f.Name), float64(f.WrittenBytes))
	}
	e.family("cairn_disk_syncs_total", "counter", "fsyncs and fdatasyncs of a file of the data directory, since the agent started.")
	for _, f := range st.Disk.Files {
		e.sample("cairn_disk_syncs_total", labels("file", f.Name), float64(f.Syncs))
	}
	e.family("cairn_disk_written_bytes_per_day", "gauge", "The last hour's rate of the bytes the kernel wrote for the agent (its files' pages and the file system's for them), extrapolated to a day; absent until the agent has run 10 minutes.")
	if st.Disk.PerDaySpanSeconds > 0 {
		e.sample("cairn_disk_written_bytes_per_day", "", float64(st.Disk.PerDayBytes))
	}
	gauge("cairn_uptime_seconds", "Time since the pipeline (re)started.", st.UptimeSeconds)
	gauge("cairn_heap_live_bytes", "The Go heap's live data at the last garbage collection (before the first, what it holds).", float64(st.Memory.HeapLive))
	gauge("cairn_heap_goal_bytes", "The size the Go heap may reach before the next garbage collection.", float64(st.Memory.HeapGoal))
	if st.Memory.Limit > 0 {
		gauge("cairn_memory_limit_bytes", "The soft memory limit (agent.memory_limit or GOMEMLIMIT).", float64(st.Memory.Limit))
	}
	writeProcessMetrics(e)
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// exposition writes the Prometheus text format to w.
type exposition struct{ w io.Writer }

// family starts a metric family; help holds no backslash or newline.
func (e exposition) family(name, kind, help string) {
	fmt.Fprintf(e.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

// sample writes one series of the family begun last; ls is what labels
// returns, "" for none.
func (e exposition) sample(name, ls string, v float64) {
	if ls != "" {
		ls = "{" + ls + "}"
	}
	fmt.Fprintf(e.w, "%s%s %s\n", name, ls, formatValue(v))
}

// formatValue writes integers without an exponent (209715200, not
// 2.097152e+08) and infinities as +Inf and -Inf.
func formatValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// labels writes name-value pairs as the inside of a series' braces, the
// values escaped as the format wants.
func labels(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pairs[i])
		b.WriteString(`="`)
		labelEscaper.WriteString(&b, pairs[i+1])
		b.WriteByte('"')
	}
	return b.String()
}

// counts are the values of the counters that a job, a source or a sink
// keeps itself, and so starts again at 0 when a reload starts a new
// incarnation: by family, then by the series' labels ("" for none).
type counts map[string]map[string]float64

func (c counts) add(family, ls string, v float64) {
	if c[family] == nil {
		c[family] = make(map[string]float64)
	}
	c[family][ls] += v
}

// counts returns the counters of the current incarnation added to those it
// carried from the ones before it, so that none goes down across a reload.
// A series of an operator or a sink that a reload removed keeps its last
// value. Only counts of a stopped incarnation are final: a new incarnation
// takes them as it starts.
func (c *exporter) counts() counts {
	out := make(counts)
	out.add("cairn_dead_letters_total", "", 0)
	out.add("cairn_ingest_append_failures_total", "", 0)
	inc := c.state.current.Load()
	if inc == nil {
		return out
	}
	for family, series := range inc.carried {
		for ls, v := range series {
			out.add(family, ls, v)
		}
	}
	for _, t := range inc.job.Status().Tasks {
		op := labels("operator", t.ID.Operator)
		sub := labels("operator", t.ID.Operator, "subtask", strconv.Itoa(t.ID.Subtask))
		out.add("cairn_records_in_total", sub, float64(t.RecordsIn))
		out.add("cairn_records_rejected_total", sub, float64(t.Rejected))
		out.add("cairn_records_out_total", sub, float64(t.RecordsOut))
		out.add("cairn_backpressure_seconds_total", sub, t.Backpressure.Seconds())
		out.add("cairn_late_records_total", op, 0) // every operator has the series
	}
	for id, n := range inc.late {
		out.add("cairn_late_records_total", labels("operator", id), float64(n.Load()))
	}
	for id, n := range inc.unmatched {
		out.add("cairn_unmatched_records_total", labels("operator", id), float64(n.Load()))
	}
	for id, m := range inc.sinks {
		sink := labels("sink", id)
		out.add("cairn_sink_records_staged_total", sink, float64(m.Staged.Load()))
		out.add("cairn_sink_messages_published_total", sink, float64(m.Published.Load()))
		out.add("cairn_sink_records_unencodable_total", sink, float64(m.Unencodable.Load()))
		out.add("cairn_sink_renumbered_total", sink, float64(m.Renumbered.Load()))
	}
	for id, m := range inc.sources {
		out.add("cairn_ingest_append_failures_total", "", float64(m.AppendFailures.Load()))
		out.add("cairn_source_bad_time_records_total", labels("source", id), float64(m.BadTimes.Load()))
	}
	return out
}

// Bucket bounds of the checkpoint histograms, chosen for a gateway. A
// checkpoint takes from a few milliseconds (small state, nothing changed)
// to seconds (a slow SD card, a large window state); past a minute it is
// in trouble, whatever the bucket. An aligned checkpoint's alignment is
// about a channel's backlog, below a millisecond when the graph keeps up
// and up to checkpoints.alignment_timeout when it does not. State on a
// 256 MB device is kilobytes to tens of megabytes. Every bucket is 2 to 4
// times the one below, so a quantile read from them is within that factor.
var (
	checkpointDurationBuckets  = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	checkpointAlignmentBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	checkpointSizeBuckets      = []float64{1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20}
)

// checkpointMetrics observes every checkpoint that completes or fails, in
// every incarnation (the runtime's OnComplete and OnAbort), so that what
// happens between two scrapes is in the histograms, not only the last.
type checkpointMetrics struct {
	mu       sync.Mutex
	observed checkpointCounts
}

// checkpointCounts are the checkpoints observed: the histograms' counts are
// the completed ones.
type checkpointCounts struct {
	failed, late              int64
	duration, alignment, size histogram
}

func newCheckpointMetrics() *checkpointMetrics {
	return &checkpointMetrics{observed: checkpointCounts{
		duration:  newHistogram(checkpointDurationBuckets),
		alignment: newHistogram(checkpointAlignmentBuckets),
		size:      newHistogram(checkpointSizeBuckets),
	}}
}

// completed observes a completed checkpoint: its duration, its longest
// alignment and the bytes its subtasks stored (as CheckpointInfo sums
// them), and whether it was late at interval.
func (c *checkpointMetrics) completed(m *checkpoint.Manifest, interval time.Duration) {
	var size int64
	var alignment float64
	for _, a := range m.Subtasks {
		size += a.Stats.StateSize
		alignment = max(alignment, a.Stats.Alignment.Seconds())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed.duration.observe(m.Duration.Seconds())
	c.observed.alignment.observe(alignment)
	c.observed.size.observe(float64(size))
	if isLate(interval, m.Duration) {
		c.observed.late++
	}
}

// aborted counts a failed checkpoint (AbortReason.Failure, as the runtime
// counts them): one a newer checkpoint subsumed or overtook, or that could
// not complete because the job is stopping, is no failure.
func (c *checkpointMetrics) aborted(a checkpoint.Abort) {
	if !a.Reason.Failure() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed.failed++
}

// snapshot copies the observations, so that they are written without
// holding up the runtime's coordinator, which observes.
func (c *checkpointMetrics) snapshot() checkpointCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.observed
	return checkpointCounts{failed: o.failed, late: o.late, duration: o.duration.clone(), alignment: o.alignment.clone(), size: o.size.clone()}
}

// histogram counts observations in buckets of fixed upper bounds, as a
// Prometheus histogram does. Not safe for concurrent use.
type histogram struct {
	bounds  []float64 // ascending; +Inf is implied
	buckets []uint64  // per bound, not cumulative; the last holds those above every bound
	sum     float64
	count   uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, buckets: make([]uint64, len(bounds)+1)}
}

// observe counts v in the first bucket whose bound is v or above.
func (h *histogram) observe(v float64) {
	h.buckets[sort.SearchFloat64s(h.bounds, v)]++
	h.sum += v
	h.count++
}

func (h histogram) clone() histogram {
	h.buckets = slices.Clone(h.buckets)
	return h
}

// write writes the histogram's series, with the labels ls (what labels
// returns, "" for none): cumulative buckets up to le="+Inf", then its sum
// and count.
func (h histogram) write(e exposition, name, ls string) {
	le := func(bound string) string {
		if ls == "" {
			return labels("le", bound)
		}
		return ls + "," + labels("le", bound)
	}
	var cumulative uint64
	for i, b := range h.bounds {
		cumulative += h.buckets[i]
		e.sample(name+"_bucket", le(formatValue(b)), float64(cumulative))
	}
	e.sample(name+"_bucket", le("+Inf"), float64(h.count))
	e.sample(name+"_sum", ls, h.sum)
	e.sample(name+"_count", ls, float64(h.count))
}
