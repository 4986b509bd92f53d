// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// SOCKS wire constants (RFC 1928).
const (
	socksVersion4 = 0x04
	socksVersion5 = 0x05

	socksMethodNoAuth       = 0x00
	socksMethodNoAcceptable = 0xff

	socksCmdConnect      = 0x01
	socksCmdBind         = 0x02
	socksCmdUDPAssociate = 0x03

	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04
)

// serveSOCKS5 speaks SOCKS5 with the "no authentication" method and the
// CONNECT command only. A domain name (ATYP 3) is resolved by the proxy,
// under the same rules as HTTP: this is socks5h, and a client that
// resolves locally (socks5://) sends an IP literal that only a CIDR entry
// allows. Bytes that break the protocol close the connection without a
// reply: there is no client to explain anything to.
func (p *Proxy) serveSOCKS5(cc *clientConn) {
	ev := Event{Client: cc.peer, Protocol: ProtoSOCKS5}
	bad := func(format string, args ...any) {
		p.emitFailure(ev, malformed(format, args...))
	}

	var greet [2]byte
	if _, err := io.ReadFull(cc.br, greet[:]); err != nil {
		bad("SOCKS5 greeting: %v", err)
		return
	}
	if greet[1] == 0 {
		bad("SOCKS5 greeting offers no authentication method")
		return
	}
	methods := make([]byte, greet[1])
	if _, err := io.ReadFull(cc.br, methods); err != nil {
		bad("SOCKS5 greeting: %v", err)
		return
	}
	_ = cc.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	if bytes.IndexByte(methods, socksMethodNoAuth) < 0 {
		// The proxy is reachable from the session only; credentials would
		// add nothing but a place to leak them.
		_, _ = cc.Write([]byte{socksVersion5, socksMethodNoAcceptable})
		bad("SOCKS5 client offers methods %x but not 00 (no authentication), the only one sluice accepts", methods)
		return
	}
	if _, err := cc.Write([]byte{socksVersion5, socksMethodNoAuth}); err != nil {
		return
	}

	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(cc.br, req[:]); err != nil {
		bad("SOCKS5 request: %v", err)
		return
	}
	if req[0] != socksVersion5 {
		bad("SOCKS5 request with version %d", req[0])
		return
	}
	if req[2] != 0 {
		bad("SOCKS5 request with reserved byte %#02x, want 00", req[2])
		return
	}
	host, err := readSOCKSAddr(cc.br, req[3])
	if err != nil {
		bad("SOCKS5 request: %v", err)
		if errors.Is(err, errAtyp) {
			p.socksFail(cc, socksAddrTypeUnsupported)
		}
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(cc.br, pb[:]); err != nil {
		bad("SOCKS5 request: %v", err)
		return
	}
	port := binary.BigEndian.Uint16(pb[:])
	ev.Host, ev.Port = host, port

	if req[1] != socksCmdConnect {
		bad("SOCKS5 command %s is not supported (CONNECT only)", socksCommand(req[1]))
		p.socksFail(cc, socksCommandUnsupported)
		return
	}
	t, err := newTarget(host, port)
	if err != nil {
		bad("SOCKS5 CONNECT %s: %v", hostPort(host, port), err)
		p.socksFail(cc, socksGeneralFailure)
		return
	}
	addrs, f := p.decide(p.ctx, &ev, t)
	if f != nil {
		p.emitFailure(ev, f)
		p.socksFail(cc, f.socks)
		return
	}
	up, upAddr, f := p.openUpstream(addrs, t.port)
	if f != nil {
		p.emitFailure(ev, f)
		p.socksFail(cc, f.socks)
		return
	}
	defer p.closeUpstream(up)
	if !p.socksReply(cc, socksSucceeded, up.LocalAddr()) {
		return
	}
	ok, down := p.checkName(cc, ev, t, up, upAddr)
	if !ok {
		return
	}
	p.stats.socks5.allowed.Add(1)
	p.tunnel(cc, up, down)
}

var errAtyp = errors.New("unsupported address type")

// readSOCKSAddr reads DST.ADDR and returns it as a host: an IP literal or
// the domain name as sent (decide normalizes it).
func readSOCKSAddr(r io.Reader, atyp byte) (string, error) {
	switch atyp {
	case socksAtypIPv4:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		return netip.AddrFrom4(b).String(), nil
	case socksAtypIPv6:
		var b [16]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		return netip.AddrFrom16(b).String(), nil
	case socksAtypDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return "", err
		}
		if n[0] == 0 {
			return "", fmt.Errorf("empty domain name")
		}
		b := make([]byte, n[0])
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return string(b), nil
	}
	return "", fmt.Errorf("%w %#02x", errAtyp, atyp)
}

func socksCommand(c byte) string {
	switch c {
	case socksCmdBind:
		return "BIND"
	case socksCmdUDPAssociate:
		return "UDP ASSOCIATE"
	}
	return fmt.Sprintf("%#02x", c)
}

// socksReply writes a reply; bound is the upstream's local address on
// success, and 0.0.0.0:0 otherwise. It reports whether the write worked.
func (p *Proxy) socksReply(cc *clientConn, code byte, bound net.Addr) bool {
	ap := netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	if t, ok := bound.(*net.TCPAddr); ok {
		ap = t.AddrPort()
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	b := []byte{socksVersion5, code, 0}
	if ap.Addr().Is4() {
		b = append(b, socksAtypIPv4)
	} else {
		b = append(b, socksAtypIPv6)
	}
	b = append(b, ap.Addr().AsSlice()...)
	b = binary.BigEndian.AppendUint16(b, ap.Port())
	_ = cc.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	_, err := cc.Write(b)
	return err == nil
}

// socksFail answers a request that gets no connection, and lingers like an
// HTTP refusal so the reply is not lost to a reset.
func (p *Proxy) socksFail(cc *clientConn, code byte) {
	if p.socksReply(cc, code, nil) {
		closeAfterReply(cc.Conn)
	}
}

// refuseSOCKS4 answers a SOCKS4 or 4a client with "request rejected"
// (0x5B), so it fails at once instead of waiting: SOCKS4 has no IPv6 and
// 4a no way to say why.
func (p *Proxy) refuseSOCKS4(cc *clientConn) {
	p.emit(Event{Kind: EventMalformed, Client: cc.peer,
		Reason: "SOCKS4 is not supported: use SOCKS5 (socks5h://)"})
	_ = cc.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	if _, err := cc.Write([]byte{0x00, 0x5b, 0, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	closeAfterReply(cc.Conn)
}
