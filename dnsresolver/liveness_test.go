// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"net"
	"testing"
	"time"
)

// TestProbeEchoesOnlyItsOwnSocket: the liveness probe is answered through
// the serving loops while they run and fails once they stop; the same
// bytes from any other socket are a query like any other (a bare header
// with no question is answered FORMERR, not echoed), and raise nothing.
func TestProbeEchoesOnlyItsOwnSocket(t *testing.T) {
	e := newEnv(t, zone{}, nil)
	if err := e.r.Probe(time.Second); err != nil {
		t.Fatalf("probe of a serving resolver: %v", err)
	}
	c, err := net.Dial("udp", e.addr4())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hdr := []byte{0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(hdr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("a bare header from a client: no answer: %v", err)
	}
	if n < 12 || buf[3]&0x0f == 0 {
		t.Fatalf("a bare header from a client was echoed (% x), not answered as a query", buf[:n])
	}
	e.r.Close()
	if err := e.r.Probe(300 * time.Millisecond); err == nil {
		t.Fatal("probe of a closed resolver succeeded")
	}
}
