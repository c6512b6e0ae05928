package mqttio

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/graph"
	"github.com/cairn-edge/cairn/ingest"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// handIngress stands in for the agent's own broker (broker.Server, whose
// tests hand real clients' publishes to a take function): it hands the
// subtask attached what the test gives it.
type handIngress struct {
	take     func(Handoff) bool
	detached chan struct{}
}

func (h *handIngress) Attach(_ string, _ []string, _ func(string) bool, take func(Handoff) bool) func() {
	h.take = take
	return func() { close(h.detached) }
}

// TestIngressKnowsADeviceRedeliveryAfterARestart: a source that takes
// its publishes from the agent's own broker starts on a log whose last
// message a device published (a life before crashed after logging it,
// before its PUBACK went out). The device's redelivery of it, marked as
// a duplicate, is acknowledged and not logged again; the same packet id
// and payload not marked, or from another device, is a message of its
// own and logged. Closing the source detaches it.
func TestIngressKnowsADeviceRedeliveryAfterARestart(t *testing.T) {
	logs, err := ingest.OpenLogs(filepath.Join(t.TempDir(), "ingest"), ingest.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, err := logs.Log("readings/0")
	if err != nil {
		t.Fatal(err)
	}
	reading := ingest.Message{Topic: "dev/d1/r", Payload: []byte(`{"v":1}`), Received: time.Now(), PacketID: 7, Publisher: "d1"}
	if _, err := l.Append([]ingest.Message{reading}); err != nil {
		t.Fatal(err)
	}
	ingress := &handIngress{detached: make(chan struct{})}
	metrics := new(SourceMetrics)
	src := NewSource(SourceConfig{Name: "readings", Client: ClientConfig{Broker: StartEmbedded(t), ClientID: "ingress-test"},
		Topics: []string{"dev/+/r"}, Logs: logs, Ingress: ingress, Metrics: metrics, SyncInterval: 10 * time.Millisecond})(0)
	ctx := graph.NewTaskState(graph.TaskInfo{Operator: "readings", Parallelism: 1}, nil).Context()
	if err := src.Open(ctx, 0); err != nil {
		t.Fatal(err)
	}
	hand := func(publisher string, dup bool) {
		t.Helper()
		acked := make(chan struct{})
		if !ingress.take(Handoff{Topic: reading.Topic, Payload: reading.Payload, Publisher: publisher, PacketID: 7, QoS: 1, Duplicate: dup,
			Ack: func() { close(acked) }}) {
			t.Fatal("the source did not take a publish")
		}
		testwait.Recv(t, acked, 10*time.Second, "the publish acknowledged")
	}
	hand("d1", true)
	if n, r := l.Next(), metrics.Redelivered.Load(); n != 2 || r != 1 {
		t.Fatalf("after the device's redelivery the log ends at %d, %d redeliveries known; want 2 and 1", n, r)
	}
	hand("d1", false)
	hand("d2", true)
	if n, r := l.Next(), metrics.Redelivered.Load(); n != 4 || r != 1 {
		t.Fatalf("after a new message under the same id and another device's, the log ends at %d, %d redeliveries known; want 4 and 1", n, r)
	}
	var publishers []string
	if _, err := l.Read(1, 10, func(_ uint64, m ingest.Message) error {
		publishers = append(publishers, m.Publisher)
		return nil
	}); err != nil || len(publishers) != 3 || publishers[1] != "d1" || publishers[2] != "d2" {
		t.Fatalf("the log's publishers %q, %v", publishers, err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	testwait.Recv(t, ingress.detached, time.Second, "the source to detach")
}
