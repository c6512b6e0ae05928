package main

import (
	"encoding/binary"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
	"github.com/cairn-edge/cairn/internal/testing/mqttraw"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// The attack of issue 38, as reported: "four clients connect with
// clean=false, subscribe #, disconnect; 2,000 QoS 1 messages of 10 KB
// later, every new SUBSCRIBE gets SUBACK 0x80 (still 60 s later) and a
// connected, reading subscriber got 1,049 of 2,000; the only trace is one
// log line."

// offlineAttack is what the attack did to an agent.
type offlineAttack struct {
	read    int    // of the messages, what the connected subscriber got
	suback  []byte // a new SUBSCRIBE's codes, after
	offline []string
}

// offlineMessages, of offlineSize bytes, are the attack's.
const (
	offlineMessages = 2000
	offlineSize     = 10_000
)

// attackOffline makes the attack on a: four offline sessions of #, a
// connected subscriber of plant/# reading, 2,000 messages published, each
// acknowledged; then a new SUBSCRIBE.
func attackOffline(t *testing.T, a *attackAgent) offlineAttack {
	t.Helper()
	at := offlineAttack{offline: []string{"off-0", "off-1", "off-2", "off-3"}}
	for _, id := range at.offline {
		c := rawClient(t, a.addr, mqttraw.Session{ID: id, Clean: false})
		if codes, err := c.SubscribeAck(1, 1, "#"); err != nil || !slices.Equal(codes, []byte{1}) {
			t.Fatalf("%s subscribing to #: %x %v", id, codes, err)
		}
		c.Close()
	}
	var mu sync.Mutex
	seen := make(map[uint32]bool)
	reader := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + a.addr).SetClientID("reader").SetCleanSession(true))
	if tok := reader.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer reader.Disconnect(0)
	if tok := reader.Subscribe("plant/#", 1, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		defer mu.Unlock()
		seen[binary.BigEndian.Uint32(m.Payload())] = true
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + a.addr).SetClientID("plant-pub"))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer pub.Disconnect(0)
	payload := make([]byte, offlineSize)
	for i := range offlineMessages {
		binary.BigEndian.PutUint32(payload, uint32(i))
		if tok := pub.Publish("plant/line-1", 1, false, payload); !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
			t.Fatalf("publish %d: not acknowledged within a minute (%v)", i, tok.Error())
		}
	}
	testwait.Poll(10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == offlineMessages })
	mu.Lock()
	at.read = len(seen)
	mu.Unlock()
	late := rawClient(t, a.addr, mqttraw.Session{ID: "late", Clean: true})
	at.suback, _ = late.SubscribeAck(1, 1, "late/#")
	return at
}

// TestBrokerOfflineSessionsStarveNoOne: through the binary, the attack
// leaves the connected subscriber every message and new filters granted;
// the offline sessions keep their newest messages, and count per client,
// in the status and the metrics, what they dropped; after
// offline_session_expiry they are gone, counted apart from the refusals.
func TestBrokerOfflineSessionsStarveNoOne(t *testing.T) {
	const expiry = 30 * time.Second
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a := startLimitedAgent(t, cairntest.Build(t, "cairn"), memoryLimit+"\n  metrics: "+metrics, fmt.Sprintf("    limits: {offline_session_expiry: %v}", expiry))
	at := attackOffline(t, a)
	if at.read != offlineMessages || !slices.Equal(at.suback, []byte{1}) {
		t.Fatalf("the connected subscriber read %d of %d messages, a new filter got SUBACK %x (want 01)", at.read, offlineMessages, at.suback)
	}
	a.figures(t).within(t, 10*time.Second)

	// Each offline session dropped its oldest, counted for it.
	st := cairntest.AwaitStatus(t, a.socket, "the drops of four offline sessions", 10*time.Second, func(st api.Status) bool {
		return len(st.Brokers) == 1 && len(st.Brokers[0].OfflineDropped) == len(at.offline)
	})
	dropped := st.Brokers[0].OfflineDropped
	t.Logf("dropped %v; refused %v", dropped, st.Brokers[0].Refused)
	// off-0, back, is sent what it kept: the newest, at least as many as
	// it did not drop (the sink's output, to #, was dropped first too).
	back := rawClient(t, a.addr, mqttraw.Session{ID: at.offline[0], Clean: false})
	back.SetDeadline(time.Now().Add(30 * time.Second))
	kept := make(map[int]bool)
	newest := func() bool {
		for i := offlineMessages - 1; i >= offlineMessages-len(kept); i-- {
			if !kept[i] {
				return false
			}
		}
		return int64(len(kept)) >= offlineMessages-dropped[at.offline[0]]
	}
	for !newest() {
		pk, err := back.ReadType(packets.Publish, false)
		if err != nil {
			t.Fatalf("%s back was sent %d messages, not the newest %d of %d: %v", at.offline[0], len(kept), offlineMessages-dropped[at.offline[0]], offlineMessages, err)
		}
		if pk.TopicName == "plant/line-1" {
			kept[int(binary.BigEndian.Uint32(pk.Payload))] = true
		}
		back.Send(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: pk.PacketID})
	}
	scraped := scrapeMetrics(t, metrics)
	out, err := exec.Command(a.bin, "status", "-c", a.file).Output()
	if err != nil {
		t.Fatalf("cairn status: %v", err)
	}
	for _, id := range at.offline {
		if sample := fmt.Sprintf("\ncairn_broker_offline_dropped_total{broker=\"local\",client=%q} %d\n", id, dropped[id]); !strings.Contains(scraped, sample) {
			t.Errorf("no sample %q in the metrics:\n%s", sample, scraped)
		}
		if line := fmt.Sprintf("\n  dropped %d of offline session %q's oldest messages", dropped[id], id); !strings.Contains(string(out), line) {
			t.Errorf("no line %q in cairn status:\n%s", line, out)
		}
	}
	a.proc.Await(t, regexp.MustCompile(`level=WARN msg="embedded broker dropped offline sessions' oldest messages: over their share of max_queued_bytes_per_address" component=embedded-broker remote=127\.0\.0\.1 count=1 client=off-`), 10*time.Second)

	// The other three expire: ended, counted as such in the status and
	// the metrics, and no refusal.
	st = cairntest.AwaitStatus(t, a.socket, "the offline sessions ended", expiry+30*time.Second, func(st api.Status) bool {
		return st.Brokers[0].EndedSessions["after offline_session_expiry"] == 3 && len(st.Brokers[0].OfflineDropped) == 1
	})
	for what := range st.Brokers[0].Refused {
		if strings.Contains(what, "ended") {
			t.Errorf("counted as a refusal: %q", what)
		}
	}
	if out, err := exec.Command(a.bin, "status", "-c", a.file).Output(); err != nil || !strings.Contains(string(out), "\n  ended 3 offline sessions after offline_session_expiry\n") {
		t.Errorf("cairn status (%v) has no line of the sessions ended:\n%s", err, out)
	}
	if sample := "\ncairn_broker_offline_sessions_ended_total{broker=\"local\",reason=\"after offline_session_expiry\"} 3\n"; !strings.Contains(scrapeMetrics(t, metrics), sample) {
		t.Errorf("no sample %q in the metrics", sample)
	}
	a.serving(t, "after")
}
