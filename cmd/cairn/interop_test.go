package main

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/needs"
)

// pahoSuite is the Eclipse Paho MQTT 3.1.1 interoperability suite, as
// third_party/README.md says it was copied.
const pahoSuite = "../../third_party/paho.mqtt.testing/interoperability/client_test.py"

// pahoDifferences are the cases of pahoSuite that mosquitto passes and
// the embedded broker may fail, each with why: docs/mqtt.md#conformance
// says more.
var pahoDifferences = map[string]string{
	"test_unsubscribe": "the suite publishes from a second connection as soon as it has sent an UNSUBSCRIBE, " +
		"without waiting for the UNSUBACK; mochi reads each connection on a goroutine of its own, " +
		"so it may handle the publish first and deliver it to the subscription being removed",
}

// pahoConfig is an agent whose embedded broker listens on loopback with
// its defaults (anonymous clients allowed there, the limits as they
// ship), beside one source for it to serve.
const pahoConfig = `agent:
  data_dir: %s
brokers:
  local:
    embedded: true
    listen: 127.0.0.1:%d
sources:
  - id: readings
    broker: local
    topics: ["interop/{device}/t"]
    key: device
    value: v
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
`

// TestPahoInteroperability runs the Paho MQTT 3.1.1 interoperability
// suite against the embedded broker and against mosquitto, at once, and
// logs each case's result for both side by side. It fails when a case
// mosquitto passes fails on the embedded broker, unless pahoDifferences
// lists it, and when an entry there is not a case mosquitto passes.
// Each run takes about 40 s, mostly the suite's own sleeps (15 s
// waiting out a keepalive).
func TestPahoInteroperability(t *testing.T) {
	t.Parallel() // its own brokers, ports and directories; it mostly waits
	python, err := exec.LookPath("python3")
	if err != nil {
		needs.Missing(t, "python3", "apt-get install python3", "CAIRN_REQUIRE_PYTHON")
	}
	cases := pahoCases(t)
	mosquitto := mosquittotest.Start(t, t.TempDir(), nil)

	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	port := freePort(t)
	if err := os.WriteFile(file, fmt.Appendf(nil, pahoConfig, data, port), 0o600); err != nil {
		t.Fatal(err)
	}
	startAgent(t, bin, file)
	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "connected to its own broker", 30*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && st.Brokers[0].Connected
	})

	type run struct {
		results map[string]string
		out     []byte
		err     error
	}
	embeddedRun, mosquittoRun := make(chan run, 1), make(chan run, 1)
	suite := func(hostPort string, into chan<- run) {
		host, port, _ := strings.Cut(hostPort, ":")
		cmd := exec.Command(python, "-u", "-W", "ignore::DeprecationWarning", pahoSuite, "--hostname="+host, "--port="+port)
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // nothing written into third_party
		out, err := cmd.CombinedOutput()
		into <- run{pahoResults(out), out, err}
	}
	go suite(fmt.Sprintf("127.0.0.1:%d", port), embeddedRun)
	go suite(strings.TrimPrefix(mosquitto.URL, "tcp://"), mosquittoRun)
	embedded, theirs := <-embeddedRun, <-mosquittoRun

	var table strings.Builder
	fmt.Fprintf(&table, "%-32s %-9s %s\n", "case", "embedded", "mosquitto")
	for _, c := range cases {
		fmt.Fprintf(&table, "%-32s %-9s %s\n", c, embedded.results[c], theirs.results[c])
	}
	t.Logf("Paho MQTT 3.1.1 interoperability suite:\n%s", table.String())
	for name, r := range map[string]run{"the embedded broker": embedded, "mosquitto": theirs} {
		if len(r.results) != len(cases) {
			t.Fatalf("the suite against %s ran %d of its %d cases (%v):\n%s", name, len(r.results), len(cases), r.err, r.out)
		}
	}
	if !slices.ContainsFunc(cases, func(c string) bool { return theirs.results[c] == "ok" }) {
		t.Fatalf("mosquitto passed no case: the suite does not work here:\n%s", theirs.out)
	}
	for _, c := range cases {
		why, listed := pahoDifferences[c]
		switch {
		case theirs.results[c] == "ok" && embedded.results[c] != "ok" && !listed:
			t.Errorf("%s: mosquitto passes, the embedded broker does not (%s)", c, embedded.results[c])
		case listed && theirs.results[c] != "ok":
			t.Errorf("%s is listed as a difference (%s) but mosquitto fails it too (%s)", c, why, theirs.results[c])
		case listed && embedded.results[c] != "ok":
			t.Logf("%s: mosquitto passes, the embedded broker does not, as listed: %s", c, why)
		}
	}
	for c := range pahoDifferences {
		if !slices.Contains(cases, c) {
			t.Errorf("pahoDifferences lists %s, which the suite does not have", c)
		}
	}
	if t.Failed() {
		t.Logf("the suite against the embedded broker said:\n%s", embedded.out)
	}
}

// pahoCases are the names of the suite's cases, from its source, in the
// order unittest runs them.
func pahoCases(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(pahoSuite)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, m := range regexp.MustCompile(`(?m)^    def (test\w+)\(self\):`).FindAllSubmatch(src, -1) {
		cases = append(cases, string(m[1]))
	}
	slices.Sort(cases)
	return cases
}

var (
	// pahoStart is unittest's verbose line for a case, which the case's
	// own output and then its result may follow on the same line.
	pahoStart = regexp.MustCompile(`^(test\w+) \(__main__\.Test[.\w]*\) \.\.\. (.*)$`)
	// pahoResult is unittest's word for a case's result. unittest writes
	// the word and its line's end in two writes, between which a log
	// record of the suite's client thread may come ("okERROR:root:..."),
	// and the line then ends after that.
	pahoResult = regexp.MustCompile(`^(ok|FAIL|ERROR|skipped.*?)(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\w+:.*)?$`)
)

// pahoResults reads the suite's output, unittest's verbose lines among
// what its cases print, as each case's result: "ok", "FAIL", "ERROR" or
// "skipped ...".
func pahoResults(out []byte) map[string]string {
	results := map[string]string{}
	current := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := pahoStart.FindStringSubmatch(line); m != nil {
			current, line = m[1], m[2]
		}
		if m := pahoResult.FindStringSubmatch(line); current != "" && m != nil {
			results[current] = m[1]
			current = ""
		}
	}
	return results
}

// TestPahoResults reads unittest's verbose output as the suite writes
// it: a result on the case's own line or after what the case printed,
// a traceback between, a log record glued to a result, and lines of no
// case.
func TestPahoResults(t *testing.T) {
	out := `hostname 127.0.0.1 port 1883
clean up starting
testBasic (__main__.Test.testBasic) ... Basic test starting
Basic test succeeded
okERROR:root:receive: unexpected exception (<class 'OSError'>, OSError(9, 'Bad file descriptor'), <traceback object at 0x7f86fcdc1340>)

test_dollar_topics (__main__.Test) ... ok
test_keepalive (__main__.Test.test_keepalive) ... Keepalive test starting
Traceback (most recent call last):
AssertionError: length should be 1: []
Keepalive test failed
FAIL
test_unsubscribe (__main__.Test.test_unsubscribe) ... Unsubscribe test
ERROR:root:receive: unexpected exception (<class 'OSError'>, OSError(9, 'Bad file descriptor'))
ERROR
test_zero_length_clientid (__main__.Test.test_zero_length_clientid) ... skipped 'not here'
======================================================================
FAIL: test_keepalive (__main__.Test.test_keepalive)
----------------------------------------------------------------------
Ran 5 tests in 20.1s
FAILED (failures=1, errors=1, skipped=1)
`
	want := map[string]string{
		"testBasic": "ok", "test_dollar_topics": "ok", "test_keepalive": "FAIL",
		"test_unsubscribe": "ERROR", "test_zero_length_clientid": "skipped 'not here'",
	}
	if got := pahoResults([]byte(out)); !maps.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
}
