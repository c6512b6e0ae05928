//go:build !linux

package broker

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
)

// agentSocketName is a new name for the unix socket of an embedded
// broker's agentClientListener: where there are no abstract sockets, a
// file in the temporary directory.
func agentSocketName() string {
	b := make([]byte, 6)
	rand.Read(b)
	return filepath.Join(os.TempDir(), "cairn-broker-"+hex.EncodeToString(b)+".sock")
}

// ownPeer lets in every connection where there is no SO_PEERCRED: the
// agent's credentials still guard the socket.
func ownPeer(net.Conn) error { return nil }
