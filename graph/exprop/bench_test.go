package exprop

import (
	"testing"

	"github.com/expr-lang/expr"

	"github.com/cairn-edge/cairn/graph"
)

// BenchmarkExpressions evaluates filters and maps of the kinds pipelines
// write, on time, the value and a payload field, one record per
// iteration, as the operators do.
func BenchmarkExpressions(b *testing.B) {
	fields := Fields{"humidity": Number}
	for _, c := range []struct {
		name, src string
		filter    bool
	}{
		{"filter-time", "time > 1767225600000 and value > 20", true},
		{"filter-fields", "value > 20 and humidity < 90", true},
		{"map-time", "time % 1000", false},
		{"map-arithmetic", "value * 1.8 + 32", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			compile := CompileMap
			if c.filter {
				compile = CompileFilter
			}
			p, err := compile(c.src, fields)
			if err != nil {
				b.Fatal(err)
			}
			r := graph.Record{Key: "d", Time: 1_772_323_230_500, Value: 21.5, Payload: map[string]any{"humidity": 40.0}}
			for b.Loop() {
				if _, err := expr.Run(p, env(&r)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
