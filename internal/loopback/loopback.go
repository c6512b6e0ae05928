// Package loopback finds free TCP ports on 127.0.0.1, for servers that
// take a port number rather than a listener: the agent's embedded broker
// and control API, mosquitto, the S3 test server.
package loopback

import "net"

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Another process may take it before the caller binds it; the callers here
// start their server at once.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
