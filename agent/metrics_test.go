package agent

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/internal/testing/testlog"
	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// exposed is one scrape of the metrics, parsed strictly.
type exposed struct {
	types  map[string]string  // by family
	values map[string]float64 // by series: name{labels}, the labels sorted
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition parses the Prometheus text format as the agent writes
// it, refusing what a scraper would refuse and what the agent promises not
// to write: each family's HELP then TYPE, once, before its samples, which
// follow one another; no series twice; counters named _total and not
// negative; histograms with cumulative buckets up to +Inf equal to their
// count; summaries with quantiles in [0, 1].
func parseExposition(text string) (*exposed, error) {
	e := &exposed{types: map[string]string{}, values: map[string]float64{}}
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the exposition does not end with a newline")
	}
	helped := map[string]bool{}
	var family string // of the samples that may follow
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			switch {
			case !metricName.MatchString(name):
				return nil, fail("bad name")
			case helped[name]:
				return nil, fail("a second HELP")
			case help == "" || strings.Contains(help, `\`):
				return nil, fail("empty or escaped help")
			}
			helped[name], family = true, ""
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			switch {
			case !helped[name]:
				return nil, fail("TYPE without HELP before it")
			case e.types[name] != "":
				return nil, fail("a second TYPE")
			case !slices.Contains([]string{"counter", "gauge", "histogram", "summary"}, kind):
				return nil, fail("unknown type")
			case kind == "counter" && !strings.HasSuffix(name, "_total"):
				return nil, fail("a counter not named _total")
			}
			e.types[name], family = kind, name
			continue
		}
		if line == "" || line[0] == '#' {
			return nil, fail("blank or comment line")
		}
		name, rest, _ := strings.Cut(line, " ")
		ls := ""
		if open := strings.IndexByte(line, '{'); open >= 0 && open < len(name) {
			end := strings.LastIndexByte(line, '}')
			if end < 0 {
				return nil, fail("unclosed labels")
			}
			name, ls, rest = line[:open], line[open+1:end], strings.TrimPrefix(line[end+1:], " ")
		}
		if !metricName.MatchString(name) {
			return nil, fail("bad name")
		}
		base := name
		if kind := e.types[family]; kind == "histogram" || kind == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if family+suffix == name && (suffix != "_bucket" || kind == "histogram") {
					base = family
				}
			}
		}
		if family == "" || base != family {
			return nil, fail("a sample outside its family (%q)", family)
		}
		pairs, err := parseLabels(ls)
		if err != nil {
			return nil, fail("%v", err)
		}
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			return nil, fail("value: %v", err)
		}
		if e.types[family] == "counter" && (v < 0 || math.IsNaN(v)) {
			return nil, fail("a counter below 0")
		}
		key := name + "{" + strings.Join(pairs, ",") + "}"
		if _, dup := e.values[key]; dup {
			return nil, fail("a second sample of the series")
		}
		e.values[key] = v
	}
	for name := range helped {
		if e.types[name] == "" {
			return nil, fmt.Errorf("%s has HELP but no TYPE", name)
		}
	}
	return e, e.checkHistograms()
}

// parseLabels parses the inside of a series' braces into name="value"
// pairs, sorted, refusing escapes the format does not have and a name
// given twice.
func parseLabels(s string) ([]string, error) {
	var pairs []string
	seen := map[string]bool{}
	for s != "" {
		name, rest, ok := strings.Cut(s, `="`)
		if !ok || !labelName.MatchString(name) || seen[name] {
			return nil, fmt.Errorf("bad or repeated label name in %q", s)
		}
		seen[name] = true
		var value strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' {
				if i++; i == len(rest) || !strings.ContainsRune(`\"n`, rune(rest[i])) {
					return nil, fmt.Errorf("bad escape in %q", s)
				}
			}
			value.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, fmt.Errorf("unterminated value in %q", s)
		}
		pairs = append(pairs, name+"="+strconv.Quote(value.String()))
		s = rest[i+1:]
		if s != "" {
			if s, ok = strings.CutPrefix(s, ","); !ok || s == "" {
				return nil, fmt.Errorf("no comma between labels, or one at the end")
			}
		}
	}
	slices.Sort(pairs)
	return pairs, nil
}

// checkHistograms checks every histogram's buckets (per series: per set
// of labels besides le) and every summary's quantiles against their
// counts.
func (e *exposed) checkHistograms() error {
	for family, kind := range e.types {
		if kind != "histogram" && kind != "summary" {
			continue
		}
		type bucket struct{ bound, n float64 }
		series := map[string][]bucket{} // by the labels besides le or quantile
		bounded := "quantile"
		if kind == "histogram" {
			bounded = "le"
		}
		prefix := family + "{"
		if kind == "histogram" {
			prefix = family + "_bucket{"
		}
		for key, v := range e.values {
			rest, ok := strings.CutPrefix(key, prefix)
			if !ok {
				continue
			}
			var others []string
			var bound float64
			var found bool
			for _, pair := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				name, value, _ := strings.Cut(pair, "=")
				if name != bounded {
					others = append(others, pair)
					continue
				}
				uq, err := strconv.Unquote(value)
				if err != nil {
					return fmt.Errorf("%s: %v", key, err)
				}
				if bound, err = strconv.ParseFloat(uq, 64); err != nil {
					return fmt.Errorf("%s: %v", key, err)
				}
				found = true
			}
			if !found {
				continue // a summary's sum or count
			}
			ls := strings.Join(others, ",")
			series[ls] = append(series[ls], bucket{bound, v})
		}
		_, unlabelled := e.values[family+"_count{}"]
		if len(series) == 0 && (kind == "summary" || unlabelled) {
			series[""] = nil
		}
		for ls, buckets := range series {
			count, okCount := e.values[family+"_count{"+ls+"}"]
			_, okSum := e.values[family+"_sum{"+ls+"}"]
			if !okCount || !okSum {
				return fmt.Errorf("%s{%s} lacks its sum or count", family, ls)
			}
			slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.bound, b.bound) })
			if kind == "summary" {
				for _, q := range buckets {
					if q.bound < 0 || q.bound > 1 {
						return fmt.Errorf("%s: quantile %g", family, q.bound)
					}
				}
				continue
			}
			if len(buckets) < 2 || !math.IsInf(buckets[len(buckets)-1].bound, 1) || buckets[len(buckets)-1].n != count {
				return fmt.Errorf("%s{%s}: no +Inf bucket equal to the count %g: %v", family, ls, count, buckets)
			}
			for i := 1; i < len(buckets); i++ {
				if buckets[i].n < buckets[i-1].n {
					return fmt.Errorf("%s{%s}: buckets not cumulative: %v", family, ls, buckets)
				}
			}
		}
	}
	return nil
}

// counting reports whether a series may only grow: a counter's, or a
// histogram's or summary's count, sum and buckets.
func (e *exposed) counting(series string) bool {
	name, _, _ := strings.Cut(series, "{")
	for family, kind := range e.types {
		switch {
		case name == family && kind == "counter":
			return true
		case kind == "histogram" && (name == family+"_bucket" || name == family+"_sum" || name == family+"_count"):
			return true
		case kind == "summary" && (name == family+"_sum" || name == family+"_count"):
			return true
		}
	}
	return false
}

// TestParseExpositionRefuses: the parser the metrics tests lean on refuses
// what it should.
func TestParseExpositionRefuses(t *testing.T) {
	const ok = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 2\n"
	if _, err := parseExposition(ok); err != nil {
		t.Fatalf("a good exposition: %v", err)
	}
	for _, bad := range []string{
		strings.TrimSuffix(ok, "\n"),
		ok + "a_total{x=\"1\"} 3\n",                              // a series twice
		ok + "# HELP a_total A.\n",                               // HELP twice
		"# TYPE a_total counter\na_total 1\n",                    // no HELP
		"# HELP a A.\n# TYPE a counter\na 1\n",                   // a counter without _total
		ok + "# HELP b B.\n# TYPE b gauge\na_total{x=\"2\"} 1\n", // a family split
		"# HELP a_total A.\n# TYPE a_total counter\na_total -1\n",
		"# HELP g G.\n# TYPE g gauge\ng{x=\"\\t\"} 1\n",       // an escape the format lacks
		"# HELP g G.\n# TYPE g gauge\ng{x=\"1\",x=\"2\"} 1\n", // a label twice
		"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n", // not cumulative
		"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n", // +Inf is not the count
		"# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",                          // no +Inf
		"# HELP h H.\n# TYPE h histogram\nh_bucket{s=\"a\",le=\"1\"} 1\nh_bucket{s=\"a\",le=\"+Inf\"} 1\nh_sum{s=\"a\"} 1\nh_count{s=\"a\"} 1\n" +
			"h_bucket{s=\"b\",le=\"+Inf\"} 2\nh_sum{s=\"b\"} 1\nh_count{s=\"b\"} 1\n", // one series' +Inf is not its count
	} {
		if _, err := parseExposition(bad); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestHistogram: a value on a bound counts in that bound's bucket, one
// above every bound only in +Inf, and the buckets are written cumulative.
func TestHistogram(t *testing.T) {
	h := newHistogram([]float64{1, 10})
	for _, v := range []float64{0.5, 1, 5, 10, 11, 100} {
		h.observe(v)
	}
	var b bytes.Buffer
	e := exposition{&b}
	e.family("h", "histogram", "H.")
	h.write(e, "h", "")
	want := "# HELP h H.\n# TYPE h histogram\n" +
		"h_bucket{le=\"1\"} 2\nh_bucket{le=\"10\"} 4\nh_bucket{le=\"+Inf\"} 6\nh_sum 127.5\nh_count 6\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if _, err := parseExposition(b.String()); err != nil {
		t.Fatal(err)
	}
	for _, bounds := range [][]float64{checkpointDurationBuckets, checkpointAlignmentBuckets, checkpointSizeBuckets} {
		for i := 1; i < len(bounds); i++ {
			if bounds[i] <= bounds[i-1] {
				t.Errorf("bounds not ascending: %v", bounds)
			}
		}
	}
}

// A label value is escaped as the format wants, not as Go quotes it.
func TestLabelsEscape(t *testing.T) {
	if got, want := labels("operator", "a\"b\\c\nd é\x01"), `operator="a\"b\\c\nd é`+"\x01"+`"`; got != want {
		t.Fatalf("labels = %s, want %s", got, want)
	}
}

const metricsPipeline = `agent:
  data_dir: %s
  metrics: %s
checkpoints:
  interval: 1h
sources:
  - id: fleet
    simulator: {devices: 20, rate: 2000}
operators:
  - id: counts
    type: count
    inputs: [fleet]
    key_by: key
    parallelism: %d
%s`

const avgOperator = `  - id: avg
    type: window
    inputs: [fleet]
    key_by: key
    window: {kind: tumbling, size: 100ms}
    aggregate: avg
`

// TestMetricsAcrossReload runs an agent and scrapes its metrics all along,
// each scrape parsed strictly, while checkpoints complete and a reload
// replaces the graph (another parallelism of one operator, another
// removed): no counter goes down, the series of the removed operator
// stays, and the checkpoint histograms count every completed checkpoint
// the runtime logged, across the reload.
func TestMetricsAcrossReload(t *testing.T) {
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "conf", "pipeline.yaml")
	if err := os.Mkdir(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	write := func(parallelism int, more string) {
		tmp := file + ".new"
		if err := os.WriteFile(tmp, fmt.Appendf(nil, metricsPipeline, data, addr, parallelism, more), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(1, avgOperator)
	logs := new(testlog.Buffer)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, file, Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Build: BuildInfo{Version: "v9.8.7", Commit: "abc123"}})
	}()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	until := func(what string, cond func() bool) {
		t.Helper()
		if !testwait.Poll(30*time.Second, cond) {
			t.Fatalf("no %s in 30s; the log:\n%s", what, logs)
		}
	}
	scrape := func() (*exposed, error) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		e, err := parseExposition(string(body))
		if err != nil {
			return nil, fmt.Errorf("%v\n%s", err, body)
		}
		return e, nil
	}
	// complete takes n checkpoints and checks that the metrics count every
	// completion the runtime logged: with a one-hour interval, these are
	// the test's and the reload's.
	client := api.NewClient(SocketPath(data))
	complete := func(n int) *exposed {
		t.Helper()
		for range n {
			cctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := client.Checkpoint(cctx)
			stop()
			if err != nil {
				t.Fatal(err)
			}
		}
		e, err := scrape()
		if err != nil {
			t.Fatal(err)
		}
		logged := float64(strings.Count(logs.String(), `msg="checkpoint complete"`))
		for _, s := range []string{"cairn_checkpoints_completed_total{}", "cairn_checkpoint_duration_seconds_count{}",
			"cairn_checkpoint_alignment_seconds_count{}", "cairn_checkpoint_size_bytes_count{}"} {
			if e.values[s] != logged {
				t.Fatalf("%s is %g; the runtime logged %g completions", s, e.values[s], logged)
			}
		}
		return e
	}

	until("pipeline", func() bool { return strings.Count(logs.String(), `msg="pipeline running"`) == 1 })
	// Scrape all along: no scrape may see a counter lower than the one
	// before it did.
	stopScraping, scraped := make(chan struct{}), make(chan struct{})
	var scrapes atomic.Int64
	// scraped5 waits for five more scrapes than were made when it was
	// called: the reload is scraped across, whatever the machine's load.
	scraped5 := func(what string) {
		t.Helper()
		n := scrapes.Load() + 5
		until(fmt.Sprintf("5 scrapes %s", what), func() bool { return scrapes.Load() >= n })
	}
	stopScraper := func() {
		select {
		case <-stopScraping:
		default:
			close(stopScraping)
		}
		<-scraped
	}
	defer stopScraper() // before the agent stops
	go func() {
		defer close(scraped)
		var prev *exposed
		for {
			select {
			case <-stopScraping:
				return
			case <-time.After(5 * time.Millisecond):
			}
			e, err := scrape()
			if err != nil {
				t.Error(err)
				return
			}
			scrapes.Add(1)
			if prev != nil {
				for s, v := range prev.values {
					if now, ok := e.values[s]; prev.counting(s) && (!ok || now < v) {
						t.Errorf("%s went from %g to %g (present: %v)", s, v, now, ok)
						return
					}
				}
			}
			prev = e
		}
	}()

	before := complete(3)
	for _, s := range []string{`cairn_records_in_total{operator="avg",subtask="0"}`, `cairn_records_in_total{operator="counts",subtask="0"}`} {
		if before.values[s] <= 0 {
			t.Fatalf("%s is %g before the reload", s, before.values[s])
		}
	}
	if v := before.values[`cairn_build_info{commit="abc123",goversion="`+goVersion()+`",version="v9.8.7"}`]; v != 1 {
		t.Fatalf("no cairn_build_info of the options: %v", before.values)
	}
	scraped5("before the reload")
	write(2, "")
	until("reload", func() bool { return strings.Count(logs.String(), `msg="pipeline running"`) == 2 })
	after := complete(2)
	scraped5("after the reload")
	stopScraper()
	for s, v := range before.values {
		if before.counting(s) && after.values[s] < v {
			t.Errorf("%s went from %g to %g across the reload", s, v, after.values[s])
		}
	}
	if s := `cairn_records_in_total{operator="counts",subtask="1"}`; after.values[s] <= 0 {
		t.Errorf("%s is %g after the reload", s, after.values[s])
	}
	if s := "cairn_checkpoints_completed_total{}"; after.values[s] != before.values[s]+3 { // the reload's and the test's two
		t.Errorf("%s went from %g to %g, want 3 more", s, before.values[s], after.values[s])
	}
	if s := "cairn_checkpoint_size_bytes_sum{}"; after.values[s] <= 0 {
		t.Errorf("%s is %g", s, after.values[s])
	}
	for _, s := range []string{"process_start_time_seconds{}", "process_cpu_seconds_total{}", "process_open_fds{}", "process_max_fds{}",
		"process_resident_memory_bytes{}", "go_goroutines{}", "go_threads{}", "go_memstats_heap_alloc_bytes{}", "go_memstats_heap_inuse_bytes{}",
		"go_memstats_sys_bytes{}", "go_gc_duration_seconds_count{}", `go_info{version="` + goVersion() + `"}`} {
		if after.values[s] <= 0 {
			t.Errorf("%s is %g, want above 0", s, after.values[s])
		}
	}
	if start := after.values["process_start_time_seconds{}"]; time.Since(time.Unix(int64(start), 0)) > time.Hour {
		t.Errorf("process_start_time_seconds %g is not this process's start", start)
	}
}

// The observer counts failures as the runtime does: a checkpoint subsumed
// or overtaken, or one cut short by a stop, is none.
func TestCheckpointMetricsCountFailures(t *testing.T) {
	m := newCheckpointMetrics()
	for _, r := range []checkpoint.AbortReason{checkpoint.Declined, checkpoint.Expired, checkpoint.WriteFailed, checkpoint.Subsumed, checkpoint.TaskFinished, checkpoint.Overtaken} {
		m.aborted(checkpoint.Abort{ID: 1, Reason: r})
	}
	m.completed(&checkpoint.Manifest{Duration: 30 * time.Millisecond, Subtasks: []checkpoint.Ack{
		{Stats: checkpoint.SubtaskStats{StateSize: 3 << 10, Alignment: 2 * time.Millisecond}},
		{Stats: checkpoint.SubtaskStats{StateSize: 2 << 10, Alignment: 7 * time.Millisecond}},
	}}, 100*time.Millisecond)
	o := m.snapshot()
	if o.failed != 3 || o.late != 0 || o.duration.count != 1 || o.size.sum != 5<<10 || o.alignment.sum != 0.007 || o.duration.sum != 0.03 {
		t.Fatalf("observed %+v", o)
	}
	// Late: more than half the interval; exactly half is not, and a
	// checkpoint taken only on request (interval 0) never is.
	m.completed(&checkpoint.Manifest{Duration: 51 * time.Millisecond}, 100*time.Millisecond)
	m.completed(&checkpoint.Manifest{Duration: 50 * time.Millisecond}, 100*time.Millisecond)
	m.completed(&checkpoint.Manifest{Duration: time.Hour}, 0)
	if o := m.snapshot(); o.late != 1 || o.duration.count != 4 {
		t.Fatalf("after one late checkpoint of four: observed %+v", o)
	}
}

// TestListenerInUseFailsTheStart: the agent opens its listeners before its
// pipeline starts, so a metrics address another program holds fails the
// start, saying which listener, rather than a running agent a moment later;
// and the control socket is not left behind.
func TestListenerInUseFailsTheStart(t *testing.T) {
	dir := t.TempDir()
	data, file := filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := os.WriteFile(file, fmt.Appendf(nil, metricsPipeline, data, held.Addr(), 1, ""), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := new(testlog.Buffer)
	err = Run(context.Background(), file, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err == nil || !strings.Contains(err.Error(), "metrics listener") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Run = %v; want the metrics listener's address in use", err)
	}
	if strings.Contains(logs.String(), "pipeline running") {
		t.Fatalf("the pipeline started before the listeners were open:\n%s", logs)
	}
	if _, err := os.Stat(SocketPath(data)); !os.IsNotExist(err) {
		t.Fatalf("the control socket is left behind: %v", err)
	}
}
