package config

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-edge/cairn/graph"
)

// TestWordsTakeAnyCase: every field that takes one of a few words takes
// each of them in any mix of cases, and runs it as the word; a word it
// does not know stays an error at the field that shows it as written.
func TestWordsTakeAnyCase(t *testing.T) {
	type field struct {
		path  string
		words []string
		got   func(*Config) string
	}
	windowKindNames := func() (names []string) {
		for _, k := range windowKinds {
			names = append(names, k.name)
		}
		return names
	}()
	fields := []field{
		{"agent.log_format", logFormats, func(c *Config) string { return c.Agent.LogFormat }},
		{"sources[].format", []string{"json"}, func(c *Config) string { return c.Sources[0].Format }}, // raw needs a raw pipeline
		{"operators[].on_error", onErrors, func(c *Config) string { return c.Operators[0].OnError }},
		{"operators[].window.time", windowTimes, func(c *Config) string { return c.Operators[0].Window.Time }},
		{"operators[].window.kind", windowKindNames, func(c *Config) string { return c.Operators[0].Window.Kind }},
		{"operators[].aggregate", []string{"count", "sum", "min", "max", "avg", "first", "last"},
			func(c *Config) string { a, _ := graph.ParseAggregate(c.Operators[0].Aggregate); return a.String() }},
		{"sinks[].output.time", outputTimes, func(c *Config) string { return c.Sinks[0].Output.Time }},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	mixCase := func(w string) string {
		b := []byte(w)
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			}
		}
		return string(b)
	}
	for _, f := range fields {
		for _, w := range f.words {
			for range 3 {
				written := mixCase(w)
				file := wordFile(f.path, written)
				c, errs := Parse("w.yaml", []byte(file), env(nil))
				if len(errs) > 0 {
					t.Errorf("%s: %s: %v", f.path, written, errs)
					continue
				}
				if got := f.got(c); got != w {
					t.Errorf("%s: %s runs as %q, want %q", f.path, written, got, w)
				}
			}
		}
		file := wordFile(f.path, "Nonsuch")
		_, errs := Parse("w.yaml", []byte(file), env(nil))
		line := 1 + strings.Count(file[:strings.Index(file, "Nonsuch")], "\n")
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), "Nonsuch") || !strings.HasPrefix(errs[0].Error(), "w.yaml:"+strconv.Itoa(line)+":") {
			t.Errorf("%s: Nonsuch: %v; want an error at line %d that shows it", f.path, errs, line)
		}
	}
}

// wordFile is zeroFile with the field at path written as word, where the
// window's kind and the aggregate, which zeroFile's operator writes, are
// replaced rather than given twice.
func wordFile(path, word string) string {
	switch path {
	case "operators[].window.kind": // with what each kind needs
		return strings.Replace(zeroFile("agent.log_format", "text"), "kind: tumbling", "kind: "+word+", slide: 1s, gap: 1s", 1)
	case "operators[].aggregate":
		return strings.Replace(zeroFile("agent.log_format", "text"), "aggregate: avg", "aggregate: "+word, 1)
	}
	return zeroFile(path, word)
}
