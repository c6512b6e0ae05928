package cairntest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/internal/testing/testwait"
)

// Run runs bin with args to its end and returns its exit status and what
// it wrote to stdout and to stderr; it fails t if bin cannot be run.
func Run(t testing.TB, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return 0, out.String(), errOut.String()
}

// Proc is a running cairn command, `cairn run` mostly, whose output
// (stdout and stderr, one stream: the agent logs to stderr) is read line
// by line as it comes and kept, so that the process never waits for its
// reader and a test can await a line or show the whole log.
type Proc struct {
	cmd   *exec.Cmd
	ended chan struct{} // closed once the process exited and its output is read
	err   error         // how it exited (exec.Cmd.Wait's error), set before ended is closed

	mu    sync.Mutex
	lines []string
	read  int // how many lines Await and Skip have passed
}

// Start runs bin with args, reading its output; every line also goes to
// log, unless log is nil. The process is killed when the test ends, if it
// still runs; if the test failed, the last lines of its output are logged.
func Start(t testing.TB, log io.Writer, bin string, args ...string) *Proc {
	t.Helper()
	return StartEnv(t, log, nil, bin, args...)
}

// StartEnv is Start with env ("NAME=value") added to the test's
// environment.
func StartEnv(t testing.TB, log io.Writer, env []string, bin string, args ...string) *Proc {
	t.Helper()
	// A pipe of the test's own, not exec.Cmd's: Cmd.Wait would close that
	// one, and lines not yet read would be lost.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{cmd: exec.Command(bin, args...), ended: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if log != nil {
				fmt.Fprintln(log, sc.Text())
			}
		}
		if err := sc.Err(); err != nil {
			p.mu.Lock()
			p.lines = append(p.lines, "cairntest: the rest of the output is not read: "+err.Error())
			p.mu.Unlock()
			io.Copy(io.Discard, r)
		}
		r.Close()
		p.err = p.cmd.Wait()
		close(p.ended)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.ended
		if t.Failed() { // what the process said is the first thing to read
			t.Logf("%s %s ended with %v; the last %d lines of its output:\n%s",
				filepath.Base(bin), strings.Join(args, " "), p.err, failureLines, p.tail(failureLines))
		}
	})
	return p
}

// failureLines is how many of a process's last lines a failed test shows.
const failureLines = 150

// tail returns the last n lines of the output.
func (p *Proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines[max(0, len(p.lines)-n):], "\n")
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) { p.cmd.Process.Signal(sig) }

// Ended is closed once the process has exited and its output is read.
func (p *Proc) Ended() <-chan struct{} { return p.ended }

// Wait waits for the process to exit and its output to be read, and
// returns how it exited: nil for exit status 0, else an *exec.ExitError.
func (p *Proc) Wait() error {
	<-p.ended
	return p.err
}

// Stop sends SIGTERM, on which the agent takes a final checkpoint and
// exits, and waits at most d for it to exit; then it kills it. It returns
// how it exited, an error when it had to kill it.
func (p *Proc) Stop(d time.Duration) error {
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.ended:
		return p.err
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.ended
		return fmt.Errorf("it did not exit within %v of SIGTERM", d)
	}
}

// Kill sends SIGKILL and waits for the process to be gone. It returns an
// error if the process had ended on its own.
func (p *Proc) Kill() error {
	p.cmd.Process.Kill()
	<-p.ended
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return nil
	}
	return fmt.Errorf("it ended on its own before it was killed: %v", p.err)
}

// Await returns the submatches of the first line that matches re after
// those that Await and Skip passed before, failing t if none comes within
// d or the output ends first.
func (p *Proc) Await(t testing.TB, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	var m []string
	if testwait.Poll(d, func() bool {
		ended := p.isEnded() // before the lines: what it wrote before it ended is all there
		p.mu.Lock()
		for m == nil && p.read < len(p.lines) {
			m = re.FindStringSubmatch(p.lines[p.read])
			p.read++
		}
		p.mu.Unlock()
		if m == nil && ended {
			t.Fatalf("the process ended (%v) before it wrote a line matching %v:\n%s", p.err, re, p.Log())
		}
		return m != nil
	}) {
		return m
	}
	t.Fatalf("no line matching %v within %v:\n%s", re, d, p.Log())
	return nil
}

// Skip passes every line written so far, for Await, and returns how many
// of those it passes match re (none when re is nil).
func (p *Proc) Skip(re *regexp.Regexp) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for ; p.read < len(p.lines); p.read++ {
		if re != nil && re.MatchString(p.lines[p.read]) {
			n++
		}
	}
	return n
}

// Log is every line written so far, each ended by a newline.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func (p *Proc) isEnded() bool {
	select {
	case <-p.ended:
		return true
	default:
		return false
	}
}

// AwaitStatus asks the agent on the control socket for its status (GET
// /status) until ok holds, failing t after d; it returns the status that
// satisfied ok. S is the type the caller decodes the status's JSON into,
// api.Status mostly: this package imports nothing of cairn's above
// internal/ (docs/DESIGN.md section 3), and reads of the status only the
// fields its failure message shows (statusSummary).
func AwaitStatus[S any](t testing.TB, socket, what string, d time.Duration, ok func(S) bool) S {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	defer client.CloseIdleConnections()
	var st S
	var sum statusSummary
	var err error
	if testwait.Poll(d, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var body []byte
		if body, err = getStatus(ctx, client); err != nil {
			return false
		}
		st, sum = *new(S), statusSummary{}
		if err = errors.Join(json.Unmarshal(body, &st), json.Unmarshal(body, &sum)); err != nil {
			return false
		}
		return ok(st)
	}) {
		return st
	}
	t.Fatalf("waited %v for %s (last status error %v; state %q, %d checkpoints, input held %v, ingest lag %d)",
		d, what, err, sum.State, sum.Checkpoints.Completed, sum.InputHeld, sum.IngestLag)
	return st
}

// statusSummary is what AwaitStatus's failure message shows of the
// agent's status: fields of api.Status, by their JSON names.
type statusSummary struct {
	State       string `json:"state"`
	Checkpoints struct {
		Completed int64 `json:"completed"`
	} `json:"checkpoints"`
	InputHeld bool  `json:"input_held"`
	IngestLag int64 `json:"ingest_lag"`
}

// getStatus returns the body of the agent's answer to GET /status.
func getStatus(ctx context.Context, client *http.Client) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://cairn/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, err
}
