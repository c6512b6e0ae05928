package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestScenarios runs the scenarios other than pipeline (the CLI's test
// runs that one) and footprint (BenchmarkFootprint) with small sizes on
// real parts and checks that their figures agree with each other.
func TestScenarios(t *testing.T) {
	ctx := context.Background()
	t.Run("ingest", func(t *testing.T) {
		r, err := Ingest(IngestConfig{Dir: t.TempDir(), Messages: 2000, GroupSize: 100, SingleMessages: 20})
		if err != nil {
			t.Fatal(err)
		}
		if r.Messages != 2000 || r.MessagesPerSec <= 0 || r.SingleMessagesPerSec <= 0 ||
			r.GroupCommitSpeedupRatio != r.MessagesPerSec/r.SingleMessagesPerSec {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("mqtt", func(t *testing.T) {
		r, err := MQTT(ctx, MQTTConfig{Dir: t.TempDir(), Messages: 500, Rounds: 2})
		if err != nil {
			t.Fatal(err)
		}
		if r.Broker != "embedded" || r.Messages != 1000 || r.BareMessagesPerSec <= 0 ||
			r.MQTTVsBareRatio != r.CairnMessagesPerSec/r.BareMessagesPerSec {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("snapshot", func(t *testing.T) {
		r, err := Snapshot(SnapshotConfig{Dir: t.TempDir(), Keys: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		if r.ChangedKeys != 200 || r.FullBytes <= 0 || r.IncrementalBytes <= 0 || r.IncrementalBytes*20 > r.FullBytes ||
			r.IncrementalVsFullRatio != float64(r.IncrementalBytes)/float64(r.FullBytes) {
			t.Fatalf("an incremental snapshot of 1%% of the keys should be a small fraction of the whole: %+v", r)
		}
	})
	t.Run("restore", func(t *testing.T) {
		r, err := Restore(RestoreConfig{Dir: t.TempDir(), Keys: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		if r.Bytes <= 0 || r.RestoreMS <= 0 || r.KeysPerSec <= 0 || r.RestoreVsWriteRatio != r.RestoreMS/r.WriteMS {
			t.Fatalf("%+v", r)
		}
	})
}

// TestPrint checks both forms of a result: one JSON object per line with
// the scenario's name, and a table under the name.
func TestPrint(t *testing.T) {
	r := &RestoreResult{Keys: 1234, Bytes: 2_500_000, RestoreMS: 12.5, KeysPerSec: 98720, WriteMS: 25, RestoreVsWriteRatio: 0.5}
	var out bytes.Buffer
	if err := Print(&out, r, true); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), `{"scenario":"restore","keys":1234,`) || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("JSON: %q", out.String())
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["restore_vs_write_ratio"] != 0.5 {
		t.Fatalf("JSON %q does not read back: %v %v", out.String(), back, err)
	}
	out.Reset()
	if err := Print(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"restore\n", "  keys ", "1,234", "2.50 MB (2.38 MiB)", "12.5 ms (98,720 keys/s)", "0.50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
