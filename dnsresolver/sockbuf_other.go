// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package dnsresolver

import "net"

const socketBuffer = 4 << 20

func growReadBuffer(c *net.UDPConn) { _ = c.SetReadBuffer(socketBuffer) }

// msgTrunc: elsewhere a datagram that fills its buffer counts as cut.
const msgTrunc = 0
