// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/namecheck"
)

// nameChecked reports whether a tunnel to t, opened to addr, is judged by
// the name in its first bytes (package namecheck), and whether strictly:
// behind a CDN an allowed name's address serves every other name too,
// chosen by the TLS SNI and the HTTP Host inside the tunnel (CONNECT
// cdn.example:8443, then a ClientHello for attacker.example). The rule is
// the datapath's (allowlist.Verify.ChecksTCP and Strict): every port but
// for "verify": "address"; strictly (TLS or HTTP only) on 80 and 443 and
// for "verify": "name". IP literals are judged by address, as are
// addresses an IP or CIDR entry allows on the port, and loopback.
func nameChecked(pol *allowlist.Policy, t target, addr netip.Addr) (checked, strict bool) {
	if t.addr.IsValid() || addr.IsLoopback() {
		return false, false
	}
	name, err := allowlist.NormalizeName(t.host)
	if err != nil || allowlist.IsLoopbackName(name) {
		return false, false
	}
	if r, ok := pol.AddrPorts(addr); ok && r.Ports.Allows(allowlist.ProtoTCP, t.port) {
		return false, false
	}
	e, ok := pol.MatchName(name)
	if !ok || !e.Verify.ChecksTCP(t.port) {
		return false, false
	}
	return true, e.Verify.Strict(t.port)
}

// checkName reads the first flight of an open tunnel to up (at upAddr,
// the address the proxy chose) and judges the name it carries, before a
// byte of it goes upstream. On a refusal the client's connection is reset
// (the client fails at once, as with the datapath's check), an event names
// the name and why, and ok is false; otherwise the flight has been sent
// to up and the tunnel goes on. Where the check is strict the wait for
// the flight is bounded by Config.Timeout; where it is not (a port other
// than 80 and 443), what upstream sends meanwhile goes to the client (a
// server that speaks first, SSH's), the wait is the client's, and down is
// that copy, which the tunnel finishes.
func (p *Proxy) checkName(cc *clientConn, ev Event, t target, up net.Conn, upAddr netip.Addr) (ok bool, down *downCopy) {
	checked, strict := nameChecked(p.policy(), t, upAddr)
	if !checked {
		return true, nil
	}
	cc.lim.unlimit()
	inspect := namecheck.Inspect
	if strict {
		_ = cc.SetReadDeadline(time.Now().Add(p.cfg.Timeout))
	} else {
		inspect = namecheck.InspectAny
		_ = cc.SetDeadline(time.Time{})
		down = p.startDown(cc.Conn, up)
	}
	first, f, err := namecheck.ReadFlight(cc.br, inspect)
	if err != nil && !strict && len(first) == 0 && errors.Is(err, io.EOF) {
		// The client ended its side having sent nothing (it only
		// reads): nothing to judge where other protocols pass.
		return true, down
	}
	if err != nil {
		if !errors.Is(err, namecheck.ErrIncomplete) && f.Problem == "" {
			// The client went away before a judgement: nothing to report.
			return false, down
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
		return false, down
	}
	_ = up.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	if _, err := up.Write(first); err != nil {
		return false, down
	}
	_ = up.SetWriteDeadline(time.Time{})
	p.stats.up.Add(uint64(len(first)))
	return true, down
}
