package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/mqttio"
)

// damageConfig passes every reading's seq, as the record's value, to a
// sink; no checkpoint completes unless asked for.
const damageConfig = `agent:
  data_dir: %s
brokers:
  local:
    url: %s
    client_id: damage
checkpoints:
  interval: 1h
sources:
  - id: readings
    broker: local
    topics: ["damage/{device}"]
    key: device
    value: seq
operators:
  - id: seqs
    type: map
    inputs: [readings]
    expr: value
sinks:
  - id: out
    input: seqs
    broker: local
    topic: "damage/out/{key}"
`

// TestIngestDamageCostsTheDamagedRecords: bytes flipped in the middle of
// the ingest log, in its newest segment and in an older one, after the
// broker was told the messages were durable, cost the records that held
// them and nothing else: after a restart every other message is processed
// once, the lost ones are dead letters of the source (with the offsets
// and the reason), and status, human and JSON, counts them; the log says
// so as an error.
func TestIngestDamageCostsTheDamagedRecords(t *testing.T) {
	r := newBrokerRun(t, "damage", damageConfig)
	outputs := watchOutputs(t, paho.NewClientOptions().AddBroker(r.broker.URL).SetClientID("damage-watcher"), "damage/out/#")
	first := startAgent(t, r.bin, r.file)
	// Probes that are dead letters, so that the records the source reads
	// are the readings, and counted exactly.
	cairntest.AwaitStatus(t, r.socket, "the source's subscription", time.Minute, func(st api.Status) bool {
		r.pub.Publish("damage/probe", 1, false, `{"seq": "probe"}`)
		return st.DeadLetters > 0
	})
	// 300 readings of 20 KB that deflate little: two segments of 4 MiB.
	rng := rand.New(rand.NewPCG(1, 31))
	const n, small = 300, 3
	for seq := range n {
		pad := make([]byte, 15<<10)
		for i := range pad {
			pad[i] = byte(rng.IntN(256))
		}
		payload := fmt.Sprintf(`{"seq": %d, "pad": %q}`, seq, base64.StdEncoding.EncodeToString(pad))
		if tok := r.pub.Publish(fmt.Sprintf("damage/d%d", seq%5), 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	cairntest.AwaitStatus(t, r.socket, "every reading read", time.Minute, func(st api.Status) bool { return st.RecordsOut("readings") >= n })
	// And a few small ones, each its own group: the newest segment holds
	// several records.
	for seq := n; seq < n+small; seq++ {
		if tok := r.pub.Publish("damage/d0", 1, false, fmt.Sprintf(`{"seq": %d}`, seq)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
		cairntest.AwaitStatus(t, r.socket, "the small reading read", time.Minute, func(st api.Status) bool { return st.RecordsOut("readings") > int64(seq) })
	}
	first.Kill() // no checkpoint completed: the restart reads the whole log again

	segs, _ := filepath.Glob(filepath.Join(r.data, "ingest", "log-readings%2F0", "*.seg"))
	slices.Sort(segs)
	if len(segs) < 2 {
		t.Fatalf("%d ingest log segments; the test needs two", len(segs))
	}
	// In the older segment, its middle; in the newest, its first record,
	// which others follow: damage in its last could be a torn write.
	for _, seg := range []string{segs[0], segs[len(segs)-1]} {
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		at := len(data) / 2
		if seg == segs[len(segs)-1] {
			const header, frameHeader = 20, 16
			first := int(binary.LittleEndian.Uint32(data[header:]))
			if header+frameHeader+first >= len(data) {
				t.Fatal("the newest segment holds one record; the test needs more")
			}
			at = header + frameHeader + first/2
		}
		data[at] ^= 0x10
		if err := os.WriteFile(seg, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	second := startAgent(t, r.bin, r.file)
	const all = n + small
	st := cairntest.AwaitStatus(t, r.socket, "the log read past both damaged ranges", time.Minute, func(st api.Status) bool {
		return st.Ingest.DamagedRecords == 2 && st.RecordsOut("readings")+st.Ingest.LostMessages >= all
	})
	if out, err := exec.Command(r.bin, "checkpoint", "-c", r.file).CombinedOutput(); err != nil {
		t.Fatalf("cairn checkpoint: %v\n%s", err, out)
	}
	lost := int(st.Ingest.LostMessages)
	heard := outputs.awaitAll(t, time.Minute, fmt.Sprintf("the %d readings not lost", all-lost), func(heard []mqttio.Output) bool {
		seen := map[float64]bool{}
		for _, o := range heard {
			seen[o.Value] = true
		}
		return len(seen) >= all-lost
	})
	got := map[int]bool{}
	for _, o := range heard {
		got[int(o.Value)] = true
	}
	// What is missing is two runs of readings, one in each segment, as
	// many as status counts lost.
	var missing []int
	for seq := range all {
		if !got[seq] {
			missing = append(missing, seq)
		}
	}
	runs := 0
	for i := range missing {
		if i == 0 || missing[i] != missing[i-1]+1 {
			runs++
		}
	}
	if len(missing) != lost || runs != 2 || len(got) != all-lost {
		t.Fatalf("%d readings published, missing %v in %d runs; status says %d lost in 2 ranges", len(got), missing, runs, lost)
	}

	out, err := exec.Command(r.bin, "status", "-c", r.file).Output()
	if err != nil || !regexp.MustCompile(fmt.Sprintf(`(?m)^INGEST LOG DAMAGED: 2 ranges read past, %d messages lost \(dead letters of their sources\); the newest: .*checksum mismatch`, lost)).Match(out) {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	out, err = exec.Command(r.bin, "deadletters", "--json", "-c", r.file).Output()
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for line := range strings.Lines(string(out)) {
		var dl api.DeadLetter
		if err := json.Unmarshal([]byte(line), &dl); err != nil {
			t.Fatal(err)
		}
		if dl.Source == "readings/0" && strings.HasPrefix(dl.Reason, "ingest log damaged: ") && strings.Contains(dl.Reason, "messages lost, offsets") {
			damaged++
		}
	}
	if damaged != 2 {
		t.Fatalf("%d dead letters of damage, want 2:\n%s", damaged, out)
	}
	if err := second.Stop(time.Minute); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
	if log := second.Log(); strings.Count(log, `level=ERROR msg="reading past damage in the log: offsets lost"`) != 2 {
		t.Fatalf("the damage is not logged as an error, once a range:\n%s", log)
	}
}
