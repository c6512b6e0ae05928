//go:build torture

package torture

import (
	"fmt"
	"testing"
)

// The checks must be able to fail: each case breaks the right output in
// one way and expects exactly that count.

func TestTortureCheckSequences(t *testing.T) {
	out := func(id, key string, v float64) output { return output{ID: id, Key: key, Value: v} }
	want := map[string][2]int{"a": {1, 3}, "b": {1, 1}}
	for _, c := range []struct {
		name      string
		outs      []output
		overcount bool
		want      tally
	}{
		{"right", []output{out("1", "a", 1), out("2", "b", 1), out("3", "a", 2), out("4", "a", 3)}, true, tally{}},
		{"lost", []output{out("1", "a", 1), out("3", "a", 3), out("2", "b", 1)}, true, tally{lost: 1}},
		{"duplicated", []output{out("1", "a", 1), out("2", "a", 1), out("3", "a", 2), out("4", "a", 3), out("5", "b", 1)}, true, tally{duplicated: 1}},
		{"counted twice", []output{out("1", "a", 1), out("3", "a", 2), out("4", "a", 3), out("5", "a", 4), out("2", "b", 1)}, true, tally{duplicated: 1}},
		{"beyond", []output{out("1", "a", 1), out("3", "a", 2), out("4", "a", 3), out("5", "a", 4), out("2", "b", 1)}, false, tally{wrong: 1}},
		{"out of order", []output{out("1", "a", 2), out("3", "a", 1), out("4", "a", 3), out("2", "b", 1)}, true, tally{outOfOrder: 1}},
		{"unknown key", []output{out("1", "a", 1), out("2", "a", 2), out("3", "a", 3), out("4", "b", 1), out("5", "c", 1)}, true, tally{wrong: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := checkSequences(want, c.outs, c.overcount)
			c.want.outputs = len(c.outs)
			if got.outputs != c.want.outputs || got.lost != c.want.lost || got.duplicated != c.want.duplicated ||
				got.outOfOrder != c.want.outOfOrder || got.wrong != c.want.wrong {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestTortureCheckJoin(t *testing.T) {
	at := func(in, key string, seq int, ms int64) message {
		return message{input: in, key: key, seq: seq, ts: epoch + ms}
	}
	// Windows of 250 ms. The newest event times are 600 on both inputs,
	// so the watermark is 599: windows 0 and 1 fire, window 2 does not.
	published := []message{
		at("fast", "k0", 1, 10), at("fast", "k0", 2, 20), at("slow", "k0", 3, 30),
		at("fast", "k1", 4, 40), at("slow", "k1", 5, 50),
		at("slow", "k0", 7, 260), at("fast", "k0", 6, 300),
		at("fast", "k0", 8, 600), at("slow", "k0", 9, 600),
	}
	res := func(id, key string, start int64, l float64, lc int64, r float64, rc int64) output {
		return output{ID: id, Key: key, Value: l - r, Message: []byte(fmt.Sprintf(
			`{"id":%q,"v":2,"key":%q,"value":%v,"aggregate":"sum","start":%d,"end":%d,"left":%v,"right":%v,"left_count":%d,"right_count":%d}`,
			id, key, l-r, epoch+start, epoch+start+joinWindow, l, r, lc, rc))}
	}
	k0w0, k1w0, k0w1 := res("1", "k0", 0, 3, 2, 3, 1), res("2", "k1", 0, 4, 1, 5, 1), res("3", "k0", 250, 6, 1, 7, 1)
	for _, c := range []struct {
		name string
		outs []output
		want tally
	}{
		{"right", []output{k0w0, k1w0, k0w1}, tally{}},
		{"lost", []output{k0w0, k0w1}, tally{lost: 1}},
		{"too little input", []output{res("1", "k0", 0, 1, 1, 3, 1), k1w0, k0w1}, tally{lost: 1}},
		{"duplicated", []output{k0w0, k1w0, res("9", "k0", 0, 3, 2, 3, 1), k0w1}, tally{duplicated: 1}},
		{"counted twice", []output{res("1", "k0", 0, 5, 3, 3, 1), k1w0, k0w1}, tally{duplicated: 1}},
		{"out of order", []output{k0w1, k1w0, k0w0}, tally{outOfOrder: 1}},
		{"wrong sum", []output{k0w0, res("2", "k1", 0, 5, 1, 5, 1), k0w1}, tally{wrong: 1}},
		{"fired early", []output{k0w0, k1w0, k0w1, res("4", "k0", 500, 8, 1, 9, 1)}, tally{wrong: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := checkJoin(published, c.outs)
			c.want.outputs = len(c.outs)
			if got.outputs != c.want.outputs || got.lost != c.want.lost || got.duplicated != c.want.duplicated ||
				got.outOfOrder != c.want.outOfOrder || got.wrong != c.want.wrong {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
