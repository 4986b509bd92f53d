// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/namecheck"
)

// nameChecked reports whether a tunnel to t, opened to addr, must carry
// an allowed name in its first bytes (package namecheck): behind a CDN an
// allowed name's address serves every other name too, chosen by the TLS
// SNI and the HTTP Host inside the tunnel (CONNECT cdn.example:443, then
// a ClientHello for attacker.example). The rule is the datapath's
// (allowlist.Verify.ChecksTCP): a name entry's "verify", by default ports
// 80 and 443. IP literals are judged by address, as are addresses an IP
// or CIDR entry allows on the port, and loopback.
func nameChecked(pol *allowlist.Policy, t target, addr netip.Addr) bool {
	if t.addr.IsValid() || addr.IsLoopback() {
		return false
	}
	name, err := allowlist.NormalizeName(t.host)
	if err != nil || allowlist.IsLoopbackName(name) {
		return false
	}
	if r, ok := pol.AddrPorts(addr); ok && r.Ports.Allows(allowlist.ProtoTCP, t.port) {
		return false
	}
	e, ok := pol.MatchName(name)
	return ok && e.Verify.ChecksTCP(t.port)
}

// checkName reads the first flight of an open tunnel to up (at upAddr,
// the address the proxy chose) and judges the
// name it carries, before a byte of it goes upstream. On a refusal the
// client's connection is reset (the client fails at once, as with the
// datapath's verifier), an event names the name and why, and false is
// returned; otherwise the flight has been sent to up and the tunnel goes
// on. The wait for the flight is bounded by Config.Timeout.
func (p *Proxy) checkName(cc *clientConn, ev Event, t target, up net.Conn, upAddr netip.Addr) bool {
	if !nameChecked(p.policy(), t, upAddr) {
		return true
	}
	cc.lim.unlimit()
	_ = cc.SetReadDeadline(time.Now().Add(p.cfg.Timeout))
	first, f, err := namecheck.ReadFlight(cc.br)
	if err != nil {
		if !errors.Is(err, namecheck.ErrIncomplete) && f.Problem == "" {
			// The client went away before a judgement: nothing to report.
			return false
		}
		if errors.Is(err, namecheck.ErrIncomplete) {
			f.Problem = namecheck.NoFlightWithin(p.cfg.Timeout)
		}
	}
	name, _ := allowlist.NormalizeName(t.host)
	if why := namecheck.Judge(p.policy(), f); why != "" {
		ev.Kind = EventRefused
		ev.Addr = upAddr
		ev.Flight = &f
		ev.Reason = namecheck.Explain(why, f.Name, []string{name})
		p.emit(ev)
		namecheck.Reset(cc.Conn)
		return false
	}
	_ = up.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	if _, err := up.Write(first); err != nil {
		return false
	}
	_ = up.SetWriteDeadline(time.Time{})
	p.stats.up.Add(uint64(len(first)))
	return true
}
