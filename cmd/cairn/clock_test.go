package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/mqttio"
)

// clockConfig averages each device's readings over 2 s windows of their
// event time; the source goes idle after 2 s without input, and takes
// readings up to 2 s behind the clock as on time. %s: the source's
// max_future.
const clockConfig = `agent:
  data_dir: %%s
brokers:
  local:
    url: %%s
    client_id: clock
checkpoints:
  interval: 500ms
sources:
  - id: readings
    broker: local
    topics: ["clock/{device}"]
    key: device
    value: temp
    time: ts
    idle_timeout: 2s
    out_of_orderness: 2s
    max_future: %s
operators:
  - id: avg
    type: window
    inputs: [readings]
    key_by: key
    window: {kind: tumbling, size: 2s}
    aggregate: avg
sinks:
  - id: out
    input: avg
    broker: local
    topic: "clock/out/{key}"
`

// farFuture is what a sensor whose clock lost its battery sends.
const farFuture = `{"temp":5,"ts":"9999-12-31T23:59:59Z"}`

// operatorOf is operator id of st, or the zero Operator.
func operatorOf(st api.Status, id string) api.Operator {
	for _, op := range st.Operators {
		if op.ID == id {
			return op
		}
	}
	return api.Operator{}
}

// startClockRun starts mosquitto and an agent running clockConfig with
// max_future maxFuture, watches its outputs, and sends one reading from
// the year 9999 once the source has subscribed.
func startClockRun(t *testing.T, maxFuture string) (*brokerRun, *outputWatcher, *cairntest.Proc) {
	t.Helper()
	r := newBrokerRun(t, "clock", fmt.Sprintf(clockConfig, maxFuture))
	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("clock-watcher"), "clock/out/#")
	agent := r.start(t)
	r.awaitSubscribed(t, "readings", "clock/+")
	publish(t, r.pub, "clock/broken", farFuture)
	return r, outputs, agent
}

// publish publishes payload to topic at QoS 1 and waits for the broker's
// acknowledgement.
func publish(t *testing.T, pub paho.Client, topic, payload string) {
	t.Helper()
	if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish to %s: %v", topic, tok.Error())
	}
}

// sendBurst publishes, for each of devices, readings at the gateway's
// time over the last 1.5 s, and returns the newest reading's time.
func sendBurst(t *testing.T, pub paho.Client, devices ...string) time.Time {
	t.Helper()
	now := time.Now()
	for i := range 15 {
		at := now.Add(time.Duration(i-14) * 100 * time.Millisecond)
		for _, d := range devices {
			publish(t, pub, "clock/"+d, fmt.Sprintf(`{"temp":%d,"ts":%d}`, 20+i, at.UnixMilli()))
		}
	}
	return now
}

// awaitWindowOf waits until the window of key that holds the reading at
// newest is published, and returns how long that took from since.
func awaitWindowOf(t *testing.T, outputs *outputWatcher, key string, newest, since time.Time) time.Duration {
	t.Helper()
	end := newest.UnixMilli() - newest.UnixMilli()%2000 + 2000
	outputs.awaitAll(t, time.Minute, fmt.Sprintf("the window of %s ending at %d", key, end), func(all []mqttio.Output) bool {
		for _, o := range all {
			if o.Key == key && o.Time == end-1 { // a window's time is its last millisecond
				return true
			}
		}
		return false
	})
	return time.Since(since)
}

// TestBadDeviceClockAndQuietSource runs the binary against mosquitto as a
// plant's devices would: a sensor whose clock reads 9999 sends readings,
// and every one is a dead letter of cause bad_time, counted on the source,
// while the other devices' windows go on being emitted; when the line
// stops, the last window of each device is emitted once the source is idle
// and the clock passes the window's end, without a later reading, and
// then the idle agent's checkpoints change nothing.
func TestBadDeviceClockAndQuietSource(t *testing.T) {
	r, outputs, agent := startClockRun(t, "5m")
	cairntest.AwaitStatus(t, r.socket, "the reading from the year 9999 refused", time.Minute, func(st api.Status) bool {
		return operatorOf(st, "readings").BadTimeRecords == 1
	})
	agent.Await(t, regexp.MustCompile(`level=WARN msg="readings with an impossible event time set aside as dead letters" source=readings/0 count=1 newest_topic=clock/broken`), time.Minute)

	for range 2 { // the windows go on after the bad readings, and after an idle spell
		newest := sendBurst(t, r.pub, "d0", "d1")
		publish(t, r.pub, "clock/broken", farFuture)
		took := awaitWindowOf(t, outputs, "d1", newest, newest)
		// idle_timeout 2s + the window's 2s + out_of_orderness 2s, and a
		// group commit and a checkpoint interval before the sink publishes.
		if limit := 3*2*time.Second + 5*time.Second; took > limit {
			t.Fatalf("the last window came %v after the last reading; want it within %v", took, limit)
		}
		t.Logf("the quiet source's last window came %v after its last reading", took)
	}

	// Past its horizon (its newest reading + the window's 2 s), the idle
	// source's event time rests: the checkpoints change nothing, and the
	// agent writes nothing.
	cairntest.AwaitStatus(t, r.socket, "a checkpoint that changed nothing, the source idle", time.Minute, func(st api.Status) bool {
		c := st.Checkpoints.LastCompleted
		return c != nil && c.SameAs != 0
	})
	st := cairntest.AwaitStatus(t, r.socket, "the three bad readings dead letters", time.Minute, func(st api.Status) bool {
		return st.DeadLetterCauses["bad_time"] == 3 && operatorOf(st, "readings").BadTimeRecords == 3
	})
	if wm := operatorOf(st, "avg").WatermarkUnixMS; wm > time.Now().Add(time.Minute).UnixMilli() {
		t.Fatalf("the window's event time is %d, ahead of the clock", wm)
	}
	if st.DeadLetterCauses["undecodable"] != 0 || operatorOf(st, "avg").LateRecords != 0 {
		t.Fatalf("dead letters: %v, late records %d; want only bad_time dead letters", st.DeadLetterCauses, operatorOf(st, "avg").LateRecords)
	}
	listed, err := exec.Command(r.bin, "deadletters", "--json", "-c", r.file).CombinedOutput()
	if out := string(listed); err != nil || !strings.Contains(out, `"cause":"bad_time"`) || !strings.Contains(out, "ahead of the gateway's clock (max_future 5m0s)") {
		t.Fatalf("cairn deadletters does not say why (%v):\n%s", err, out)
	}
}

// TestPoisonedEventTimeIsBroughtBackOnRestore: a checkpoint taken while a
// reading from the year 9999 could still move event time (max_future 0s,
// no bound) restores, once the bound is set, with its event time brought
// back to the clock and a WARN saying so; readings at the clock's time
// are then windowed again rather than late.
func TestPoisonedEventTimeIsBroughtBackOnRestore(t *testing.T) {
	r, outputs, agent := startClockRun(t, "0s")
	cairntest.AwaitStatus(t, r.socket, "the window's event time at the end of time", time.Minute, func(st api.Status) bool {
		return operatorOf(st, "avg").WatermarkUnixMS > time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	})
	if err := agent.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(r.file, fmt.Appendf(nil, fmt.Sprintf(clockConfig, "5m"), r.data, r.broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	agent = r.start(t)
	agent.Await(t, regexp.MustCompile(`level=WARN msg="restored event time was ahead of the clock, brought back to it`), time.Minute)
	r.awaitSubscribed(t, "readings", "clock/+")
	newest := sendBurst(t, r.pub, "d0")
	awaitWindowOf(t, outputs, "d0", newest, newest)
	if st := cairntest.AwaitStatus(t, r.socket, "a status", time.Minute, func(api.Status) bool { return true }); operatorOf(st, "avg").LateRecords != 0 {
		t.Fatalf("%d readings at the clock's time were late after the restore", operatorOf(st, "avg").LateRecords)
	}
}
