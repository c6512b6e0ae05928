//go:build torture

package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
)

// buildCairn builds the binary from the module root into dir.
func buildCairn(t testing.TB, dir string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not the parent of the test's directory: %v", err)
	}
	bin := filepath.Join(dir, "cairn")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cairn")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/cairn: %v\n%s", err, out)
	}
	return bin
}

// agentProc is one incarnation of `cairn run`.
type agentProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process is gone; then err is set
	err    error
	status *http.Client // the control API on the unix socket
}

// startAgent runs `cairn run -c config`, appending its output to log.
func startAgent(t testing.TB, bin, config, dataDir string, log *os.File) *agentProc {
	t.Helper()
	cmd := exec.Command(bin, "run", "-c", config)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dataDir, "cairn.sock")
	a := &agentProc{cmd: cmd, exited: make(chan struct{}), status: &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}}
	go func() {
		a.err = cmd.Wait()
		close(a.exited)
	}()
	return a
}

// state asks the control socket for the agent's state; "" if it does not
// answer (yet).
func (a *agentProc) state() string {
	resp, err := a.status.Get("http://cairn/status")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var st api.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return ""
	}
	return st.State
}

// waitRunning waits until the control socket says the pipeline runs (its
// restore done).
func (a *agentProc) waitRunning(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if a.state() == "running" {
			return nil
		}
		select {
		case <-a.exited:
			return fmt.Errorf("the agent exited before it ran: %v", a.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent's control socket did not say running within %v", d)
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone. It fails if the
// agent had ended on its own.
func (a *agentProc) kill() error {
	select {
	case <-a.exited:
		return fmt.Errorf("the agent ended on its own before it was killed: %v", a.err)
	default:
	}
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	var ee *exec.ExitError
	if errors.As(a.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return nil
	}
	return fmt.Errorf("the agent ended on its own before it was killed: %v", a.err)
}

// stop sends SIGTERM, which takes a final checkpoint, and waits at most d
// for a clean exit.
func (a *agentProc) stop(d time.Duration) error {
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
		return a.err
	case <-time.After(d):
		a.cmd.Process.Kill()
		<-a.exited
		return fmt.Errorf("the agent did not stop within %v of SIGTERM", d)
	}
}
