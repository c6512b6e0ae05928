package broker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"syscall"
)

// agentSocketName is a new name for the unix socket of an embedded
// broker's agentClientListener: an abstract one, which needs no file
// (and so no writable directory) and goes with the process.
func agentSocketName() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "@cairn-broker-" + hex.EncodeToString(b)
}

// ownPeer returns an error unless the process at the other end of conn, a
// unix socket's, is this one (SO_PEERCRED).
func ownPeer(conn net.Conn) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("a %T, not a unix socket's", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return credErr
	}
	if int(cred.Pid) != os.Getpid() {
		return fmt.Errorf("from process %d (uid %d), not the agent", cred.Pid, cred.Uid)
	}
	return nil
}
