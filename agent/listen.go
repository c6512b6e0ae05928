package agent

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent/config"
)

// SocketPath is the control socket under a data directory.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, "cairn.sock") }

// listener is an open listener of the agent's and what it serves.
type listener struct {
	l       net.Listener
	handler http.Handler
	socket  string // a unix socket's file, removed when serving ends
}

// serve serves l until ctx is done.
func (s listener) serve(ctx context.Context) error {
	if s.socket != "" {
		defer os.Remove(s.socket)
	}
	return serveHTTP(ctx, s.l, s.handler)
}

// listen opens every listener of the agent: the control socket in the
// data directory (mode 0600, or 0660 and the control group's when there
// is one), and the metrics and TCP control API listeners when the config
// asks for them. They are
// open when it returns, before the pipeline starts, so that a client that
// has seen the agent start finds them, and an address in use fails the
// start; on failure none is left open.
func (a *Agent) listen() (ls []listener, err error) {
	cfg := a.cfg.Agent
	defer func() {
		if err != nil {
			for _, s := range ls {
				s.l.Close()
			}
			ls = nil
		}
	}()
	s, err := listenSocket(SocketPath(a.dataDir), a.controlGID, a.api.handler())
	if err != nil {
		return nil, err
	}
	ls = append(ls, s)
	if cfg.Metrics != "" {
		s, err := listenMetrics(cfg.Metrics, a.metrics.handler(), a.log)
		if err != nil {
			return ls, err
		}
		ls = append(ls, s)
	}
	if cfg.API != "" {
		token, err := readToken(cfg.APITokenFile)
		if err != nil {
			return ls, fmt.Errorf("agent.api_token_file: %w", err)
		}
		s, err := listenTCP(cfg.API, token, a.api.handler(), a.log)
		if err != nil {
			return ls, err
		}
		ls = append(ls, s)
	}
	return ls, nil
}

// listenSocket opens the control socket at path, serving api.
func listenSocket(path string, gid int, api http.Handler) (listener, error) {
	os.Remove(path) // a stale socket of a killed agent
	l, err := net.Listen("unix", path)
	if err != nil {
		return listener{}, fmt.Errorf("control socket: %w", err)
	}
	mode := os.FileMode(0o600)
	if gid >= 0 {
		// The group first, then its access: never the other way round.
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return listener{}, fmt.Errorf("control socket: %w (the agent's user must be root or a member of the control group)", err)
		}
		mode = 0o660
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return listener{}, err
	}
	return listener{l: l, handler: api, socket: path}, nil
}

// lookupGroup returns the id of group, a name or a number.
func lookupGroup(group string) (int, error) {
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, fmt.Errorf("control group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}

// listenMetrics opens the listener of Prometheus text-format metrics
// (metrics) on addr (a loopback address unless the file says otherwise).
func listenMetrics(addr string, metrics http.Handler, log *slog.Logger) (listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return listener{}, fmt.Errorf("metrics listener: %w", err)
	}
	log.Info("metrics listening", "addr", l.Addr().String())
	return listener{l: l, handler: metrics}, nil
}

// minTokenBytes is the shortest token the TCP control API takes: 16
// random bytes' worth of guessing, written as hex or base64.
const minTokenBytes = 16

// readToken reads the control API's token from path, which only its owner
// may read (config.ReadSecret): a token others can read, or one short
// enough to guess, lets anyone on the network control the agent.
func readToken(path string) (string, error) {
	b, err := config.ReadSecret(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenBytes {
		return "", fmt.Errorf("the token in %s has %d characters, fewer than %d: make one with `openssl rand -hex 16`", path, len(token), minTokenBytes)
	}
	return token, nil
}

// listenTCP opens the control API (api) on a TCP address, for callers
// that send the bearer token.
func listenTCP(addr, token string, api http.Handler, log *slog.Logger) (listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return listener{}, fmt.Errorf("control listener: %w", err)
	}
	log.Info("control API listening", "addr", l.Addr().String())
	want := []byte("Bearer " + token)
	return listener{l: l, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("Connection", "close") // nothing more is served on it
			reply(w, http.StatusUnauthorized, apiError("a bearer token is required"))
			return
		}
		api.ServeHTTP(w, r)
	})}, nil
}

// What one listener of the agent's (the control socket, the TCP control
// API, the metrics) holds at most: maxConnections connections at once (a
// new one displaces one waiting for its request: boundedListener), none
// that has not sent a whole request header headerTimeout after it was
// accepted, or after the first bytes of its next request (however slowly
// its bytes trickle in), nor one idle for idleTimeout, headers of
// maxHeaderBytes. A flood of connections, from a scanner or an attacker
// on the plant network, so cannot take the file descriptors and memory
// the agent's broker connections and files need (a listener's
// connections hold some 2 MiB at most), nor keep an authorised caller
// waiting behind it.
const (
	maxConnections = 64
	headerTimeout  = 5 * time.Second
	idleTimeout    = 10 * time.Second
	maxHeaderBytes = 16 << 10
)

func serveHTTP(ctx context.Context, l net.Listener, h http.Handler) error {
	l = &boundedListener{Listener: l, max: maxConnections}
	srv := &http.Server{Handler: served(h), ConnContext: withConn,
		ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: log.New(io.Discard, "", 0)} // a caller's broken request is its own business, not the agent's log
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
