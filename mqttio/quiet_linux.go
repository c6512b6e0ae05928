package mqttio

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// Quiet returns conn reading and writing with read(2) and write(2) made
// directly, not through Go's system call entry, where conn is a socket's
// (TCP or unix); else conn itself. It keeps the contract of net.Conn
// (deadlines, Close: TestQuietConnIsAConn). The agent's MQTT clients
// reach their brokers through it, and an embedded broker (package
// broker) its clients.
//
// Each MQTT packet that reaches an idle agent would wake Go's sysmon
// thread: the read that takes it from the socket enters a system call
// while sysmon sleeps, which wakes sysmon to watch the call, and sysmon
// then sleeps in 20 µs steps until the process is idle again; so would
// each write of an embedded broker's, which sends every message on and
// acknowledges it. At a gateway's pace, a reading every few
// milliseconds, that was two wake-ups of a thread a message, a quarter
// of the agent's CPU by perf's count (docs/durability.md). A read or
// write of a non-blocking socket never blocks, so it needs no watching:
// made raw, it wakes no thread, and while the socket has nothing to read
// or no room to write, the goroutine waits in Go's network poller, as
// with conn.
func Quiet(conn net.Conn) net.Conn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return &quietConn{Conn: conn, raw: rc}
}

// quietConn is a socket's connection read and written with raw system
// calls (Quiet).
type quietConn struct {
	net.Conn
	raw syscall.RawConn
}

// Read reads as net.Conn's Read does: what the socket holds, waiting in
// the network poller (and for the read deadline) while it holds nothing;
// io.EOF once the peer has closed; other errors as *net.OpError.
func (c *quietConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case 0:
				n = int(r)
				return true
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // nothing yet: wait in the poller
			default:
				errno = e
				return true
			}
		}
	})
	switch {
	case err != nil || errno != 0:
		return 0, c.opError("read", err, errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes as net.Conn's Write does: all of p, waiting in the network
// poller (and for the write deadline) while the socket has no room; else
// what it wrote and an *net.OpError.
func (c *quietConn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // no room yet: wait in the poller
			default:
				errno = e
				return true
			}
		}
		return true
	})
	if err != nil || errno != 0 {
		return n, c.opError("write", err, errno)
	}
	return n, nil
}

// opError is the error of a failed op as net.Conn's methods give it: the
// poller's (deadline, closed), else the system call's.
func (c *quietConn) opError(op string, err error, errno syscall.Errno) error {
	if err == nil {
		err = errno
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
