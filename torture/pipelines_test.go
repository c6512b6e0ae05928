//go:build torture

package torture

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// message is one published message. Its topic is in/<input>/<key>; its
// payload carries the sequence number (also the record's value) and the
// event time.
type message struct {
	input string // the source's id
	key   string
	seq   int   // per input, from 0
	ts    int64 // event time, ms since the epoch
}

func (m message) topic() string { return "in/" + m.input + "/" + m.key }

func (m message) payload() []byte {
	return fmt.Appendf(nil, `{"seq":%d,"ts":%d,"v":%d}`, m.seq, m.ts, m.seq)
}

// pipeline is a pipeline under torture: its YAML, the messages it is fed
// and the exact check of its output.
type pipeline struct {
	name string
	// rate is how many messages a second the publisher sends.
	rate int
	// sources are the ids of its MQTT sources, subscribed to in/<id>/+.
	sources []string
	// body is the YAML after the agent, brokers and checkpoints sections;
	// it names the broker "mq" and sinks to out/{key}.
	body string
	// stableIDs says its sink's input is ordered (graph.TaskInfo), so that
	// in exactly-once mode outputs published again after a fallback to
	// an older checkpoint keep their ids: the store is then damaged too.
	stableIDs bool
	// message is the i-th message published; a pure function of i.
	message func(i int) message
	// check compares the distinct outputs, in arrival order, with those
	// that the published messages must produce.
	check func(published []message, outs []output) tally
}

// tally is a check's verdict.
type tally struct {
	outputs    int // distinct ids
	lost       int // expected outputs missing, or computed from too little input
	duplicated int // an output under two ids, or computed from input counted twice
	outOfOrder int // a first copy arriving after a later output of its sequence
	wrong      int // outputs that match nothing expected
	examples   []string
}

func (t *tally) problem(kind *int, format string, args ...any) {
	*kind++
	if len(t.examples) < 10 {
		t.examples = append(t.examples, fmt.Sprintf(format, args...))
	}
}

const (
	epoch      int64 = 1_700_000_000_000 // event time of the first message of an input
	skew             = 10                // the fast input sends skew messages per message of the slow one
	fastStep         = 5                 // ms of event time between fast messages
	slowStep         = fastStep * skew   // so both inputs move through event time together
	joinWindow       = 250               // ms, tumbling: 50 fast and 5 slow messages
	joinKeys         = 5                 // so each window has each key on both inputs
)

// skewed interleaves two inputs: skew messages of "fast", then one of
// "slow", and so on.
func skewed(i int) (input string, seq int) {
	block, pos := i/(skew+1), i%(skew+1)
	if pos < skew {
		return "fast", block*skew + pos
	}
	return "slow", block
}

func source(id string, eventTime bool) string {
	s := fmt.Sprintf(`  - id: %s
    broker: mq
    topics:
      - in/%s/{dev}
    key: dev
    value: v
`, id, id)
	if eventTime {
		s += "    time: ts\n"
	}
	return s
}

const sink = `sinks:
  - id: out
    input: %s
    broker: mq
    topic: out/{key}
`

var pipelines = []pipeline{
	{
		// Per key, the running counts must be 1, 2, …, N, each once, in
		// order.
		name:      "count",
		rate:      1000,
		sources:   []string{"readings"},
		stableIDs: true,
		body: "sources:\n" + source("readings", false) + `operators:
  - id: counts
    type: count
    inputs: [readings]
    key_by: key
    parallelism: 2
` + fmt.Sprintf(sink, "counts") + "    parallelism: 2\n",
		message: func(i int) message { return message{input: "readings", key: fmt.Sprintf("d%02d", i*7%16), seq: i} },
		check: func(published []message, outs []output) tally {
			want := make(map[string][2]int)
			for _, m := range published {
				want[m.key] = [2]int{1, want[m.key][1] + 1}
			}
			return checkSequences(want, outs, true)
		},
	},
	{
		// Every sequence number of each input must come out once, in
		// order per input.
		name:    "union",
		rate:    1100,
		sources: []string{"fast", "slow"},
		body: "sources:\n" + source("fast", false) + source("slow", false) + `operators:
  - id: both
    type: union
    inputs: [fast, slow]
` + fmt.Sprintf(sink, "both"),
		message: func(i int) message {
			in, seq := skewed(i)
			return message{input: in, key: in, seq: seq}
		},
		check: func(published []message, outs []output) tally {
			want := make(map[string][2]int)
			for _, m := range published {
				want[m.key] = [2]int{0, m.seq}
			}
			return checkSequences(want, outs, false)
		},
	},
	{
		// Per key and tumbling window, one result with the sums and counts
		// of both inputs; the windows of a key in order.
		name:    "join",
		rate:    1100,
		sources: []string{"fast", "slow"},
		body: "sources:\n" + source("fast", true) + source("slow", true) + fmt.Sprintf(`operators:
  - id: joined
    type: join
    inputs: [fast, slow]
    key_by: key
    parallelism: 2
    window: {kind: tumbling, size: %dms}
    aggregate: sum
`, joinWindow) + fmt.Sprintf(sink, "joined"),
		message: func(i int) message {
			in, seq := skewed(i)
			step := int64(fastStep)
			if in == "slow" {
				step = slowStep
			}
			return message{input: in, key: fmt.Sprintf("k%d", seq%joinKeys), seq: seq, ts: epoch + int64(seq)*step}
		},
		check: checkJoin,
	},
}

// checkSequences checks outputs that must carry, per key k, each value of
// want[k] = [lo, hi] exactly once, in increasing order. A value above hi is
// input counted twice when overcount (a running count), else wrong.
func checkSequences(want map[string][2]int, outs []output, overcount bool) tally {
	t := tally{outputs: len(outs)}
	seen := make(map[string]map[int]string) // key → value → id
	top := make(map[string]int)             // key → highest value so far
	for _, o := range outs {
		r, ok := want[o.Key]
		v := int(o.Value)
		switch {
		case !ok || float64(v) != o.Value || v < r[0] || v > r[1] && !overcount:
			t.problem(&t.wrong, "%s: %s=%v is no expected output", o.ID, o.Key, o.Value)
			continue
		case v > r[1]:
			t.problem(&t.duplicated, "%s: %s=%d is above the last expected value %d: input counted twice", o.ID, o.Key, v, r[1])
			continue
		}
		if seen[o.Key] == nil {
			seen[o.Key] = make(map[int]string)
		}
		if first, dup := seen[o.Key][v]; dup {
			t.problem(&t.duplicated, "%s=%d came as %s and as %s", o.Key, v, first, o.ID)
			continue
		}
		seen[o.Key][v] = o.ID
		if h, ok := top[o.Key]; ok && v < h {
			t.problem(&t.outOfOrder, "%s: %s=%d came after %s=%d", o.ID, o.Key, v, o.Key, h)
		}
		if h, ok := top[o.Key]; !ok || v > h {
			top[o.Key] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		r := want[k]
		for v := r[0]; v <= r[1]; v++ {
			if _, ok := seen[k][v]; !ok {
				t.problem(&t.lost, "%s=%d never came", k, v)
			}
		}
	}
	return t
}

// joinResult is what a window join's output says of its window, besides
// its key and value (version 2 of the sinks' output).
type joinResult struct {
	Start      int64   `json:"start"`
	End        int64   `json:"end"`
	Left       float64 `json:"left"`
	Right      float64 `json:"right"`
	LeftCount  int64   `json:"left_count"`
	RightCount int64   `json:"right_count"`
	Aggregate  string  `json:"aggregate"`
}

// checkJoin checks the window join: a window [s, s+joinWindow) of a key
// fires once the watermark, the smaller of the inputs' newest event times
// less one (no out-of-orderness), reaches its last millisecond, if both
// inputs have records in it; its result holds each input's sum of values
// and count.
func checkJoin(published []message, outs []output) tally {
	type side struct {
		sum   float64
		count int64
	}
	type window struct {
		key   string
		start int64
	}
	inputs := map[string]int{"fast": 0, "slow": 1} // the join's inputs, left and right
	want := make(map[window]*[2]side)
	newest := [2]int64{-1, -1}
	for _, m := range published {
		in := inputs[m.input]
		w := window{m.key, m.ts - m.ts%joinWindow}
		if want[w] == nil {
			want[w] = new([2]side)
		}
		want[w][in].sum += float64(m.seq)
		want[w][in].count++
		newest[in] = max(newest[in], m.ts)
	}
	watermark := min(newest[0], newest[1]) - 1
	for w, s := range want {
		if w.start+joinWindow-1 > watermark || s[0].count == 0 || s[1].count == 0 {
			delete(want, w) // never fires
		}
	}

	t := tally{outputs: len(outs)}
	seen := make(map[window]string)
	top := make(map[string]int64)
	for _, o := range outs {
		var r joinResult
		if err := json.Unmarshal(o.Message, &r); err != nil || r.Aggregate != "sum" {
			t.problem(&t.wrong, "%s: %s: %v; want the sum's details", o.ID, o.Message, err)
			continue
		}
		w := window{o.Key, r.Start}
		exp, ok := want[w]
		if !ok || r.End != r.Start+joinWindow {
			t.problem(&t.wrong, "%s: %s window [%d, %d) should not have fired", o.ID, o.Key, r.Start-epoch, r.End-epoch)
			continue
		}
		if first, dup := seen[w]; dup {
			t.problem(&t.duplicated, "%s window %d came as %s and as %s", o.Key, r.Start-epoch, first, o.ID)
			continue
		}
		seen[w] = o.ID
		if h, ok := top[o.Key]; ok && r.Start < h {
			t.problem(&t.outOfOrder, "%s: %s window %d came after window %d", o.ID, o.Key, r.Start-epoch, h-epoch)
		}
		top[o.Key] = max(top[o.Key], r.Start)
		switch got := fmt.Sprintf("left %v/%d right %v/%d", r.Left, r.LeftCount, r.Right, r.RightCount); {
		case r.LeftCount < exp[0].count || r.RightCount < exp[1].count:
			t.problem(&t.lost, "%s: %s window %d has %s, want %v/%d and %v/%d", o.ID, o.Key, r.Start-epoch, got, exp[0].sum, exp[0].count, exp[1].sum, exp[1].count)
		case r.LeftCount > exp[0].count || r.RightCount > exp[1].count:
			t.problem(&t.duplicated, "%s: %s window %d has %s, want %v/%d and %v/%d: input counted twice", o.ID, o.Key, r.Start-epoch, got, exp[0].sum, exp[0].count, exp[1].sum, exp[1].count)
		case r.Left != exp[0].sum || r.Right != exp[1].sum || o.Value != r.Left-r.Right:
			t.problem(&t.wrong, "%s: %s window %d has %s (value %v), want %v and %v", o.ID, o.Key, r.Start-epoch, got, o.Value, exp[0].sum, exp[1].sum)
		}
	}
	var missing []window
	for w := range want {
		if _, ok := seen[w]; !ok {
			missing = append(missing, w)
		}
	}
	slices.SortFunc(missing, func(a, b window) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.key, b.key)) })
	for _, w := range missing {
		t.problem(&t.lost, "%s window %d never came", w.key, w.start-epoch)
	}
	return t
}
