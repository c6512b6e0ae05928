package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mosquittotest"
	"github.com/cairn-edge/cairn/internal/testing/needs"
)

const fullDiskConfig = `agent:
  data_dir: %s
  metrics: %s
brokers:
  local:
    url: %s
    client_id: fulldisk
checkpoints:
  interval: 200ms
  tolerable_failures: -1
sources:
  - id: readings
    broker: local
    topics: ["full/{device}"]
    key: device
operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
sinks:
  - id: out
    input: counts
    broker: local
    topic: "full/count/{key}"
`

// smallDisk mounts a tmpfs of size bytes at a new directory: a disk that
// fills. Mounting needs root; without it the test is skipped, or fails
// where CAIRN_REQUIRE_MOUNT is set.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		needs.Missing(t, "a tmpfs mount", fmt.Sprintf("mounting one failed (%v): run the tests as root", err), "CAIRN_REQUIRE_MOUNT")
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file into dir until the disk under it is full, and
// returns the file.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// TestFullDiskSaysSo fills the disk under a running agent's data
// directory: it stops acknowledging input, and says so — in cairn status,
// in status --json since when and why, in its metrics — until space
// returns; killed with -9 while the disk is full and started once there is
// room again, it has lost nothing the broker was told was durable, and
// counts every reading once.
func TestFullDiskSaysSo(t *testing.T) {
	disk := smallDisk(t, 16<<20)
	broker := mosquittotest.Start(t, t.TempDir(), nil)
	bin := cairntest.Build(t, "cairn")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	l.Close()
	data, file := filepath.Join(disk, "data"), filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, fullDiskConfig, data, metricsAddr, broker.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(data, "cairn.sock")
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID("fulldisk-feeder"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("feeder: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	counts := watchOutputs(t, paho.NewClientOptions().AddBroker(broker.URL).SetClientID("fulldisk-watcher"), "full/count/#")
	// Readings with 300 bytes of noise, which deflate little: a hundred
	// need pages of the disk the last page written does not hold.
	rng := rand.New(rand.NewPCG(2, 9))
	feed := func(from, to int) {
		for i := from; i < to; i++ {
			noise := make([]byte, 300)
			for j := range noise {
				noise[j] = byte(rng.IntN(256))
			}
			payload := fmt.Sprintf(`{"seq": %d, "noise": %q}`, i, base64.StdEncoding.EncodeToString(noise))
			if tok := pub.Publish(fmt.Sprintf("full/d%d", i%4), 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}

	first := startAgent(t, bin, file)
	cairntest.AwaitStatus(t, socket, "the source's subscription", time.Minute, func(st api.Status) bool {
		pub.Publish("full/probe", 1, false, `not json`) // a dead letter: the counts are the readings'
		return st.DeadLetters > 0
	})
	feed(0, 100)
	cairntest.AwaitStatus(t, socket, "the first readings read", time.Minute, func(st api.Status) bool { return st.RecordsOut("readings") == 100 })

	// full fills the disk, feeds from..to, and checks that the agent says
	// it does not acknowledge them, since when and why.
	full := func(from, to int) string {
		filler := fill(t, disk)
		feed(from, to)
		st := cairntest.AwaitStatus(t, socket, "the agent saying it does not acknowledge", time.Minute, func(st api.Status) bool {
			return st.Ingest.NotAcknowledgingSinceUnixMS != 0
		})
		// The file is named in the data directory, whose own path may
		// come from the environment, which status never shows.
		if since := time.UnixMilli(st.Ingest.NotAcknowledgingSinceUnixMS); time.Since(since) > time.Minute || !strings.Contains(st.Ingest.NotAcknowledgingReason, "no space left on device") ||
			!strings.Contains(st.Ingest.NotAcknowledgingReason, " ingest/log-readings%2F0/") || strings.Contains(st.Ingest.NotAcknowledgingReason, data) {
			t.Fatalf("status --json says not acknowledging since %v: %q; want now, and the file and the error", since, st.Ingest.NotAcknowledgingReason)
		}
		out, err := exec.Command(bin, "status", "-c", file).Output()
		if err != nil || !regexp.MustCompile(`(?m)^INPUT NOT ACKNOWLEDGED for \d+s \(the broker keeps it; nothing is lost\): appending to ingest log readings/0: .*no space left on device$`).Match(out) {
			t.Fatalf("cairn status: %v\n%s", err, out)
		}
		if m := scrapeMetrics(t, metricsAddr); !strings.Contains(m, "\ncairn_input_unacknowledged 1\n") {
			t.Fatalf("metrics while the disk is full:\n%s", m)
		}
		return filler
	}
	// acknowledging waits until the agent says it acknowledges again.
	acknowledging := func() {
		st := cairntest.AwaitStatus(t, socket, "the agent acknowledging", time.Minute, func(st api.Status) bool { return st.Ingest.NotAcknowledgingSinceUnixMS == 0 })
		if st.Ingest.NotAcknowledgingReason != "" {
			t.Fatalf("status --json still gives a reason: %q", st.Ingest.NotAcknowledgingReason)
		}
		if m := scrapeMetrics(t, metricsAddr); !strings.Contains(m, "\ncairn_input_unacknowledged 0\n") {
			t.Fatalf("metrics once there is room:\n%s", m)
		}
	}

	// Full while running, then room again: it says so until then.
	os.Remove(full(100, 200))
	acknowledging()
	counts.awaitCounts(t, time.Minute, map[string]int{"d0": 50, "d1": 50, "d2": 50, "d3": 50}, nil)
	// Full again, killed while full, started once there is room.
	filler := full(200, 300)
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	second := startAgent(t, bin, file)
	counts.awaitCounts(t, time.Minute, map[string]int{"d0": 75, "d1": 75, "d2": 75, "d3": 75}, nil)
	acknowledging()
	if err := second.Stop(time.Minute); err != nil {
		t.Fatalf("agent stopped with %v", err)
	}
}

// scrapeMetrics returns what the agent's metrics listener at addr serves.
func scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
