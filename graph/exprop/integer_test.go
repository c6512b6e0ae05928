package exprop

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/expr-lang/expr"

	"github.com/cairn-edge/cairn/graph"
)

// at is the record's time in issue 35's cases, 2026-03-01T00:00:30.500Z
// in milliseconds: a 32-bit int holds it as -1498262748.
const at = 1772323230500

// TestTimeIsInt64 holds issue 35's cases, which armv7 got wrong while
// expr computed integers in Go's int, 32 bits there: each through the
// operator a pipeline would run it in.
func TestTimeIsInt64(t *testing.T) {
	for _, tc := range []struct {
		src  string
		time int64
		want float64
	}{
		{"time % 1000", at, 500},
		{"time + 1", at, at + 1},
		{"time - 1767225600000", at, 5097630500},
		{"time * 2", at, 2 * at},
		{"-time", at, -at},
		{"time % 1000", -at, -500},
	} {
		m, err := Map(tc.src, "", nil)
		if err != nil {
			t.Error(err)
			continue
		}
		got, err := run(t, m, graph.Record{Key: "k", Time: tc.time})
		if err != nil || len(got) != 1 || got[0].Value != tc.want {
			t.Errorf("map %s at %d gave %v (%v), want %v", tc.src, tc.time, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		src  string
		time int64
		keep bool
	}{
		{"time > 0", at, true},
		{"time > 0", -at, false},
		{"time > 1767225600000", at, true},
		{"time > 1767225600000", 1767225599999, false},
		{"time >= 1772323230500 && time < 1772323231000", at, true},
		{"time == 1772323230500", at, true},
		{"time == -1498262748", at, false},
		{"time in 1772323230000..1772323231000", at, true},
		{"time in [1772323230500, 0]", at, true},
		{"time in [-1498262748, 0]", at, false},
	} {
		f, err := Filter(tc.src, "", Fields{})
		if err != nil {
			t.Errorf("filter %s: %v", tc.src, err)
			continue
		}
		got, err := run(t, f, graph.Record{Key: "k", Time: tc.time})
		if err != nil || (len(got) == 1) != tc.keep {
			t.Errorf("filter %s at %d kept %v (%v), want %v", tc.src, tc.time, got, err, tc.keep)
		}
	}
	// The literals a 64-bit int holds compile everywhere; one more does not.
	for _, src := range []string{"time > 1767225600000", "time < 9223372036854775807", "time > -9223372036854775807", "time != 0x7fffffffffffffff"} {
		if _, err := CompileFilter(src, Fields{}); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	if _, err := CompileFilter("time < 9223372036854775808", Fields{}); err == nil {
		t.Error("a literal over 2^63-1 compiled")
	}
}

var update = flag.Bool("update", false, "write testdata/integers.golden from this platform's results")

// TestIntegerCorpus evaluates a generated corpus of integer expressions
// over records whose times are near now, near the limits of 32 and 64
// bits and negative, and compares every result, type and value, or error,
// with testdata/integers.golden. The file is written on amd64 (go test
// ./graph/exprop -run TestIntegerCorpus -update); run under qemu-arm and
// qemu-aarch64 the test is the check that every platform computes alike.
func TestIntegerCorpus(t *testing.T) {
	var got bytes.Buffer
	fmt.Fprintln(&got, "# Each expression of TestIntegerCorpus, then what it gives for each record:")
	for _, r := range corpusRecords() {
		fmt.Fprintf(&got, "#   time %d, value %s, key %q\n", r.Time, strconv.FormatFloat(r.Value, 'g', -1, 64), r.Key)
	}
	for _, src := range corpusExpressions() {
		fmt.Fprintf(&got, "%s\n\t%s\n", src, evaluate(src))
	}
	const golden = "testdata/integers.golden"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	g, w := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	if len(g) != len(w) {
		t.Fatalf("%d lines, %s has %d: the corpus changed; write it again with -update (on amd64)", len(g), golden, len(w))
	}
	bad := 0
	for i := range g {
		if g[i] != w[i] {
			if bad++; bad <= 20 {
				t.Errorf("%s:%d: %s\n got %s\nwant %s", golden, i+1, g[max(i-1, 0)], g[i], w[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d lines differ", bad, len(g))
	}
}

// corpusRecords are the records each expression of the corpus sees.
func corpusRecords() []graph.Record {
	times := []int64{
		0, 1, 500, -1, at, 1767225600500, 1767225599999, -at,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, 1<<32 + 500,
		1<<53 + 1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1,
	}
	values := []float64{0, 1.5, -2.25, 3e9, 1e19, -0.5, 1767225600.5}
	recs := make([]graph.Record, len(times))
	for i, tm := range times {
		recs[i] = graph.Record{Key: "sensor-" + strconv.Itoa(i), Time: tm, Value: values[i%len(values)]}
	}
	return recs
}

// corpusExpressions are chosen cases, then expressions generated from a
// fixed seed: operands that are integers (time, literals up to 2^63-1,
// len, int, abs, min, max) or floats, joined by arithmetic and
// comparisons.
func corpusExpressions() []string {
	exprs := []string{
		"time", "-time", "time % 1000", "time + 1", "time - 1", "time > 0", "time > 1767225600000",
		"time * 1000", "time / 1000", "time ** 2", "time % -7", "time % 0", "time / 0",
		"9223372036854775807", "9223372036854775807 + 1", "-9223372036854775807 - 1", "-9223372036854775807 - 2",
		"time + 9223372036854775807", "time - 9223372036854775807", "time * time", "-9223372036854775807 - 1 == time",
		"(-9223372036854775807 - 1) % -1", "time % -1", "abs(time)", "abs(-9223372036854775807 - 1)",
		"min(time, 0)", "max(time, 4294967296)", "min(time, value)", "max(time, 1767225600000, -1)",
		"int(value)", "int(time / 1000)", "int(time * 1.0)", "int('1767225600500')", "int('9223372036854775807')",
		"int('9223372036854775808')", "int(1e19)", "int(-9.2233720368547758e18)", "int(0 / 0)", "float(time)",
		"time + value", "time * 1.5", "time > value", "time == 1772323230500.0", "value > 2147483647",
		"2147483647 + 1", "-2147483648 - 1", "4294967296 * 4294967296", "2147483648 * 2", "65536 * 65536",
		"0x7fffffffffffffff", "0b111 * 0o17", "1_000_000_000_000 + time",
		"len(key) * 1000000000000", "len(key) - 2147483649", "len(key) + time",
		"time in 1772323230000..1772323231000", "time in [1772323230500, 0, -1]", "time in [-1498262748]", "time in [4294967796, 500]",
		"sum(2147483646..2147483649)", "(2147483647..2147483649)[2]", "len(4294967296..4294967299)",
		"max(4294967296..4294967299)", "4294967296..4294967299 == [4294967296, 4294967297, 4294967298, 4294967299]",
		"map(1..3, # * 4294967296)", "sum(1..3, # * time)", "reduce(1..3, #acc + # * time, 0)",
		"sort(4294967296..4294967299, 'desc')", "(1..5)[4294967297]", "[1, 2, 3][4294967296]", "[1, 2, 3][-4294967295]",
		"[1, 2, 3, 4][4294967297:4294967298]", "get([1, 2, 3], 4294967296)", "get([1, 2, 3], 2)",
		"count(1..10, # > 2) > 4294967296", "count(1..10, # > 2) >= 8", "1..5 | filter(# > 2) | len() * time",
		"bitand(time, 0xFFFFFFFF)", "bitor(time, 4294967296)", "bitxor(time, -1)", "bitnot(time)",
		"bitshl(1, 40)", "bitshr(time, 32)", "bitushr(-1, 60)", "bitnand(time, 0xFFFF)",
		"repeat('a', 3)", "split('a,b,c', ',', 4294967297)", "type(time + 1)", "type(1)", "string(time * 1000)",
		"toJSON(time)", "fromJSON('4294967296') == 4294967296",
	}
	ints := []string{
		"time", "-time", "len(key)", "int(value)", "abs(time)", "min(time, 1767225600000)", "max(time, -1)",
		"0", "1", "-1", "7", "-7", "1000", "86400000", "2147483647", "2147483648", "-2147483648", "-2147483649",
		"4294967296", "1767225600000", "9007199254740993", "9223372036854775807", "-9223372036854775807",
	}
	floats := []string{"value", "1.5", "-0.5", "1e3", "3e9"}
	arith := []string{"+", "-", "*", "/", "%", "**"}
	compare := []string{"<", "<=", ">", ">=", "==", "!="}
	rnd := rand.New(rand.NewPCG(35, 4))
	pick := func(s []string) string { return s[rnd.IntN(len(s))] }
	operand := func() string {
		if rnd.IntN(6) == 0 {
			return pick(floats)
		}
		return pick(ints)
	}
	arithmetic := func(a, b string) string {
		op := pick(arith)
		if op == "**" && slices.Contains(floats, b) {
			// A fractional power goes through math.Exp, whose last bit
			// differs between amd64's assembly and the Go of arm and arm64:
			// not an integer's difference.
			b = pick(ints)
		}
		return fmt.Sprintf("%s %s %s", a, op, b)
	}
	for range 200 {
		a, b, c := operand(), operand(), operand()
		var src string
		switch rnd.IntN(6) {
		case 0, 1:
			src = arithmetic(a, b)
		case 2:
			src = arithmetic("("+arithmetic(a, b)+")", c)
		case 3:
			src = fmt.Sprintf("%s %s %s", a, pick(compare), b)
		case 4:
			src = fmt.Sprintf("%s %s %s", arithmetic(a, b), pick(compare), c)
		default:
			src = fmt.Sprintf("%s(%s, %s)", pick([]string{"min", "max"}), arithmetic(a, b), c)
		}
		exprs = append(exprs, src)
	}
	return exprs
}

// evaluate is what src gives for each record of the corpus, compiled as
// the operators compile it: its type and value, or its error.
func evaluate(src string) string {
	p, err := expr.Compile(src, environment(Fields{})...)
	if err != nil {
		return "compile: " + firstLine(err)
	}
	var out []string
	for _, r := range corpusRecords() {
		v, err := expr.Run(p, env(&r))
		if err != nil {
			out = append(out, "error: "+firstLine(err))
			continue
		}
		out = append(out, show(v))
	}
	if slices.Equal(out[1:], out[:len(out)-1]) {
		return "every record: " + out[0]
	}
	return strings.Join(out, " | ")
}

// show is v with its Go type, floats in the fewest digits that read back
// exactly.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case float64:
		return "float64 " + strconv.FormatFloat(v, 'g', -1, 64)
	case []any:
		s := make([]string, len(v))
		for i, e := range v {
			s[i] = show(e)
		}
		return "[" + strings.Join(s, ", ") + "]"
	}
	return fmt.Sprintf("%T %v", v, v)
}
