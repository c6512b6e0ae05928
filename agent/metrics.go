package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/cairn-edge/cairn/agent/api"
)

// serveMetrics serves Prometheus text-format metrics on addr (a loopback
// address unless the file says otherwise) until ctx is done.
func (c *control) serveMetrics(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		c.writeMetrics(w)
	})
	c.log.Info("metrics listening", "addr", l.Addr().String())
	return serveHTTP(ctx, l, mux)
}

// writeMetrics writes the agent's metrics in the Prometheus text format.
func (c *control) writeMetrics(w io.Writer) {
	st := c.status()
	metric := func(name, kind, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
	}
	metric("cairn_checkpoints_completed_total", "counter", "Checkpoints completed since the pipeline started.")
	fmt.Fprintf(w, "cairn_checkpoints_completed_total %d\n", st.Checkpoints.Completed)
	metric("cairn_checkpoints_failed_total", "counter", "Checkpoints that failed (declined, expired, not written).")
	fmt.Fprintf(w, "cairn_checkpoints_failed_total %d\n", st.Checkpoints.Failed)
	metric("cairn_checkpoints_in_progress", "gauge", "Checkpoints in flight.")
	fmt.Fprintf(w, "cairn_checkpoints_in_progress %d\n", st.Checkpoints.InProgress)
	if l := st.Checkpoints.LastCompleted; l != nil {
		metric("cairn_checkpoint_last_duration_seconds", "gauge", "Duration of the last completed checkpoint, trigger to completion.")
		fmt.Fprintf(w, "cairn_checkpoint_last_duration_seconds %g\n", float64(l.DurationMS)/1000)
		metric("cairn_checkpoint_last_size_bytes", "gauge", "Bytes stored by the last completed checkpoint.")
		fmt.Fprintf(w, "cairn_checkpoint_last_size_bytes %d\n", l.SizeBytes)
		metric("cairn_checkpoint_last_alignment_seconds", "gauge", "Longest barrier alignment of the last completed checkpoint.")
		fmt.Fprintf(w, "cairn_checkpoint_last_alignment_seconds %g\n", float64(l.AlignmentMS)/1000)
		metric("cairn_checkpoint_last_id", "gauge", "Id of the last completed checkpoint.")
		fmt.Fprintf(w, "cairn_checkpoint_last_id %d\n", l.ID)
	}
	metric("cairn_records_in_total", "counter", "Records a subtask received.")
	for _, op := range st.Operators {
		for _, s := range op.Subtasks {
			fmt.Fprintf(w, "cairn_records_in_total{operator=%q,subtask=\"%d\"} %d\n", op.ID, s.Index, s.RecordsIn)
		}
	}
	metric("cairn_records_rejected_total", "counter", "Records a subtask's operator rejected (dead-lettered or dropped, as its on_error says).")
	for _, op := range st.Operators {
		for _, s := range op.Subtasks {
			fmt.Fprintf(w, "cairn_records_rejected_total{operator=%q,subtask=\"%d\"} %d\n", op.ID, s.Index, s.Rejected)
		}
	}
	metric("cairn_records_out_total", "counter", "Records a subtask emitted.")
	for _, op := range st.Operators {
		for _, s := range op.Subtasks {
			fmt.Fprintf(w, "cairn_records_out_total{operator=%q,subtask=\"%d\"} %d\n", op.ID, s.Index, s.RecordsOut)
		}
	}
	metric("cairn_backpressure_seconds_total", "counter", "Time a subtask waited for room downstream.")
	for _, op := range st.Operators {
		for _, s := range op.Subtasks {
			fmt.Fprintf(w, "cairn_backpressure_seconds_total{operator=%q,subtask=\"%d\"} %g\n", op.ID, s.Index, float64(s.BackpressureMS)/1000)
		}
	}
	metric("cairn_late_records_total", "counter", "Records a window dropped for arriving after its allowed lateness.")
	for _, op := range st.Operators {
		fmt.Fprintf(w, "cairn_late_records_total{operator=%q} %d\n", op.ID, op.LateRecords)
	}
	metric("cairn_dead_letters_total", "counter", "MQTT messages that could not be decoded.")
	fmt.Fprintf(w, "cairn_dead_letters_total %d\n", st.DeadLetters)
	for _, c := range []struct {
		name, help string
		count      func(*api.SinkCounts) int64
	}{
		{"cairn_sink_records_staged_total", "Records a sink staged for a checkpoint.", func(k *api.SinkCounts) int64 { return k.Staged }},
		{"cairn_sink_messages_published_total", "Messages a sink published that its broker acknowledged.", func(k *api.SinkCounts) int64 { return k.Published }},
		{"cairn_sink_records_unencodable_total", "Records a sink dropped as not encodable as JSON (NaN, ±Inf).", func(k *api.SinkCounts) int64 { return k.Unencodable }},
	} {
		metric(c.name, "counter", c.help)
		for _, op := range st.Operators {
			if op.Sink != nil {
				fmt.Fprintf(w, "%s{sink=%q} %d\n", c.name, op.ID, c.count(op.Sink))
			}
		}
	}
	metric("cairn_mqtt_connected", "gauge", "1 while every client of the broker is connected, else 0.")
	for _, b := range st.Brokers {
		connected := 0
		if b.Connected {
			connected = 1
		}
		fmt.Fprintf(w, "cairn_mqtt_connected{broker=%q} %d\n", b.ID, connected)
	}
	metric("cairn_ingest_lag_messages", "gauge", "Logged MQTT messages waiting to be processed.")
	fmt.Fprintf(w, "cairn_ingest_lag_messages %d\n", st.IngestLag)
	metric("cairn_ingest_append_failures_total", "counter", "Ingest log group commits that failed (full or failing disk); their messages were not acknowledged.")
	fmt.Fprintf(w, "cairn_ingest_append_failures_total %d\n", st.IngestFailures)
	metric("cairn_output_backlog_bytes", "gauge", "Output the sinks hold until their brokers acknowledge it.")
	fmt.Fprintf(w, "cairn_output_backlog_bytes %d\n", st.OutputBacklogBytes)
	metric("cairn_input_held", "gauge", "1 while the output backlog is over agent.max_output_backlog and sources read nothing new.")
	held := 0
	if st.InputHeld {
		held = 1
	}
	fmt.Fprintf(w, "cairn_input_held %d\n", held)
	metric("cairn_disk_written_bytes_total", "counter", "Bytes the agent made the kernel write to a file of its data directory (whole pages), since it started.")
	for _, f := range st.Disk.Files {
		fmt.Fprintf(w, "cairn_disk_written_bytes_total{file=%q} %d\n", f.Name, f.WrittenBytes)
	}
	metric("cairn_disk_syncs_total", "counter", "fsyncs and fdatasyncs of a file of the data directory, since the agent started.")
	for _, f := range st.Disk.Files {
		fmt.Fprintf(w, "cairn_disk_syncs_total{file=%q} %d\n", f.Name, f.Syncs)
	}
	metric("cairn_disk_written_bytes_per_day", "gauge", "The last hour's rate of the bytes the kernel wrote for the agent (its files' pages and the file system's for them), extrapolated to a day.")
	fmt.Fprintf(w, "cairn_disk_written_bytes_per_day %d\n", st.Disk.PerDayBytes)
	metric("cairn_uptime_seconds", "gauge", "Time since the pipeline (re)started.")
	fmt.Fprintf(w, "cairn_uptime_seconds %g\n", st.UptimeSeconds)
	if m := st.Memory; m.Resident > 0 {
		metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		fmt.Fprintf(w, "process_resident_memory_bytes %d\n", m.Resident)
	}
	metric("cairn_heap_live_bytes", "gauge", "The Go heap's live data at the last garbage collection (before the first, what it holds).")
	fmt.Fprintf(w, "cairn_heap_live_bytes %d\n", st.Memory.HeapLive)
	metric("cairn_heap_goal_bytes", "gauge", "The size the Go heap may reach before the next garbage collection.")
	fmt.Fprintf(w, "cairn_heap_goal_bytes %d\n", st.Memory.HeapGoal)
	if st.Memory.Limit > 0 {
		metric("cairn_memory_limit_bytes", "gauge", "The soft memory limit (agent.memory_limit or GOMEMLIMIT).")
		fmt.Fprintf(w, "cairn_memory_limit_bytes %d\n", st.Memory.Limit)
	}
}
