package ingest

import (
	"fmt"
	"testing"
)

// TestRejectedKnowsWhereItCameFrom stores dead letters of an operator whose
// records carry their origin: each gets its source log, offset and topic,
// and storing them again, as a replay after a crash rejects them again,
// stores nothing; also after the store is opened again.
func TestRejectedKnowsWhereItCameFrom(t *testing.T) {
	dir := t.TempDir()
	logs, err := OpenLogs(dir, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := logs.Log("other/0") // a log opened first: indices are not all 1
	if _, err := other.Append([]Message{{Topic: "x", Payload: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	l, _ := logs.Log("readings/1")
	var msgs []Message
	for i := range 5 {
		msgs = append(msgs, Message{Topic: fmt.Sprintf("plant/d%d/t", i), Payload: []byte("{}")})
	}
	first, err := l.Append(msgs)
	if err != nil {
		t.Fatal(err)
	}
	reject := func() {
		for _, off := range []uint64{first + 1, first + 3} {
			if err := logs.StoreRejected(DeadLetter{Operator: "humid/0", Reason: "no humidity"}, l.Origin(off)); err != nil {
				t.Fatal(err)
			}
		}
		if err := logs.StoreRejected(DeadLetter{Operator: "humid/0", Reason: "origin not known"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, want int) {
		t.Helper()
		dls, err := logs.DeadLetters(0, 100)
		if err != nil || len(dls) != want {
			t.Fatalf("%s: %d dead letters (%v), want %d: %+v", when, len(dls), err, want, dls)
		}
		for i, off := range []uint64{first + 1, first + 3} {
			if dl := dls[i]; dl.Source != "readings/1" || dl.Offset != off || dl.Topic != fmt.Sprintf("plant/d%d/t", off-first) {
				t.Fatalf("%s: dead letter %+v, want readings/1 at %d", when, dl, off)
			}
		}
	}
	reject()
	check("stored", 3)
	reject() // a replay: the unknown origin's is stored again
	check("stored again", 4)
	logs.Close()
	if logs, err = OpenLogs(dir, LogOptions{}); err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	l, _ = logs.Log("readings/1")
	reject()
	check("after a restart", 5)
	if _, _, _, ok := logs.Origin(l.Origin(first) + 1<<originOffsetBits); ok {
		t.Fatal("the origin of a log never opened resolves")
	}
}
