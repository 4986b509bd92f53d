// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestVerifierSplicesAndResets runs the verifier on loopback with a fake
// datapath: every connection "meant to go" to an echo server that records
// what it received.
func TestVerifierSplicesAndResets(t *testing.T) {
	backend, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	var mu sync.Mutex
	var got [][]byte
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 4096)
				n, _ := c.Read(b)
				mu.Lock()
				got = append(got, b[:n])
				mu.Unlock()
				_, _ = c.Write([]byte("echo:"))
				_, _ = c.Write(b[:n])
			}()
		}
	}()
	dst := netip.MustParseAddrPort(backend.Addr().String())
	policy, _ := allowlist.FromStrings([]string{"allowed.example"})
	var refusals []Refusal
	v := New(Config{
		Policy:      func() *allowlist.Policy { return policy },
		Origin:      func(netip.AddrPort) (Origin, bool) { return Origin{Dst: dst, PID: 42, Comm: "curl"}, true },
		LearnedFrom: func(netip.Addr) []string { return []string{"allowed.example"} },
		OnRefuse:    func(r Refusal) { mu.Lock(); refusals = append(refusals, r); mu.Unlock() },
	})
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = v.Serve(l) }()
	defer v.Close()

	send := func(req string) (string, error) {
		c, err := net.Dial("tcp4", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(req)); err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	ok := "GET / HTTP/1.1\r\nHost: allowed.example\r\n\r\n"
	if b, err := send(ok); err != nil || b != "echo:"+ok {
		t.Fatalf("allowed: %q %v", b, err)
	}
	bad := "GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n"
	if _, err := send(bad); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("refused: %v, want a reset", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the backend received %d requests: %q", len(got), got)
	}
	want := "refused curl[42] -> " + dst.String() + " (HTTP Host attacker.example): the address was allowed for allowed.example"
	if len(refusals) != 1 || refusals[0].String() != want {
		t.Fatalf("refusals %v, want %q", refusals, want)
	}
}
