package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

const messagesConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: messages
checkpoints:
  interval: 200ms
sources:
  - id: readings
    simulator: {devices: 4, rate: 200}
operators:
  - {id: counts, type: count, inputs: [readings], key_by: key}
sinks:
  - {id: out, input: counts, broker: local, topic: "messages/{key}"}
`

// TestCLIMessages runs the commands a user types around one real agent's
// life and compares what they print with a golden transcript
// (testdata/TestCLIMessages.golden; -update rewrites it): before it ever
// ran, while it runs with no dead letters, when `cairn stop` stops it,
// and after a kill -9 left its socket behind. Every line is a sentence
// that says what happened; none is a bare system error, a bare header or
// nothing at all. The data directory shows as $DATA, and counts and
// checkpoint ids, which vary, as N.
func TestCLIMessages(t *testing.T) {
	r := newBrokerRun(t, "messages", messagesConfig)
	var transcript strings.Builder
	// run runs cairn args and adds to the transcript what it printed, or
	// what shown makes of that.
	shownRun := func(shown func(string) string, args ...string) {
		t.Helper()
		code, stdout, stderr := cairntest.Run(t, r.bin, append(args, "-c", r.file)...)
		fmt.Fprintf(&transcript, "$ cairn %s\n%s%sexit %d\n", strings.Join(args, " "), shown(stdout), stderr, code)
	}
	run := func(args ...string) { t.Helper(); shownRun(func(s string) string { return s }, args...) }

	run("status")
	run("deadletters")
	run("stop")

	agent := startAgent(t, r.bin, r.file)
	cairntest.AwaitStatus(t, r.socket, "the sink's first output acknowledged", time.Minute, func(st api.Status) bool {
		for _, op := range st.Operators {
			if op.Sink != nil && op.Sink.Published > 0 {
				return true
			}
		}
		return false
	})
	// Of the status, the line of the sink, which says what a consumer
	// that drops repeated ids can count on.
	shownRun(func(stdout string) string {
		var sink strings.Builder
		for line := range strings.Lines(stdout) {
			if strings.HasPrefix(line, "sink ") {
				sink.WriteString("… " + regexp.MustCompile(`\d+`).ReplaceAllString(line, "N"))
			}
		}
		return sink.String()
	}, "status")
	run("deadletters")
	run("stop")
	if err := agent.Wait(); err != nil {
		t.Fatalf("the agent stopped with %v, want status 0", err)
	}
	if log := agent.Log(); !regexp.MustCompile(`msg="stopped as asked"\n`).MatchString(log) || strings.Contains(log, `savepoint=""`) {
		t.Errorf("the agent's log should say it stopped as asked, without an empty savepoint:\n%s", log)
	}
	run("deadletters")

	// kill -9: the socket stays, with nothing behind it.
	agent = startAgent(t, r.bin, r.file)
	agent.Await(t, completeLine, time.Minute)
	if err := agent.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.socket); err != nil {
		t.Fatalf("the killed agent's socket: %v; want it left behind", err)
	}
	run("status")
	run("checkpoint")

	got := transcript.String()
	got = strings.ReplaceAll(got, r.data, "$DATA")
	got = regexp.MustCompile(`#\d+`).ReplaceAllString(got, "#N")
	golden.RequireEqual(t, []byte(got))
	t.Logf("what the user saw, the data directory %s:\n%s", filepath.Dir(r.data), got)
}
