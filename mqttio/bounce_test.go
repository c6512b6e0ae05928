package mqttio

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/localrecovery"
	"github.com/cairn-edge/cairn/runtime"
)

var bounceKills = flag.Int("bounce.kills", 20, "SIGKILLs of the agent in the kill-and-bounce test")

// With CAIRN_MQTT_HELPER=<dir>, the test binary runs the count pipeline of
// countPipeline against CAIRN_BROKER until killed: the agent under test.
const mqttHelperEnv = "CAIRN_MQTT_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(mqttHelperEnv); dir != "" {
		if err := runMQTTHelper(dir, os.Getenv("CAIRN_BROKER")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runMQTTHelper(dir, url string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := localrecovery.Open(filepath.Join(dir, "checkpoints.db"), localrecovery.Options{Logger: log})
	if err != nil {
		return err
	}
	logs, err := ingest.OpenLogs(filepath.Join(dir, "ingest"), ingest.LogOptions{})
	if err != nil {
		return err
	}
	restore, err := store.Completed()
	if err != nil {
		return err
	}
	cfg := checkpoint.DefaultConfig()
	cfg.Interval = 50 * time.Millisecond
	cfg.TolerableFailures = -1
	m := new(SourceMetrics)
	if os.Getenv("CAIRN_DEBUG") != "" {
		go func() {
			for range time.Tick(500 * time.Millisecond) {
				fmt.Fprintf(os.Stderr, "received %d logged %d redelivered %d lag %d\n", m.Received.Load(), m.Logged.Load(), m.Redelivered.Load(), m.Lag.Load())
			}
		}()
	}
	job, err := runtime.New(countPipeline(nopTB{}, url, "cairn-bounce", logs, m),
		runtime.Options{Checkpoints: cfg, Store: store, Restore: localrecovery.Candidates(store, restore), Logger: log})
	if err != nil {
		return err
	}
	return job.Run(context.Background())
}

// nopTB lets the helper use test constructors outside a test; they fail
// only on programming errors.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// TestKillAndBounce publishes readings in three phases while the agent is
// killed with SIGKILL again and again, and restarts mosquitto between the
// phases. Every reading must be counted exactly once: the consumer, after
// dropping repeated ids, sees for every device each count from 1 to the
// number published, and no count twice.
func TestKillAndBounce(t *testing.T) {
	b := mosquittoBroker(t)
	presubscribe(t, b.url, "cairn-bounce-0", "sensors/+/telemetry")
	const phases, perPhase, devices = 3, 1500, 25
	want := map[string]int{}
	for i := range phases * perPhase {
		want[fmt.Sprintf("d%02d", i*7%devices)]++
	}
	out := collect(t, b.url, "bounce-consumer", want)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	t.Logf("seed %d", seed)

	published := make(chan struct{})
	bounces := 0
	go func() {
		defer close(published)
		pub := client(t, b.url, "bounce-publisher", true)
		for p := range phases {
			var toks []interface {
				Wait() bool
				Error() error
			}
			for i := p * perPhase; i < (p+1)*perPhase; i++ {
				dev := fmt.Sprintf("d%02d", i*7%devices)
				toks = append(toks, pub.Publish("sensors/"+dev+"/telemetry", 1, false, fmt.Sprintf(`{"temp":%d,"seq":%d}`, i%40, i)))
				if i%100 == 0 {
					time.Sleep(20 * time.Millisecond) // a steady load, not a burst
				}
			}
			for _, tok := range toks {
				if tok.Wait(); tok.Error() != nil {
					t.Errorf("publish: %v", tok.Error())
				}
			}
			if p < phases-1 {
				// Between phases nothing of the publisher is in flight, so
				// the restart tests the agent, not the publisher.
				pub.Disconnect(100)
				b.restart()
				bounces++
				pub = client(t, b.url, "bounce-publisher", true)
			}
		}
		pub.Disconnect(100)
	}()

	kills := 0
	for kills < *bounceKills {
		run := startMQTTHelper(t, dir, b.url, time.Duration(50+rng.IntN(400))*time.Millisecond)
		if !run.killed {
			t.Fatalf("the agent ended on its own:\n%s", run.stderr)
		}
		kills++
	}
	<-published
	final := exec.Command(os.Args[0], "-test.run=^$")
	final.Env = append(os.Environ(), mqttHelperEnv+"="+dir, "CAIRN_BROKER="+b.url)
	var stderr bytes.Buffer
	final.Stderr = &stderr
	if err := final.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { final.Process.Kill(); final.Wait() }()
	select {
	case <-out.done:
	case <-time.After(90 * time.Second):
		out.mu.Lock()
		defer out.mu.Unlock()
		for k, n := range want {
			if len(out.seen[k]) < n {
				t.Errorf("device %s: %d of %d counts", k, len(out.seen[k]), n)
			}
		}
		t.Fatalf("outputs incomplete after the final start; agent log:\n%s", stderr.String())
	}
	out.check(t)
	t.Logf("%d kills, %d broker restarts, %d repeated ids dropped by the consumer", kills, bounces, out.dups)
	if bounces != phases-1 {
		t.Fatalf("the broker was restarted %d times, want %d", bounces, phases-1)
	}
}

type mqttRun struct {
	killed bool
	stderr string
}

func startMQTTHelper(t *testing.T, dir, url string, killAfter time.Duration) mqttRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mqttHelperEnv+"="+dir, "CAIRN_BROKER="+url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	timer := time.AfterFunc(killAfter, func() { once.Do(func() { cmd.Process.Signal(syscall.SIGKILL) }) })
	defer timer.Stop()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return mqttRun{killed: true, stderr: stderr.String()}
	}
	return mqttRun{stderr: fmt.Sprintf("%v\n%s", err, stderr.String())}
}
