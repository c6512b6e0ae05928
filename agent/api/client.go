package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
)

// Client calls an agent's control API over its unix socket.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client of the agent listening on the unix socket at
// path. It does not connect until a call is made.
func NewClient(path string) *Client {
	return &Client{socket: path, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}}
}

// Socket is the path of the agent's socket.
func (c *Client) Socket() string { return c.socket }

// ErrNoAgent is wrapped by the errors of calls that could not reach an
// agent: nothing listens on the socket, or the connection broke. Their
// text is a sentence for the user that names the socket and says what
// the system's error means there (notRunning).
var ErrNoAgent = errors.New("no agent answers")

// noAgent is a call's error when it could not reach an agent: ErrNoAgent
// and the system's error, said as msg.
type noAgent struct {
	msg string
	err error
}

func (e *noAgent) Error() string   { return e.msg }
func (e *noAgent) Unwrap() []error { return []error{ErrNoAgent, e.err} }

// notRunning says why a call to the agent on socket failed with err, the
// dial's or the connection's system error, in the user's terms: no socket
// means no agent started there (or it stopped); a socket nothing listens
// on is what an agent killed leaves.
func notRunning(socket string, err error) error {
	var msg string
	switch {
	case errors.Is(err, syscall.ENOENT):
		msg = "agent not running: no control socket at " + socket
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "agent not running: nothing listens on " + socket
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		msg = "the agent on " + socket + " closed the connection before it answered (is it stopping?)"
	default:
		msg = fmt.Sprintf("no agent answers on its control socket %s: %v", socket, err)
	}
	return &noAgent{msg: msg, err: err}
}

// AgentError is an error the agent answered with.
type AgentError struct {
	Status  int // the HTTP status
	Message string
}

func (e *AgentError) Error() string { return e.Message }

// Status returns the agent's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	return st, c.call(ctx, http.MethodGet, "/status", &st)
}

// Checkpoints lists the retained completed checkpoints, newest first;
// with verify, each with the damage its state shows, if any.
func (c *Client) Checkpoints(ctx context.Context, verify bool) ([]CheckpointInfo, error) {
	path := "/checkpoints"
	if verify {
		path += "?verify=1" // every blob read and checked: Damage set
	}
	var out []CheckpointInfo
	return out, c.call(ctx, http.MethodGet, path, &out)
}

// Checkpoint triggers a checkpoint and waits until it completes.
func (c *Client) Checkpoint(ctx context.Context) (CheckpointResponse, error) {
	var out CheckpointResponse
	return out, c.call(ctx, http.MethodPost, "/checkpoint", &out)
}

// Savepoint takes a checkpoint and writes it as a savepoint file in the
// agent's savepoints directory: named name, a plain file name, replacing
// an earlier savepoint of that name only if force; name "": numbered
// savepoint-ID.cairn, of which the agent keeps the newest
// agent.retained_savepoints. The response's Path is the file written.
func (c *Client) Savepoint(ctx context.Context, name string, force bool) (CheckpointResponse, error) {
	var out CheckpointResponse
	return out, c.call(ctx, http.MethodPost, "/savepoint?"+savepointQuery(url.Values{}, name, force).Encode(), &out)
}

// Stop asks the agent to stop: to hold its sources, take a final
// checkpoint, or with savepoint a savepoint written as Savepoint writes
// it, publish what it committed, and exit with status 0. It returns once
// the agent has stopped its pipeline; a failed savepoint leaves the agent
// running, and is the error.
func (c *Client) Stop(ctx context.Context, savepoint bool, name string, force bool) (CheckpointResponse, error) {
	q := url.Values{}
	if savepoint {
		q.Set("savepoint", "1")
		savepointQuery(q, name, force)
	}
	var out CheckpointResponse
	err := c.call(ctx, http.MethodPost, "/stop?"+q.Encode(), &out)
	return out, err
}

// savepointQuery adds a savepoint's name and force to q, and returns q.
func savepointQuery(q url.Values, name string, force bool) url.Values {
	if name != "" {
		q.Set("name", name)
	}
	if force {
		q.Set("force", "1")
	}
	return q
}

// DeadLetters returns up to limit (0: as many as the agent gives at once)
// stored dead letters from seq from on, oldest first.
func (c *Client) DeadLetters(ctx context.Context, from uint64, limit int) (DeadLetters, error) {
	path := fmt.Sprintf("/deadletters?from=%d", from)
	if limit > 0 {
		path += fmt.Sprintf("&limit=%d", limit)
	}
	var out DeadLetters
	return out, c.call(ctx, http.MethodGet, path, &out)
}

func (c *Client) call(ctx context.Context, method, path string, out any) error {
	resp, err := c.do(ctx, method, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("bad answer from the agent to %s %s: %w", method, path, err)
	}
	return nil
}

// do sends a request and returns a response with status 200, or an error:
// an *AgentError for the agent's own errors, ErrNoAgent when there is none.
func (c *Client) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://cairn"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, os.ErrPermission) {
		// The agent may well run: this user may not reach its socket.
		return nil, fmt.Errorf("%s: permission denied: run this as the agent's user (sudo -u cairn cairn ...), as root, "+
			"or as a member of the group the agent's --control-group names", c.socket)
	}
	if err != nil {
		return nil, notRunning(c.socket, cause(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e Error
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return nil, &AgentError{Status: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}

// cause drops the wrappers of a failed dial, whose texts repeat the
// socket's path and the made-up URL: "connect: connection refused".
func cause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err
	}
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}

// Events follows the agent's status stream, calling fn with every status,
// until ctx is done, the stream breaks or fn returns an error; it returns
// why it stopped.
func (c *Client) Events(ctx context.Context, fn func(Status) error) error {
	resp, err := c.do(ctx, http.MethodGet, "/events")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue // blank separators and comments
		}
		var st Status
		if err := json.Unmarshal(data, &st); err != nil {
			return fmt.Errorf("bad event from the agent: %w", err)
		}
		if err := fn(st); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("status stream broke: %w", err)
	}
	return errors.New("the agent closed the status stream")
}
