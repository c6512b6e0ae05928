package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sampleBolt copies testdata/ingest-bbolt.db, written by the cairn before
// the segmented log (03e3c0f): log telemetry/0 holds 30 messages in three
// group commits, telemetry/1 five, moved/0 none but continues at 5000, and
// two dead letters of telemetry/0 are stored.
func sampleBolt(t *testing.T) (db, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ingest-bbolt.db"))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	db, dir = filepath.Join(base, "ingest.db"), filepath.Join(base, "ingest")
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return db, dir
}

// TestMigrateBoltLogs moves the sample into segment files: every message
// at its offset with its topic, payload, packet id and receipt time (to
// the millisecond), the log that continued at 5000 still does, the dead
// letters are there once, redeliveries are still recognised, and the old
// file is gone. A second start finds nothing to move.
func TestMigrateBoltLogs(t *testing.T) {
	db, dir := sampleBolt(t)
	migrated, err := MigrateBoltLogs(db, dir, LogOptions{})
	if err != nil || !migrated {
		t.Fatalf("MigrateBoltLogs = %v, %v", migrated, err)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("the bbolt file is still there: %v", err)
	}
	logs, err := OpenLogs(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, _ := logs.Log("telemetry/0")
	if l.First() != 1 || l.Next() != 31 {
		t.Fatalf("telemetry/0 holds [%d, %d), want [1, 31)", l.First(), l.Next())
	}
	_, err = l.Read(1, 100, func(off uint64, m Message) error {
		n := int(off - 1)
		topic, payload := fmt.Sprintf("sensors/d%02d/telemetry", n%7), fmt.Sprintf(`{"temp":%d.5,"seq":%d}`, n%30, n)
		if m.Topic != topic || string(m.Payload) != payload || m.PacketID != uint16(n+1) || m.Received.UnixMilli() != (1_764_000_000+int64(n/10))*1000+123 {
			return fmt.Errorf("offset %d holds %+v, want %s %s packet %d", off, m, topic, payload, n+1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	logged, err := l.Logged(RedeliveryWindow)
	if err != nil || len(logged) != 30 || logged[PublishID{PacketID: 30}] != PayloadSum("sensors/d01/telemetry", []byte(`{"temp":29.5,"seq":29}`)) {
		t.Fatalf("redeliveries recognised after the move: %d, %v", len(logged), err)
	}
	if l1, _ := logs.Log("telemetry/1"); l1.First() != 1 || l1.Next() != 6 {
		t.Fatalf("telemetry/1 holds [%d, %d), want [1, 6)", l1.First(), l1.Next())
	}
	if moved, _ := logs.Log("moved/0"); moved.First() != 5000 || moved.Next() != 5000 {
		t.Fatalf("moved/0 holds [%d, %d), want to go on at 5000", moved.First(), moved.Next())
	}
	dls, err := logs.DeadLetters(0, 10)
	if err != nil || len(dls) != 2 || dls[0].Offset != 4 || string(dls[1].Payload) != "{}" || dls[1].Reason != "no value" {
		t.Fatalf("dead letters after the move: %+v, %v", dls, err)
	}
	if _, err := logs.StoreDeadLetters([]DeadLetter{dls[0].DeadLetter, dls[1].DeadLetter}); err != nil {
		t.Fatal(err)
	}
	if again, _ := logs.DeadLetters(0, 10); len(again) != 2 {
		t.Fatalf("the moved dead letters stored again on a replay: %d", len(again))
	}
	logs.Close()
	if migrated, err := MigrateBoltLogs(db, dir, LogOptions{}); migrated || err != nil {
		t.Fatalf("a second start moved something: %v, %v", migrated, err)
	}
}

// TestMigrationAfterACrash: a move cut short leaves its half-written
// directory beside the file, which the next start discards and does again;
// a move that completed but for removing the file removes it, and keeps
// the logs as they are; a file written to after the move is an error, and
// neither it nor the logs are touched.
func TestMigrationAfterACrash(t *testing.T) {
	db, dir := sampleBolt(t)
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir+".moving", "log-junk"), 0o700); err != nil {
		t.Fatal(err)
	}
	if migrated, err := MigrateBoltLogs(db, dir, LogOptions{}); !migrated || err != nil {
		t.Fatalf("after a move cut short: %v, %v", migrated, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "log-junk")); !os.IsNotExist(err) {
		t.Fatalf("the half-written move was kept: %v", err)
	}

	// The file as it was moved, as if its removal had not happened.
	if err := os.WriteFile(db, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(db, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	logs, err := OpenLogs(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := logs.Log("telemetry/0")
	if _, err := l.Append([]Message{{Topic: "after", Payload: []byte("the move")}}); err != nil {
		t.Fatal(err)
	}
	logs.Close()
	if migrated, err := MigrateBoltLogs(db, dir, LogOptions{}); migrated || err != nil {
		t.Fatalf("with the logs there and the file left: %v, %v", migrated, err)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("the file left by a completed move is still there: %v", err)
	}
	logs, _ = OpenLogs(dir, LogOptions{})
	if l, _ := logs.Log("telemetry/0"); l.Next() != 32 {
		t.Fatalf("the logs were moved again over newer ones: next %d, want 32", l.Next())
	}
	logs.Close()

	// The file again, written to since the move.
	if err := os.WriteFile(db, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if migrated, err := MigrateBoltLogs(db, dir, LogOptions{}); migrated || err == nil || !strings.Contains(err.Error(), "written to after it was moved") {
		t.Fatalf("with the logs there and a file written to since: %v, %v", migrated, err)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("a file written to since the move was not kept: %v", err)
	}
}
