package ingest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestLogAppendReadTruncateReopen: messages appended in groups read back
// from any offset, also from inside a group and across a reopen;
// truncation deletes whole segments and keeps the redelivery window; the
// newest messages' packet ids and sums are found again after a reopen.
func TestLogAppendReadTruncateReopen(t *testing.T) {
	dir := t.TempDir()
	opts := LogOptions{SegmentBytes: 4 << 10}
	db, err := OpenLogs(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := db.Log("src/0")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for i := range 10 {
		msgs = append(msgs, Message{Topic: fmt.Sprintf("sensors/d%d/t", i%3), Payload: []byte(fmt.Sprint(i)), PacketID: uint16(i + 1),
			Received: time.UnixMilli(int64(1000 + i/6))})
	}
	first, err := l.Append(msgs[:6])
	if err != nil || first != 1 {
		t.Fatalf("Append = %d, %v; want offset 1", first, err)
	}
	if first, _ := l.Append(msgs[6:]); first != 7 {
		t.Fatalf("second Append at %d, want 7", first)
	}
	read := func(from uint64, max int) string {
		var got []string
		next, err := l.Read(from, max, func(off uint64, m Message) error {
			got = append(got, fmt.Sprintf("%d:%s@%s/%d", off, m.Payload, m.Topic, m.Received.UnixMilli()))
			return nil
		})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s next=%d", strings.Join(got, " "), next)
	}
	if got := read(8, 100); got != "8:7@sensors/d1/t/1001 9:8@sensors/d2/t/1001 10:9@sensors/d0/t/1001 next=11" {
		t.Fatalf("read from 8: %s", got)
	}
	// A read that stops inside a group, and the one that goes on.
	if got := read(2, 2); got != "2:1@sensors/d1/t/1000 3:2@sensors/d2/t/1000 next=4" {
		t.Fatalf("read 2 from 2: %s", got)
	}
	if got := read(4, 4); got != "4:3@sensors/d0/t/1000 5:4@sensors/d1/t/1000 6:5@sensors/d2/t/1000 7:6@sensors/d0/t/1001 next=8" {
		t.Fatalf("read 4 from 4: %s", got)
	}
	// Truncation keeps the redelivery window: here, everything.
	if err := l.Truncate(5); err != nil || l.First() != 1 {
		t.Fatalf("Truncate(5) = %v; first %d, want 1", err, l.First())
	}
	// Groups of 100 messages whose payloads do not deflate: segments of 4
	// KiB hold a few hundred messages.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2 * RedeliveryWindow / 100 {
		group := make([]Message, 100)
		for i := range group {
			group[i].Payload = binary.LittleEndian.AppendUint64(nil, rng.Uint64())
		}
		if _, err := l.Append(group); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Truncate(5000); err != nil || l.First() > 5000 || l.First() < 4500 {
		t.Fatalf("Truncate(5000) = %v; first %d, want the start of the segment holding 5000", err, l.First())
	}
	if got := read(1, 10); !strings.Contains(got, "below the log's first retained offset") {
		t.Fatalf("read below the truncation: %s", got)
	}
	if err := l.Truncate(1 << 40); err != nil { // as far as allowed: the log must still know where it is
		t.Fatal(err)
	}
	end := l.Next()
	if l.First() > end-RedeliveryWindow {
		t.Fatalf("after truncating all it may, the log holds [%d, %d): less than the redelivery window", l.First(), end)
	}
	kept := l.First()
	db.Close()
	if db, err = OpenLogs(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, _ = db.Log("src/0")
	if l.First() != kept || l.Next() != end {
		t.Fatalf("after truncating and reopening the log holds [%d, %d), want [%d, %d)", l.First(), l.Next(), kept, end)
	}
	if first, err := l.Append(msgs[:3]); err != nil || first != end {
		t.Fatalf("Append after reopen at %d (%v), want %d", first, err, end)
	}
	logged, err := l.Logged(2)
	if err != nil || len(logged) != 2 || logged[PublishID{PacketID: 2}] != PayloadSum(msgs[1].Topic, msgs[1].Payload) || logged[PublishID{PacketID: 3}] != PayloadSum(msgs[2].Topic, msgs[2].Payload) {
		t.Fatalf("Logged(2) = %v, %v; want packet ids 2 and 3", logged, err)
	}
}

// TestLargeMessagesReadBack: messages larger than a group's usual size,
// alone or several in one Append, and alike enough to deflate, read back
// whole, also after reopening.
func TestLargeMessagesReadBack(t *testing.T) {
	dir := t.TempDir()
	logs, err := OpenLogs(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := logs.Log("src/0")
	if err != nil {
		t.Fatal(err)
	}
	big := func(n, seed int) []byte { return bytes.Repeat([]byte(fmt.Sprintf(`{"reading":%d}`, seed)), n/14) }
	sent := []Message{{Topic: "big/0", Payload: big(3<<20, 0), PacketID: 1}}
	if _, err := l.Append(sent); err != nil {
		t.Fatal(err)
	}
	var group []Message
	for i := range 5 {
		group = append(group, Message{Topic: fmt.Sprintf("big/%d", i+1), Payload: big(300<<10, i+1), PacketID: uint16(i + 2)})
	}
	if _, err := l.Append(group); err != nil {
		t.Fatal(err)
	}
	sent = append(sent, group...)
	check := func(l *Log) {
		t.Helper()
		var got []Message
		if _, err := l.Read(1, 100, func(_ uint64, m Message) error {
			got = append(got, Message{Topic: m.Topic, Payload: bytes.Clone(m.Payload), PacketID: m.PacketID})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(sent) {
			t.Fatalf("read %d messages, want %d", len(got), len(sent))
		}
		for i, m := range got {
			if m.Topic != sent[i].Topic || m.PacketID != sent[i].PacketID || !bytes.Equal(m.Payload, sent[i].Payload) {
				t.Fatalf("message %d reads back as %s (%d bytes), want %s (%d bytes)", i, m.Topic, len(m.Payload), sent[i].Topic, len(sent[i].Payload))
			}
		}
		if logged, err := l.Logged(RedeliveryWindow); err != nil || len(logged) != len(sent) {
			t.Fatalf("Logged = %d packet ids, %v; want %d", len(logged), err, len(sent))
		}
	}
	check(l)
	logs.Close()
	if logs, err = OpenLogs(dir, LogOptions{}); err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, _ = logs.Log("src/0")
	check(l)
}
