// Package loopback finds free TCP ports on 127.0.0.1, for servers that
// take a port number rather than a listener: the agent's embedded broker
// and control API, mosquitto, the S3 test server.
package loopback

import (
	"fmt"
	"net"
	"sync"
)

var (
	mu    sync.Mutex
	given = make(map[int]bool) // ports FreePort returned in this process
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that it has not returned before in this process: a caller that asks for
// two ports before binding either (an agent's broker and its metrics, say)
// gets two, though the kernel may hand the same free port out twice.
// Another process may take it before the caller binds it; the callers here
// start their server at once.
func FreePort() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !given[port] {
			given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("loopback: no port that was not given out already in 100 tries")
}
