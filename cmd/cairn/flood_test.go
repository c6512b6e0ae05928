package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// TestConnectionFlood opens 300 connections to each of the agent's TCP
// listeners, as a scanner or an attacker on the plant network would: to
// the metrics, each sending a request and keeping the connection; to the
// control API, each sending a request without the token. The agent must
// hold a bounded number of them (its file descriptors are what its broker
// connections and files need), close the unauthenticated ones, answer
// cairn status on its socket throughout, and serve a scrape once the flood
// is gone.
func TestConnectionFlood(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config, token, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "token"), filepath.Join(dir, "data")
	if err := os.WriteFile(token, []byte(e2eToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics, apiPort := freePort(t), freePort(t)
	if err := os.WriteFile(config, fmt.Appendf(nil, e2eConfig, data, metrics, apiPort, token, freePort(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, config)
	socket := filepath.Join(data, "cairn.sock")
	cairntest.AwaitStatus(t, socket, "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()

	const flood = 300
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dial := func(port int, request string) net.Conn {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for range flood {
		dial(metrics, "GET /metrics HTTP/1.1\r\nHost: gw\r\n\r\n")
	}
	var refused []net.Conn
	for range flood {
		refused = append(refused, dial(apiPort, "GET /status HTTP/1.1\r\nHost: gw\r\n\r\n"))
	}
	// The unauthenticated: answered 401 and closed, the last ones (the
	// earlier ones the later displaced, if they had not been answered).
	for _, c := range refused[flood-10:] {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a request without the token: %v, %v", resp, err)
		}
		if rest, err := io.ReadAll(resp.Body); err != nil || !strings.Contains(string(rest), "bearer token") {
			t.Fatalf("its body: %q, %v", rest, err)
		}
		if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("the connection stays open after a 401: %d, %v", n, err)
		}
	}
	// Status answers on the socket while the flood holds, and the agent
	// holds at most its connection limit per listener.
	cairntest.AwaitStatus(t, socket, "status during the flood", 10*time.Second, func(st api.Status) bool { return st.State == "running" })
	if held := fds() - before; held > 2*listenerConnections+16 { // the limits, and a few files the agent opens meanwhile
		t.Fatalf("the agent holds %d more file descriptors with %d connections open, want at most its limits", held, 2*flood)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a scrape after the flood: %v, %v", resp, err)
	}
	resp.Body.Close()
}

// TestWeakTokenRefused starts an agent whose control API token is too
// short: it refuses to start, saying so and what to do, and never serves
// the API. (A token file others may read is TestSecretFilesExposed's.)
func TestWeakTokenRefused(t *testing.T) {
	bin := cairntest.Build(t, "cairn")
	for _, c := range []struct {
		name, token string
		mode        os.FileMode
		want        string
	}{
		{"short", "t0ken", 0o600, "has 5 characters, fewer than 16: make one with `openssl rand -hex 16`"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			config, token := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "token")
			if err := os.WriteFile(token, []byte(c.token+"\n"), c.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(token, c.mode) // whatever the umask
			if err := os.WriteFile(config, fmt.Appendf(nil, e2eConfig, filepath.Join(dir, "data"), freePort(t), freePort(t), token, freePort(t)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "run", "-c", config).CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "control API listening") {
				t.Fatalf("an agent with a %s token: %v\n%s", c.name, err, out)
			}
		})
	}
}
