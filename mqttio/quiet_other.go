//go:build !linux

package mqttio

import "net"

// Quiet returns conn: elsewhere than on Linux the agent reads sockets as
// Go does, through its system call entry (see quiet_linux.go).
func Quiet(conn net.Conn) net.Conn { return conn }
