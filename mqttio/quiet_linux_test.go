package mqttio

import (
	"fmt"
	"net"
	"net/url"
	"testing"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/net/nettest"
)

// TestQuietConnIsAConn holds a quiet socket's connection (Quiet) to the
// contract of net.Conn, as x/net's conformance test states it: reads and
// writes in both directions, deadlines that interrupt a waiting read and
// can be moved, Close that ends a waiting read, concurrent use, and
// io.EOF once the peer has closed. Both ends are quiet, over TCP and
// over a unix socket, the two kinds the agent reads from.
func TestQuietConnIsAConn(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
				ln, err := nettest.NewLocalListener(network)
				if err != nil {
					return nil, nil, nil, err
				}
				defer ln.Close()
				accepted := make(chan net.Conn, 1)
				go func() {
					c, _ := ln.Accept()
					accepted <- c
				}()
				if c1, err = net.Dial(ln.Addr().Network(), ln.Addr().String()); err != nil {
					return nil, nil, nil, err
				}
				c2 = <-accepted
				if c2 == nil {
					c1.Close()
					return nil, nil, nil, net.ErrClosed
				}
				stop = func() { c1.Close(); c2.Close() }
				c1, c2 = Quiet(c1), Quiet(c2)
				if _, ok := c1.(*quietConn); !ok {
					stop()
					return nil, nil, nil, fmt.Errorf("Quiet(%T) is not quiet", c1)
				}
				return c1, c2, stop, nil
			})
		})
	}
}

// TestClientConnectionsAreQuiet: the connections dial opens to a
// broker, over TCP and over a unix socket, are read and written through
// Quiet, under the buffers paho reads and writes.
func TestClientConnectionsAreQuiet(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		ln, err := nettest.NewLocalListener(network)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		u := &url.URL{Scheme: network, Host: ln.Addr().String()}
		if network == "unix" {
			u = &url.URL{Scheme: network, Path: ln.Addr().String()}
		}
		conn, err := dial(u, *paho.NewClientOptions(), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if bc, ok := conn.(*bufferedConn); !ok {
			t.Errorf("%s: dial returned a %T, not a bufferedConn", network, conn)
		} else if _, ok := bc.Conn.(*quietConn); !ok {
			t.Errorf("%s: dial's connection reads a %T, not a quietConn", network, bc.Conn)
		}
	}
}
