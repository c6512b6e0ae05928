package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// Result is a scenario's outcome. Its JSON form is the result's struct.
type Result interface {
	// Scenario is the scenario's name, as cairn-bench takes it.
	Scenario() string
	// Rows are the figures for people, in order.
	Rows() []Row
}

// Row is one figure of a result's table.
type Row struct{ Name, Value string }

// Print writes r as a table under its scenario's name or, with asJSON, as
// one line holding a JSON object whose "scenario" field names it.
func Print(w io.Writer, r Result, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		name, _ := json.Marshal(r.Scenario())
		line := append([]byte(`{"scenario":`), name...)
		if len(b) > 2 {
			line = append(line, ',')
		}
		line = append(append(line, b[1:]...), '\n')
		_, err = w.Write(line)
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\n", r.Scenario())
	for _, row := range r.Rows() {
		fmt.Fprintf(tw, "  %s\t%s\n", row.Name, row.Value)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perSec is n events in d, per second.
func perSec(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// num formats a figure for a table: whole numbers with thousands
// separators, others with three significant digits.
func num(v float64) string {
	if v >= 1000 || v == float64(int64(v)) {
		s := strconv.FormatInt(int64(v+0.5), 10)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// mb formats a size in bytes as decimal megabytes (and MiB).
func mb(bytes int64) string {
	return fmt.Sprintf("%.2f MB (%.2f MiB)", float64(bytes)/1e6, float64(bytes)/(1<<20))
}
