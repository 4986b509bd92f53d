// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestPeekFlightLeavesTheBytesQueued: PeekFlight judges a flight that
// arrives in pieces and leaves every byte, the flight and what follows it,
// to be read afterwards; an incomplete flight is ErrIncomplete at the read
// deadline.
func TestPeekFlightLeavesTheBytesQueued(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := a.(*net.TCPConn)
	defer c.Close()
	head := "GET / HTTP/1.1\r\nHost: allowed.example\r\n\r\n"
	go func() {
		_, _ = client.Write([]byte(head[:10]))
		time.Sleep(30 * time.Millisecond)
		_, _ = client.Write([]byte(head[10:] + "body"))
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, f, err := PeekFlight(c)
	if err != nil || f.Proto != ProtoHTTP || f.Name != "allowed.example" {
		t.Fatalf("PeekFlight: %q %+v %v", b, f, err)
	}
	got := make([]byte, len(head)+4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != head+"body" {
		t.Fatalf("read after the peek: %q %v", got, err)
	}

	if _, err := client.Write([]byte("GET / HTTP/1.1\r\nHo")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, _, err := PeekFlight(c); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("an incomplete flight: %v, want ErrIncomplete", err)
	}
}
