// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// socksRequest builds a CONNECT (or other cmd) request for host:port;
// host is sent as IPv4 or IPv6 when it parses as one, else as a domain.
func socksRequest(cmd byte, host string, port uint16) []byte {
	b := []byte{socksVersion5, cmd, 0}
	if a, err := netip.ParseAddr(host); err == nil && a.Zone() == "" {
		if a.Is4() {
			b = append(b, socksAtypIPv4)
		} else {
			b = append(b, socksAtypIPv6)
		}
		b = append(b, a.AsSlice()...)
	} else {
		b = append(b, socksAtypDomain, byte(len(host)))
		b = append(b, host...)
	}
	return binary.BigEndian.AppendUint16(b, port)
}

var greetNoAuth = []byte{socksVersion5, 1, socksMethodNoAuth}

// TestSOCKS5 runs SOCKS5 exchanges byte for byte: the client sends send,
// and must read exactly reply and then see the connection closed (or, for
// a success, a working tunnel).
func TestSOCKS5(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		policy:   mustPolicy(t, "allowed.test", "nx.test", "203.0.113.0/28"),
		resolver: map[string]string{"allowed.test": "203.0.113.10", "rebind.test": "10.0.0.5"},
	})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	fail := func(code byte) []byte { return []byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0} }
	ok := []byte{5, 0}
	for _, tc := range []struct {
		name  string
		send  []byte
		reply []byte // expected bytes before EOF; nil for a tunnel
		dial  string
		event EventKind
		why   string
	}{
		{name: "domain", send: cat(greetNoAuth, socksRequest(1, "allowed.test", 443)), dial: "203.0.113.10:443"},
		{name: "domain normalized", send: cat(greetNoAuth, socksRequest(1, "ALLOWED.TEST.", 443)), dial: "203.0.113.10:443"},
		{name: "ipv4 covered", send: cat(greetNoAuth, socksRequest(1, "203.0.113.5", 22)), dial: "203.0.113.5:22"},
		{name: "ip literal as domain", send: cat(greetNoAuth, socksRequest(1, "203.0.113.5", 22)[:3], []byte{3, 11}, []byte("203.0.113.5"), []byte{0, 22}), dial: "203.0.113.5:22"},
		{name: "several methods", send: cat([]byte{5, 3, 2, 1, 0}, socksRequest(1, "allowed.test", 443)), dial: "203.0.113.10:443"},

		{name: "denied domain", send: cat(greetNoAuth, socksRequest(1, "evil.example", 443)), reply: cat(ok, fail(socksNotAllowed)),
			event: EventRefused, why: "evil.example is not in the allowlist"},
		{name: "denied ipv4", send: cat(greetNoAuth, socksRequest(1, "203.0.113.20", 443)), reply: cat(ok, fail(socksNotAllowed)),
			event: EventRefused, why: "no allowlist entry covers"},
		{name: "denied ipv6", send: cat(greetNoAuth, socksRequest(1, "2001:db8:3::20", 443)), reply: cat(ok, fail(socksNotAllowed)),
			event: EventRefused, why: "no allowlist entry covers"},
		{name: "rebinding", send: cat(greetNoAuth, socksRequest(1, "rebind.test", 443)), reply: cat(ok, fail(socksNotAllowed)),
			event: EventRefused, why: "rebind.test is not in the allowlist"},
		{name: "unresolvable", send: cat(greetNoAuth, socksRequest(1, "nx.test", 443)), reply: cat(ok, fail(socksHostUnreachable)),
			event: EventFailed, why: "resolving nx.test"},
		{name: "bind", send: cat(greetNoAuth, socksRequest(socksCmdBind, "allowed.test", 443)), reply: cat(ok, fail(socksCommandUnsupported)),
			event: EventMalformed, why: "BIND is not supported"},
		{name: "udp associate", send: cat(greetNoAuth, socksRequest(socksCmdUDPAssociate, "0.0.0.0", 0)), reply: cat(ok, fail(socksCommandUnsupported)),
			event: EventMalformed, why: "UDP ASSOCIATE is not supported"},
		{name: "bad atyp", send: cat(greetNoAuth, []byte{5, 1, 0, 2, 1, 2, 3, 4, 0, 80}), reply: cat(ok, fail(socksAddrTypeUnsupported)),
			event: EventMalformed, why: "unsupported address type"},
		{name: "port 0", send: cat(greetNoAuth, socksRequest(1, "allowed.test", 0)), reply: cat(ok, fail(socksGeneralFailure)),
			event: EventMalformed, why: "port 0"},
		{name: "zoned domain", send: cat(greetNoAuth, socksRequest(1, "fe80::1%lo", 443)), reply: cat(ok, fail(socksGeneralFailure)),
			event: EventMalformed, why: "zone"},
		{name: "password only", send: []byte{5, 1, 2}, reply: []byte{5, 0xff},
			event: EventMalformed, why: "no authentication"},

		// Broken protocol: closed without a reply to the request.
		{name: "no methods", send: []byte{5, 0}, reply: []byte{}, event: EventMalformed, why: "no authentication method"},
		{name: "truncated greeting", send: []byte{5, 3, 0}, reply: []byte{}, event: EventMalformed, why: "greeting"},
		{name: "wrong request version", send: cat(greetNoAuth, []byte{4, 1, 0, 1, 127, 0, 0, 1, 0, 80}), reply: ok, event: EventMalformed, why: "version 4"},
		{name: "reserved byte", send: cat(greetNoAuth, []byte{5, 1, 1, 1, 127, 0, 0, 1, 0, 80}), reply: ok, event: EventMalformed, why: "reserved byte"},
		{name: "empty domain", send: cat(greetNoAuth, []byte{5, 1, 0, 3, 0, 0, 80}), reply: ok, event: EventMalformed, why: "empty domain"},
		{name: "truncated domain", send: cat(greetNoAuth, []byte{5, 1, 0, 3, 20, 'a', 'b'}), reply: ok, event: EventMalformed, why: "EOF"},
		{name: "truncated port", send: cat(greetNoAuth, []byte{5, 1, 0, 1, 203, 0, 113, 10, 1}), reply: ok, event: EventMalformed, why: "EOF"},
		{name: "socks4", send: []byte{4, 1, 0, 80, 203, 0, 113, 10, 0}, reply: []byte{0, 0x5b, 0, 0, 0, 0, 0, 0}, event: EventMalformed, why: "SOCKS4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.rec.Dials())
			nev := len(f.rec.Events())
			c := f.dial(t)
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.reply == nil {
				// Success: method reply, then a reply with the bound address.
				head := make([]byte, 4)
				if _, err := io.ReadFull(c, head[:2]); err != nil || head[0] != 5 || head[1] != 0 {
					t.Fatalf("method reply %x, %v", head[:2], err)
				}
				if _, err := io.ReadFull(c, head); err != nil || head[1] != socksSucceeded {
					t.Fatalf("reply %x, %v", head, err)
				}
				n := map[byte]int{1: 4, 4: 16}[head[3]]
				rest := make([]byte, n+2)
				if _, err := io.ReadFull(c, rest); err != nil {
					t.Fatal(err)
				}
				if bound, _ := netip.AddrFromSlice(rest[:n]); !bound.IsLoopback() {
					t.Errorf("bound address %v", bound)
				}
				if d := f.rec.Dials()[before:]; len(d) != 1 || d[0].String() != tc.dial {
					t.Errorf("dialled %v, want %s", d, tc.dial)
				}
				io.WriteString(c, "ping")
				c.(*net.TCPConn).CloseWrite()
				if got, err := io.ReadAll(c); string(got) != "ping" {
					t.Errorf("through the tunnel: %q, %v", got, err)
				}
				return
			}
			c.(*net.TCPConn).CloseWrite() // truncated messages end here
			got, _ := io.ReadAll(c)
			if !bytes.Equal(got, tc.reply) {
				t.Errorf("got %x, want %x then EOF", got, tc.reply)
			}
			if d := f.rec.Dials()[before:]; len(d) > 0 {
				t.Errorf("dialled %v", d)
			}
			e := f.rec.waitEvent(t, nev, func(e Event) bool { return e.Kind == tc.event })
			if !strings.Contains(e.Reason, tc.why) {
				t.Errorf("event %v, want reason containing %q", e, tc.why)
			}
		})
	}
}

// TestSOCKS5Pipelined: a client that sends greeting, request and data at
// once (no round trips) gets its data into the tunnel.
func TestSOCKS5Pipelined(t *testing.T) {
	f := newFixture(t, fixtureOpts{
		policy:   verifyPolicy(t, "allowed.test=address"),
		resolver: map[string]string{"allowed.test": "2001:db8:2::10"},
	})
	c := f.dial(t)
	msg := bytes.Join([][]byte{greetNoAuth, socksRequest(1, "allowed.test", 8443), []byte("early data")}, nil)
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 12 || got[3] != socksSucceeded || !strings.HasSuffix(string(got), "early data") {
		t.Errorf("got %q", got)
	}
	if d := f.rec.Dials(); len(d) != 1 || d[0].String() != "[2001:db8:2::10]:8443" {
		t.Errorf("dialled %v", d)
	}
}
