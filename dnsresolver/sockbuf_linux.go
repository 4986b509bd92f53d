// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net"

	"golang.org/x/sys/unix"
)

// socketBuffer is the receive buffer of the resolver's UDP sockets: a burst
// of queries (or of upstream replies) must not overflow it while handlers
// run.
const socketBuffer = 4 << 20

// growReadBuffer sets the receive buffer, past net.core.rmem_max when the
// process may (SO_RCVBUFFORCE needs CAP_NET_ADMIN, which sluice has).
func growReadBuffer(c *net.UDPConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	forced := false
	_ = rc.Control(func(fd uintptr) {
		forced = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBuffer) == nil
	})
	if !forced {
		_ = c.SetReadBuffer(socketBuffer)
	}
}

// msgTrunc is the flag recvmmsg sets on a datagram longer than its buffer.
const msgTrunc = unix.MSG_TRUNC
