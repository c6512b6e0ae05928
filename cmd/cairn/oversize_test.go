package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestHugeMessageCostsNoMemory publishes to an agent with a 48 MiB memory
// limit one 100 MB message, then 200 messages of 20,000 keys each (within
// the size limit), then a good one: the hostile ones become dead letters
// (the huge one cut), the good one is counted, and the agent's resident
// memory never comes near the messages' size (paho alone would hold the
// huge one whole, twice; the keys, decoded and held in flight, took an
// agent to 2.3 GB); nor after a kill, when the restart replays them.
// (Under an emulator, the memory is not checked: it is the emulator's
// too.)
func TestHugeMessageCostsNoMemory(t *testing.T) {
	t.Parallel() // its own broker, ports and directories; what it measures is the agent's memory, not time
	r := newBrokerRun(t, "huge", "agent:\n  data_dir: %s\n  memory_limit: 48MiB\nbrokers:\n  local:\n    url: %s\n    client_id: huge\n"+
		"checkpoints:\n  interval: 200ms\nsources:\n  - id: readings\n    broker: local\n    topics: [\"huge/{device}/t\"]\n    key: device\n    value: v\n"+
		"operators:\n  - id: counts\n    type: count\n    inputs: [readings]\n    key_by: key\n")
	bin, file, socket, pub := r.bin, r.file, r.socket, r.pub
	p := r.start(t)
	r.awaitSubscribed(t, "readings", "huge/+/t")
	huge := append([]byte(`{"v":1,"pad":"`), bytes.Repeat([]byte{'x'}, 100<<20)...)
	huge = append(huge, `"}`...)
	if tok := pub.Publish("huge/d1/t", 1, false, huge); !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
		t.Fatalf("publishing 100 MB: %v", tok.Error())
	}
	var keys bytes.Buffer
	keys.WriteString(`{"v":1`)
	for i := range 20_000 {
		fmt.Fprintf(&keys, `,"k%d":0`, i)
	}
	keys.WriteString("}")
	const manyKeys = 200
	for range manyKeys {
		if tok := pub.Publish("huge/d3/t", 1, false, keys.Bytes()); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	if tok := pub.Publish("huge/d2/t", 1, false, `{"v":2}`); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	const hostile = 1 + manyKeys
	// Each message of many keys takes its time to be decoded and refused
	// (under qemu, beside the other tests, some 50 a minute): a minute
	// for each next dead letter, for as long as they come.
	for letters := int64(-1); ; {
		st := cairntest.AwaitStatus(t, socket, fmt.Sprintf("more than %d of the %d hostile messages dead-lettered", max(letters, 0), hostile), time.Minute, func(st api.Status) bool {
			return st.DeadLetters > letters
		})
		if letters = st.DeadLetters; letters >= hostile {
			break
		}
	}
	cairntest.AwaitStatus(t, socket, "the hostile messages dead-lettered and the next one read", time.Minute, func(st api.Status) bool {
		return st.DeadLetters == hostile && st.RecordsOut("readings") == 1
	})
	out, err := exec.Command(bin, "deadletters", "--json", "-c", file).Output()
	var dl api.DeadLetter
	if err != nil || json.NewDecoder(bytes.NewReader(out)).Decode(&dl) != nil || dl.Topic != "huge/d1/t" || !strings.Contains(dl.Reason, "over the limit") || dl.PayloadBytes != 256<<10+1 {
		t.Fatalf("cairn deadletters: %v\n%.2000s", err, out)
	}
	peak := peakResident(t, p.Pid())
	t.Logf("peak resident %d MB", peak>>20)
	emu := cairntest.Emulator()
	if emu != "" {
		t.Logf("the peak is not checked: under %s, the agent's resident memory is the emulator's too (its translated code, its own heap)", emu)
	} else if peak > 80<<20 {
		t.Fatalf("the agent's resident memory peaked at %d MB for a 100 MB message and %d of many keys", peak>>20, manyKeys)
	}
	// A kill before the next checkpoint: the restart replays from the
	// last one; the messages are in the log as they were cut.
	p.Kill()
	p = r.start(t)
	cairntest.AwaitStatus(t, socket, "the agent running again", time.Minute, func(st api.Status) bool { return st.State == "running" })
	if peak := peakResident(t, p.Pid()); emu == "" && peak > 80<<20 {
		t.Fatalf("after a restart, the agent's resident memory peaked at %d MB", peak>>20)
	}
}

// peakResident is the peak resident memory of process pid (VmHWM).
func peakResident(t testing.TB, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
