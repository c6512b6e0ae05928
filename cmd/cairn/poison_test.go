package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// poisonConfig counts, per device, the readings whose humidity is over 50:
// a reading without humidity, or with a humidity that is no number, is one
// the filter's expression fails on, although (and because) the source
// declares humidity a number.
const poisonConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: poison
checkpoints:
  interval: 100ms
sources:
  - id: readings
    broker: local
    topics: ["poison/{device}/t"]
    key: device
    value: seq
    fields: {seq: number, humidity: number}
operators:
  - id: humid
    type: filter
    inputs: [readings]
    expr: humidity > 50
  - id: counts
    type: count
    inputs: [humid]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: "poison/count/{key}"
`

// TestPoisonReadingsAreDeadLettered feeds a running agent readings of
// which every third is poison for its filter (no humidity, or humidity
// "wet"), kills it with SIGKILL halfway and starts it again: the agent
// keeps running, rejects the poison readings (counted in status, logged,
// stored as dead letters with the operator and the reason), and counts
// every good reading exactly once.
func TestPoisonReadingsAreDeadLettered(t *testing.T) {
	r := newBrokerRun(t, "poison", poisonConfig)
	bin, file, socket, pub := r.bin, r.file, r.socket, r.pub
	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("poison-watcher"), "poison/count/#")
	rejected := func(st api.Status) int64 {
		for _, op := range st.Operators {
			if op.ID == "humid" {
				return op.Rejected()
			}
		}
		return 0
	}
	hot := map[string]int{} // good readings over 50 per device
	// feed publishes readings from..to-1 and returns how many were poison.
	feed := func(from, to int) (poison int64) {
		for i := from; i < to; i++ {
			var payload string
			switch i % 3 {
			case 0:
				payload = fmt.Sprintf(`{"seq":%d,"humidity":80}`, i)
				hot[fmt.Sprintf("d%d", i%5)]++
			case 1:
				payload = fmt.Sprintf(`{"seq":%d,"humidity":10}`, i)
			default:
				poison++
				payload = fmt.Sprintf(`{"seq":%d}`, i)
				if i%2 == 0 {
					payload = fmt.Sprintf(`{"seq":%d,"humidity":"wet"}`, i)
				}
			}
			if tok := pub.Publish(fmt.Sprintf("poison/d%d/t", i%5), 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
		return poison
	}
	first := r.start(t)
	r.awaitSubscribed(t, "readings", "poison/+/t")
	poison := feed(0, 150)
	first.Await(t, regexp.MustCompile(`level=WARN msg="operator rejected a record" operator=humid subtask=0 on_error=dead-letter reason=`), time.Minute)
	cairntest.AwaitStatus(t, socket, "the poison readings rejected", time.Minute, func(st api.Status) bool { return rejected(st) == poison })
	first.Kill()

	second := r.start(t)
	r.awaitSubscribed(t, "readings", "poison/+/t")
	poison = feed(150, 300)
	st := cairntest.AwaitStatus(t, socket, "the second half's poison readings rejected", time.Minute, func(st api.Status) bool { return rejected(st) >= poison })
	if st.State != "running" {
		t.Fatalf("agent state %q after poison readings, want running", st.State)
	}
	outputs.awaitCounts(t, time.Minute, hot, nil)
	// The sink counts what it staged and what the broker acknowledged
	// (not as many: this run also published what the one before staged
	// in its last checkpoint).
	cairntest.AwaitStatus(t, socket, "the sink's output acknowledged", time.Minute, func(st api.Status) bool {
		for _, op := range st.Operators {
			if k := op.Sink; op.ID == "out" && k != nil && k.Published > 0 && k.Staged > 0 {
				return true
			}
		}
		return false
	})
	out, err := exec.Command(bin, "status", "-c", file).Output()
	m := regexp.MustCompile(`(?m)^humid\s+1\s+\d+\s+\d+\s+(\d+)$`).FindSubmatch(out)
	if err != nil || m == nil || !regexp.MustCompile(`(?m)^sink out: [1-9]\d* staged, [1-9]\d* published and acknowledged, 0 not encodable; what it publishes again after a restore keeps its ids$`).Match(out) {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	if n, _ := strconv.ParseInt(string(m[1]), 10, 64); n < poison {
		t.Fatalf("cairn status shows %d rejected, want at least %d:\n%s", n, poison, out)
	}
	// cairn deadletters shows the rejected records with their reasons,
	// from the running agent and from the data directory once it stopped.
	// Each holds where its reading came from, and none is stored twice
	// although the second run replayed some the first had rejected.
	reasons := func(out []byte) map[string]bool {
		reasons, offsets := map[string]bool{}, map[uint64]bool{}
		for line := range strings.Lines(string(out)) {
			var dl api.DeadLetter
			if err := json.Unmarshal([]byte(line), &dl); err != nil {
				t.Fatalf("cairn deadletters --json printed %q: %v", line, err)
			}
			if dl.Operator != "humid/0" || !strings.Contains(dl.Payload, `"key":"d`) || dl.Time.IsZero() || dl.Seq == 0 ||
				dl.Source != "readings/0" || dl.Offset == 0 || !regexp.MustCompile(`^poison/d\d/t$`).MatchString(dl.Topic) {
				t.Fatalf("dead letter %+v, want one of operator humid/0 with the record, where it came from and when it was stored", dl)
			}
			if offsets[dl.Offset] {
				t.Fatalf("the reading at offset %d stored twice:\n%s", dl.Offset, out)
			}
			offsets[dl.Offset] = true
			reasons[dl.Reason] = true
		}
		return reasons
	}
	out, err = exec.Command(bin, "deadletters", "--json", "-c", file).Output()
	if got := reasons(out); err != nil || len(got) != 2 {
		t.Fatalf("cairn deadletters of the running agent: %v, the reasons %v; want some, for a missing humidity and for \"wet\"", err, got)
	}
	// Status counts what deadletters lists, the first run's too, by cause.
	listed := int64(strings.Count(string(out), "\n"))
	if st := cairntest.AwaitStatus(t, socket, "the status", time.Minute, func(api.Status) bool { return true }); st.DeadLetters != listed ||
		st.DeadLetterCauses["rejected"] != listed || st.DeadLetterCauses["undecodable"] != 0 {
		t.Fatalf("status says %d dead letters (%v); cairn deadletters lists %d, all rejected", st.DeadLetters, st.DeadLetterCauses, listed)
	}
	if status, _ := exec.Command(bin, "status", "-c", file).Output(); !strings.Contains(string(status), fmt.Sprintf("dead letters %d (%d rejected; cairn deadletters lists them)", listed, listed)) {
		t.Fatalf("cairn status:\n%s", status)
	}
	second.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
	running := out
	if out, err = exec.Command(bin, "deadletters", "--json", "-c", file).Output(); err != nil || !bytes.Equal(out, running) {
		t.Fatalf("cairn deadletters of the stopped agent: %v\n%s\nwant what the running one said:\n%s", err, out, running)
	}
	out, err = exec.Command(bin, "deadletters", "-c", file).Output()
	if err != nil || !regexp.MustCompile(`(?m)^TIME +FROM +REASON +PAYLOAD\n\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +operator humid/0 from readings/0 poison/d\d/t @\d+ +filter .* \{.*"key":"d`).Match(out) {
		t.Fatalf("cairn deadletters: %v\n%s", err, out)
	}
}
