package config

import (
	"strings"
	"testing"
)

// TestEventTimeNeedsASourceWithTime: an operator in event time (a
// window or windowed join in event time, an interval join) that reads,
// however far upstream, a source without time is refused where the file
// defines it: that source sends no watermarks, so the operator's event
// time would never move — its windows would never close, an interval
// join would keep every record. In processing time, or over sources with
// time or simulators, it is not.
func TestEventTimeNeedsASourceWithTime(t *testing.T) {
	const sources = `brokers:
  b: {url: 'tcp://b:1883'}
sources:
  - {id: timed, broker: b, topics: ["t/{device}"], time: ts}
  - {id: timeless, broker: b, topics: ["u/{device}"]}
  - {id: sim, simulator: {devices: 1, rate: 1}}
operators:
`
	window := func(id, in, time string) string {
		return "  - {id: " + id + ", type: window, inputs: [" + in + "], key_by: key, window: {kind: tumbling, size: 1s" + time + "}, aggregate: avg}\n"
	}
	never := func(line, op, src string) string {
		return "e.yaml:" + line + `:5: operator "` + op + `" works in event time, but source ` + src + ", whose records it reads, has no time: its event time would never move, and "
	}
	for _, tc := range []struct{ ops, want string }{
		{window("w", "timed", ""), ""},
		{window("w", "sim", ""), ""},
		{window("w", "timeless", ", time: processing"), ""},
		{window("w", "timeless", ""), never("8", "w", "timeless") + "its windows would never close; or write window.time: processing"},
		{window("w", "timeless", ", time: event"), never("8", "w", "timeless")},
		// Upstream, through operators of every event-time kind or none.
		{"  - {id: u, type: union, inputs: [timed, timeless]}\n" + window("w", "u", ""), never("9", "w", "timeless")},
		{"  - {id: m, type: map, inputs: [timeless], expr: value * 2}\n  - {id: u, type: union, inputs: [timed, m]}\n" + window("w", "u", ""), never("10", "w", "timeless")},
		{window("p", "timeless", ", time: processing") + window("w", "p", ""), never("9", "w", "timeless")},
		{window("a", "timed", "") + window("w", "a", ""), ""},
		{"  - {id: j, type: join, inputs: [timed, timeless], key_by: key, window: {kind: tumbling, size: 1s}, aggregate: sum}\n", never("8", "j", "timeless")},
		{"  - {id: j, type: interval_join, inputs: [timed, timeless], key_by: key, within: {after: 1s}}\n", never("8", "j", "timeless") + "it would keep every record"},
		{"  - {id: j, type: interval_join, inputs: [timed, sim], key_by: key, within: {after: 1s}}\n", ""},
		{"  - {id: j, type: lookup_join, inputs: [timed, timeless], key_by: key}\n", ""}, // in the order records arrive
	} {
		_, errs := Parse("e.yaml", []byte(sources+tc.ops), env(nil))
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s refused: %v", tc.ops, errs)
		case tc.want != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.want)):
			t.Errorf("%s\ngave %v\nwant %s...", tc.ops, errs, tc.want)
		}
	}
}
