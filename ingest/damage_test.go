package ingest

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDamagedGroupIsLostAlone: a byte flipped in a group of the ingest
// log, with groups after it, costs that group's messages only: Read
// returns them as one Lost message at the group's first offset, with
// the bytes that held them, and every other message; Logged leaves them
// out; the logs' health counts the range and its messages once, however
// often it is read.
func TestDamagedGroupIsLostAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ingest")
	rng := rand.New(rand.NewPCG(3, 1))
	payload := func() []byte { // random, so that no group deflates
		p := make([]byte, 64)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		return p
	}
	logs, err := OpenLogs(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := logs.Log("s/0")
	var marker []byte
	for g := range 3 {
		var group []Message
		for i := range 5 {
			group = append(group, Message{Topic: "t", Payload: payload(), PacketID: uint16(5*g + i + 1), Received: time.UnixMilli(1)})
		}
		if g == 1 {
			marker = group[2].Payload
		}
		if _, err := l.Append(group); err != nil {
			t.Fatal(err)
		}
	}
	logs.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, logDir("s/0"), "*.seg"))
	data, _ := os.ReadFile(segs[0])
	at := bytes.Index(data, marker)
	if at < 0 {
		t.Fatal("the middle group's payload is not in the segment as written")
	}
	data[at+10] ^= 0x01
	os.WriteFile(segs[0], data, 0o600)

	logs, err = OpenLogs(dir, LogOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, _ = logs.Log("s/0")
	for range 2 { // the second read meets the damage again: counted once
		var got []string
		next, err := l.Read(1, 100, func(off uint64, m Message) error {
			if m.Lost != nil {
				got = append(got, fmt.Sprintf("%d: lost %d (%s, %d bytes)", off, m.Lost.Count, m.Lost.Reason, len(m.Payload)))
			} else {
				got = append(got, fmt.Sprint(off))
			}
			return nil
		})
		if err != nil || next != 16 || len(got) != 11 || !strings.HasPrefix(got[5], "6: lost 5 (") || !strings.Contains(got[5], "checksum mismatch") {
			t.Fatalf("read to %d, %v:\n%s", next, err, strings.Join(got, "\n"))
		}
	}
	if h := logs.Health(); h.DamagedRecords != 1 || h.LostMessages != 5 || !strings.Contains(h.LastDamage, segs[0]) {
		t.Fatalf("health %+v, want one range of 5 messages lost in %s", h, segs[0])
	}
	logged, err := l.Logged(100)
	if err != nil || len(logged) != 10 {
		t.Fatalf("Logged: %d packets, %v; want the 10 that verify", len(logged), err)
	}
	for p := uint16(6); p <= 10; p++ {
		if _, ok := logged[PublishID{PacketID: p}]; ok {
			t.Fatalf("Logged holds packet %d, which was lost", p)
		}
	}
}
