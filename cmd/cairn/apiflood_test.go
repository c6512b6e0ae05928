package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-edge/cairn/agent/api"
	"github.com/cairn-edge/cairn/internal/testing/cairntest"
)

// listenersConfig is a pipeline with the TCP control API and the metrics
// on loopback and a light simulator: what the tests of the listeners
// measure is the listeners, not the pipeline.
const listenersConfig = `agent:
  data_dir: %s
  metrics: 127.0.0.1:%d
  api: 127.0.0.1:%d
  api_token_file: %s
sources:
  - id: fleet
    simulator: {devices: 5, rate: 10}
`

// listenersAgent is a running agent of listenersConfig's.
type listenersAgent struct {
	p            *cairntest.Proc
	metrics, api string // host:port
}

// startListenersAgent starts an agent of listenersConfig's and waits for
// it to run.
func startListenersAgent(t *testing.T) listenersAgent {
	t.Helper()
	bin := cairntest.Build(t, "cairn")
	dir := t.TempDir()
	config, token, data := filepath.Join(dir, "pipeline.yaml"), filepath.Join(dir, "token"), filepath.Join(dir, "data")
	if err := os.WriteFile(token, []byte(e2eToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics, apiPort := freePort(t), freePort(t)
	if err := os.WriteFile(config, fmt.Appendf(nil, listenersConfig, data, metrics, apiPort, token), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgent(t, bin, config)
	cairntest.AwaitStatus(t, filepath.Join(data, "cairn.sock"), "the agent running", 30*time.Second, func(st api.Status) bool { return st.State == "running" })
	return listenersAgent{p: p, metrics: fmt.Sprintf("127.0.0.1:%d", metrics), api: fmt.Sprintf("127.0.0.1:%d", apiPort)}
}

// answerBound is how long an authorised caller waits at most for an
// answer under a flood: generous for a loaded machine, and three times
// that under an emulator; the flood of finding 6 of issue 41 kept one
// waiting for tens of seconds.
func answerBound() time.Duration {
	if cairntest.Emulator() != "" {
		return 15 * time.Second
	}
	return 5 * time.Second
}

// prober asks a listenersAgent what its callers ask, each request on a
// new connection, as curl does, and bounded by answerBound.
type prober struct {
	a      listenersAgent
	client *http.Client
}

func newProber(a listenersAgent) prober {
	return prober{a: a, client: &http.Client{Timeout: answerBound(), Transport: &http.Transport{DisableKeepAlives: true}}}
}

// get does GET url (with the token if authorised) and returns the status
// code and how long the answer took.
func (p prober) get(url string, authorised bool) (int, time.Duration, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, 0, err
	}
	if authorised {
		req.Header.Set("Authorization", "Bearer "+e2eToken)
	}
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, time.Since(start), err
	}
	return resp.StatusCode, time.Since(start), nil
}

// answers probes the agent's /status (authorised) and /metrics once a
// second until ctx is done, and returns what went wrong, each as "what at
// +elapsed: why", and the slowest answer.
func (p prober) answers(ctx context.Context) (failures []string, slowest time.Duration) {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, c := range []struct{ what, url string }{
			{"an authorised GET /status", "http://" + p.a.api + "/status"},
			{"GET /metrics", "http://" + p.a.metrics + "/metrics"},
		} {
			code, took, err := p.get(c.url, true)
			slowest = max(slowest, took)
			if err != nil || code != http.StatusOK {
				failures = append(failures, fmt.Sprintf("%s at +%.1fs: %d, %v (after %.1fs)", c.what, time.Since(start).Seconds(), code, err, took.Seconds()))
			}
		}
		select {
		case <-ctx.Done():
			return failures, slowest
		case <-tick.C:
		}
	}
}

// slowHeaderFlood opens rate connections a second to addr until ctx is
// done, each sending the start of a request header and then a byte of it
// every half second, as long as the agent keeps the connection (at most
// 10 s), as finding 6 of issue 41 did. It returns once every connection it
// opened is closed, and how many it opened.
func slowHeaderFlood(ctx context.Context, addr string, rate int) int {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	opened := 0
	for {
		select {
		case <-ctx.Done():
			return opened
		case <-tick.C:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue // the kernel's queue is full: that is the flood's effect, and the probes measure it
		}
		opened++
		wg.Go(func() {
			defer c.Close()
			trickle := time.NewTicker(500 * time.Millisecond)
			defer trickle.Stop()
			until := time.After(10 * time.Second)
			if _, err := io.WriteString(c, "GET /status HTTP/1.1\r\nHost: gw\r\nX-Slow: "); err != nil {
				return
			}
			for {
				select {
				case <-ctx.Done():
					return
				case <-until:
					return
				case <-trickle.C:
				}
				if _, err := c.Write([]byte("a")); err != nil {
					return // the agent closed it
				}
			}
		})
	}
}

// slowCaller asks addr for /status with the token from another host than
// the flood's (127.0.0.2, on loopback), sending its header in two parts 2
// s apart, over and over until ctx is done, and returns what went wrong.
// A flood of 50 connections a second from one host opens more than a
// listener holds in those 2 s: only a limit that displaces the flood's
// own connections first answers it.
func slowCaller(ctx context.Context, addr string) (failures []string) {
	start := time.Now()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			failures = append(failures, fmt.Sprintf("a slow caller from 127.0.0.2 at +%.1fs: %v", time.Since(start).Seconds(), err))
			continue
		}
		io.WriteString(c, "GET /status HTTP/1.1\r\nHost: gw\r\n")
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second): // a slow client, not a wait for an event
		}
		io.WriteString(c, "Authorization: Bearer "+e2eToken+"\r\nConnection: close\r\n\r\n")
		switch code, err := readAnswer(c, answerBound()); {
		case err != nil:
			failures = append(failures, fmt.Sprintf("a slow caller from 127.0.0.2 at +%.1fs: %v", time.Since(start).Seconds(), err))
		case code != http.StatusOK:
			failures = append(failures, fmt.Sprintf("a slow caller from 127.0.0.2 at +%.1fs: answered %d (0: closed without an answer)", time.Since(start).Seconds(), code))
		}
		c.Close()
	}
	return failures
}

// TestSlowHeaderFloodLeavesAPIAnswering is finding 6 of issue 41: 30
// connections a second, each sending part of a header, made an authorised
// `curl -m 30 …/status` fail at +50 s and +84 s, and a scrape took 18 s.
// Here 50 a second to each of the TCP control API and the metrics for 20
// s: an authorised GET /status and a GET /metrics, once a second
// meanwhile, must each be answered within answerBound, as must a caller
// from another host that sends its header slowly (slowCaller), and the
// agent must hold no more than its connection limit.
func TestSlowHeaderFloodLeavesAPIAnswering(t *testing.T) {
	a := startListenersAgent(t)
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", a.p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before, most := fds(), 0

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	opened := make([]int, 2)
	for i, addr := range []string{a.api, a.metrics} {
		wg.Go(func() { opened[i] = slowHeaderFlood(ctx, addr, 50) })
	}
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				most = max(most, fds()-before)
			}
		}
	})
	var slow []string
	wg.Go(func() { slow = slowCaller(ctx, a.api) })
	failures, slowest := newProber(a).answers(ctx)
	wg.Wait()
	failures = append(failures, slow...)
	t.Logf("flood: %d connections to the API, %d to the metrics; the slowest answer took %v; the agent held at most %d more descriptors", opened[0], opened[1], slowest, most)
	if len(failures) > 0 {
		t.Fatalf("under the flood:\n%s", strings.Join(failures, "\n"))
	}
	if most > 2*listenerConnections+16 { // the limits, and a few files the agent opens meanwhile
		t.Fatalf("the agent held %d more file descriptors under the flood, over its limits", most)
	}
	select {
	case <-a.p.Ended():
		t.Fatalf("the agent ended under the flood: %v\n%s", a.p.Wait(), a.p.Log())
	default:
	}
}

// listenerConnections is how many connections each listener of the
// agent's holds at most (agent.maxConnections).
const listenerConnections = 64

// readAnswer reads what the agent answers on c within d: the status code
// of its response, or 0 if it closed c without one; it fails when c stays
// open and silent for d.
func readAnswer(c net.Conn, d time.Duration) (int, error) {
	c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return 0, fmt.Errorf("neither answered nor closed within %v", d)
		}
		return 0, nil // closed (EOF, reset) before a whole response
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// attack is one generated caller of the TCP control API's that is not
// authorised: what it sends, and how.
type attack struct {
	kind string
	// head is sent at once; then trickle, a byte every pause.
	head, trickle []byte
	pause         time.Duration
}

// anAttack generates an attack of one of the kinds a flood or a fuzzer
// sends: random bytes, a partial request line, a header over the limit,
// a wrong or missing token, a malformed header, a slow header, a slow
// body, a connection that sends nothing.
func anAttack(r *rand.Rand) attack {
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	token := [...]string{"", "Authorization: Bearer wrong\r\n", "Authorization: Bearer " + e2eToken[:len(e2eToken)-1] + "\r\n",
		"Authorization: Basic " + e2eToken + "\r\n", "Authorization: bearer " + e2eToken + "x\r\n"}[r.IntN(5)]
	path := [...]string{"/status", "/stop", "/checkpoint", "/events", "/../../etc/passwd", "/" + strings.Repeat("a", r.IntN(4000))}[r.IntN(6)]
	method := [...]string{"GET", "POST", "DELETE", "BREW", "G\x00T"}[r.IntN(5)]
	a := attack{pause: time.Duration(50+r.IntN(450)) * time.Millisecond}
	switch r.IntN(8) {
	case 0:
		a.kind, a.head = "random bytes", random(1+r.IntN(8192))
	case 1:
		line := method + " " + path + " HTTP/1.1\r\n"
		a.kind, a.head = "a partial request line", []byte(line[:r.IntN(len(line))])
	case 2:
		a.kind, a.head = "a header over the limit", fmt.Appendf(nil, "GET /status HTTP/1.1\r\nHost: gw\r\n%sX-Big: %s\r\n\r\n", token, strings.Repeat("b", 16<<10+r.IntN(64<<10)))
	case 3:
		a.kind, a.head = "a request without the token", fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: gw\r\n%s\r\n", method, path, token)
	case 4:
		a.kind, a.head = "a malformed header", fmt.Appendf(nil, "GET /status HTTP/1.1\r\nHost: gw\r\n%s%s\r\n\r\n", token, random(1+r.IntN(200)))
	case 5:
		a.kind, a.head, a.trickle = "a slow header", fmt.Appendf(nil, "GET /status HTTP/1.1\r\nHost: gw\r\n%s", token), random(20+r.IntN(200))
	case 6:
		a.trickle = random(1 + r.IntN(2000))
		a.kind, a.head = "a slow body", fmt.Appendf(nil, "POST /stop HTTP/1.1\r\nHost: gw\r\n%sContent-Length: %d\r\n\r\n", token, len(a.trickle))
	default:
		a.kind = "a silent connection"
	}
	return a
}

// run makes the attack on addr and returns the agent's answer (0: the
// connection closed without one), and what went wrong: an answer that is
// not a refusal, or a connection neither answered nor closed in time.
func (a attack) run(ctx context.Context, addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil // the agent's backlog is full; nothing to hold it to
	}
	defer c.Close()
	if _, err := c.Write(a.head); err != nil {
		return 0, nil // closed already
	}
	answered := make(chan struct{})
	var code int
	var readErr error
	go func() {
		// The header deadline is 5 s, so an idle connection closes
		// within it; a slow body's request is answered at once.
		code, readErr = readAnswer(c, 15*time.Second)
		close(answered)
	}()
	trickle := time.NewTicker(a.pause)
	defer trickle.Stop()
sending:
	for _, b := range a.trickle {
		select {
		case <-answered:
			break sending
		case <-ctx.Done():
			break sending
		case <-trickle.C:
		}
		if _, err := c.Write([]byte{b}); err != nil {
			break // the agent closed it
		}
	}
	<-answered
	switch {
	case readErr != nil:
		return 0, fmt.Errorf("%s: %v", a.kind, readErr)
	case code != 0 && !refusals[code]:
		return code, fmt.Errorf("%s: answered %d without the token", a.kind, code)
	}
	return code, nil
}

// refusals are the answers the TCP control API may give a caller without
// its token: the agent's 401, and net/http's to a request it cannot read
// (400), a header over the limit (431), a transfer coding it does not
// know (501), a version it does not speak (505).
var refusals = map[int]bool{400: true, 401: true, 431: true, 501: true, 505: true}

var apiSeed = flag.Uint64("apiflood.seed", 0, "seed of TestAPIUnderGeneratedRequests (0: from the clock)")

// TestAPIUnderGeneratedRequests is the API's part of item 7 of issue 41:
// 600 generated callers without the token (anAttack: random bytes,
// partial request lines, headers over the limit, wrong tokens, slow
// headers and bodies, silent connections), some of them in bursts of up
// to 100 at once, against the TCP control API over about 10 s. Each must
// be refused (refusals) or closed, never served, and never held open
// past its header deadline; an authorised GET /status and a GET /metrics,
// once a second meanwhile, must each be answered within answerBound; the
// agent must not end. The seed is logged; -apiflood.seed runs one again.
func TestAPIUnderGeneratedRequests(t *testing.T) {
	seed := *apiSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-apiflood.seed=%d runs it again)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 41))
	a := startListenersAgent(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		wrong    []string
		attacks  sync.WaitGroup
		kinds    = make(map[string]int)
		answers  = make(map[int]int) // by status code; 0: closed
		launched = make(chan struct{})
	)
	go func() {
		defer close(launched)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; n < 600; {
			<-tick.C
			burst := 1
			if r.IntN(50) == 0 {
				burst = 20 + r.IntN(81)
			}
			for ; burst > 0 && n < 600; burst, n = burst-1, n+1 {
				at := anAttack(r)
				kinds[at.kind]++
				attacks.Go(func() {
					code, err := at.run(ctx, a.api)
					mu.Lock()
					defer mu.Unlock()
					answers[code]++
					if err != nil {
						wrong = append(wrong, err.Error())
					}
				})
			}
		}
	}()
	probes, probed := context.WithCancel(context.Background())
	defer probed()
	go func() {
		<-launched
		attacks.Wait()
		probed()
	}()
	failures, slowest := newProber(a).answers(probes)
	t.Logf("callers: %v; answers: %v (0: closed); the slowest authorised answer took %v", kinds, answers, slowest)
	if len(failures) > 0 {
		t.Errorf("authorised callers under the generated requests (seed %d):\n%s", seed, strings.Join(failures, "\n"))
	}
	if len(wrong) > 0 {
		t.Errorf("generated requests (seed %d):\n%s", seed, strings.Join(wrong, "\n"))
	}
	select {
	case <-a.p.Ended():
		t.Fatalf("the agent ended (seed %d): %v\n%s", seed, a.p.Wait(), a.p.Log())
	default:
	}
	if log := a.p.Log(); strings.Contains(log, "panic") {
		t.Fatalf("the agent logged a panic (seed %d):\n%s", seed, log)
	}
}
