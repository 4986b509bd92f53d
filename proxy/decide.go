// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/addrclass"
	"github.com/sluice-dev/sluice/allowlist"
)

// SOCKS5 reply codes (RFC 1928 section 6).
const (
	socksSucceeded           = 0x00
	socksGeneralFailure      = 0x01
	socksNotAllowed          = 0x02
	socksNetworkUnreachable  = 0x03
	socksHostUnreachable     = 0x04
	socksConnectionRefused   = 0x05
	socksCommandUnsupported  = 0x07
	socksAddrTypeUnsupported = 0x08
)

// failure is why a request did not get its connection, carrying the answer
// each protocol gives. Its reason is what the user reads.
type failure struct {
	kind        EventKind
	reason      string
	addr        netip.Addr
	status      int    // HTTP status
	socks       byte   // SOCKS5 reply code
	proxyStatus string // RFC 9209 Proxy-Status error type
}

func (f *failure) Error() string { return f.reason }

// refusal is the policy saying no.
func refusal(addr netip.Addr, proxyStatus, format string, args ...any) *failure {
	return &failure{
		kind: EventRefused, reason: fmt.Sprintf(format, args...), addr: addr,
		status: http.StatusForbidden, socks: socksNotAllowed, proxyStatus: proxyStatus,
	}
}

// malformed is a request sluice will not interpret.
func malformed(format string, args ...any) *failure {
	return &failure{
		kind: EventMalformed, reason: fmt.Sprintf(format, args...),
		status: http.StatusBadRequest, socks: socksGeneralFailure, proxyStatus: "http_request_error",
	}
}

// localhostAddrs are what localhost names mean (RFC 6761 section 6.3). They
// are answered here, never sent to a resolver, as the session's DNS
// resolver does.
var localhostAddrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}

// decide applies the policy to t and returns the addresses that may be
// dialled, best first. Nothing is sent towards t before decide says yes;
// the only traffic decide itself causes is the resolution of an allowed
// name.
func (p *Proxy) decide(ctx context.Context, ev *Event, t target) ([]netip.Addr, *failure) {
	pol := p.policy()
	if t.addr.IsValid() {
		a := t.addr.Unmap()
		if allowlist.IsLoopback(a) {
			return []netip.Addr{a}, nil
		}
		if r, ok := pol.AddrPorts(a); ok {
			if !r.Ports.Allows(allowlist.ProtoTCP, t.port) {
				return nil, refusal(a, "destination_port_prohibited", "%s", r.Explain(allowlist.ProtoTCP, t.port))
			}
			return []netip.Addr{a}, nil
		}
		return nil, refusal(a, "destination_ip_prohibited",
			"%v is an IP address that no allowlist entry covers (sluice allows IP literals only through IP or CIDR entries; use the host name, or allow the address)", t.addr)
	}
	name, err := allowlist.NormalizeName(t.host)
	if err != nil {
		return nil, refusal(netip.Addr{}, "http_request_denied", "%q is not a valid host name: %v", t.host, err)
	}
	ev.Host = name
	if allowlist.IsLoopbackName(name) {
		return localhostAddrs, nil
	}
	entry, ok := pol.MatchName(name)
	if !ok {
		return nil, refusal(netip.Addr{}, "http_request_denied", "%s is not in the allowlist", name)
	}
	// The port before the name is resolved: a refused port costs no query.
	if r, _ := pol.NamePorts(name); !r.Ports.Allows(allowlist.ProtoTCP, t.port) {
		return nil, refusal(netip.Addr{}, "destination_port_prohibited", "%s", r.Explain(allowlist.ProtoTCP, t.port))
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	answer, err := p.cfg.Resolve(rctx, name)
	if re := (*addrclass.RefusedError)(nil); errors.As(err, &re) {
		// A resolver that filters as the proxy does (the session's) found
		// nothing usable: the same refusal as when the proxy filters.
		return nil, refusal(netip.Addr{}, "destination_ip_prohibited", "%s", re.Error())
	}
	if err != nil {
		f := &failure{kind: EventFailed, reason: fmt.Sprintf("resolving %s: %v", name, err),
			status: http.StatusBadGateway, socks: socksHostUnreachable, proxyStatus: "dns_error"}
		if errors.Is(err, context.DeadlineExceeded) {
			f.status, f.proxyStatus = http.StatusGatewayTimeout, "dns_timeout"
		}
		return nil, f
	}
	var addrs []netip.Addr
	var dropped []addrclass.Refusal
	seen := make(map[netip.Addr]bool, len(answer))
	for _, a := range answer {
		a = a.Unmap().WithZone("")
		if !a.IsValid() || seen[a] {
			continue
		}
		seen[a] = true
		if !entry.AllowPrivate {
			if why, bad := addrclass.Rebinding(a); bad {
				dropped = append(dropped, addrclass.Refusal{Addr: a, Why: why})
				continue
			}
		}
		addrs = append(addrs, a)
	}
	switch {
	case len(addrs) == 0 && len(dropped) == 0:
		return nil, &failure{kind: EventFailed, reason: fmt.Sprintf("%s has no addresses", name),
			status: http.StatusBadGateway, socks: socksHostUnreachable, proxyStatus: "dns_error"}
	case len(addrs) == 0:
		return nil, refusal(netip.Addr{}, "destination_ip_prohibited", "%s", (&addrclass.RefusedError{Name: name, Refused: dropped}).Error())
	case len(dropped) > 0:
		parts := make([]string, len(dropped))
		for i, d := range dropped {
			parts[i] = fmt.Sprintf("%v (%s)", d.Addr, d.Why)
		}
		e := *ev
		e.Kind = EventRebinding
		e.Reason = fmt.Sprintf("dropped %s from the addresses of %s (DNS rebinding protection; add allow_private to the entry if this is intended)",
			strings.Join(parts, ", "), name)
		p.emit(e)
	}
	return addrs, nil
}

// minDialAttempt is the least time one address gets when several share the
// dial budget, as net.Dialer does: a black-holed first address must not eat
// the time of the others, nor may they be given too little to connect.
const minDialAttempt = 2 * time.Second

// dial connects to the first of addrs that answers, in order, within
// Config.Timeout in total, and returns the address it reached.
func (p *Proxy) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, netip.Addr, *failure) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	var errs []error
	var last netip.Addr
	for i, a := range addrs {
		attempt := ctx
		if left := len(addrs) - i; left > 1 {
			deadline, _ := ctx.Deadline()
			share := time.Until(deadline) / time.Duration(left)
			if share < minDialAttempt {
				share = minDialAttempt
			}
			var c context.CancelFunc
			attempt, c = context.WithTimeout(ctx, share)
			defer c()
		}
		network := "tcp6"
		if a.Is4() {
			network = "tcp4"
		}
		ap := netip.AddrPortFrom(a, port)
		conn, err := p.cfg.Dial(attempt, network, ap)
		if err == nil {
			return conn, a, nil
		}
		last = a
		errs = append(errs, fmt.Errorf("dial %v: %w", ap, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.Addr{}, dialFailure(errors.Join(errs...), last)
}

// dialFailure maps a dial error onto each protocol's vocabulary.
func dialFailure(err error, addr netip.Addr) *failure {
	f := &failure{kind: EventFailed, reason: err.Error(), addr: addr,
		status: http.StatusBadGateway, socks: socksGeneralFailure, proxyStatus: "destination_unavailable"}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		f.status, f.socks, f.proxyStatus = http.StatusGatewayTimeout, socksHostUnreachable, "connection_timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		f.socks, f.proxyStatus = socksConnectionRefused, "connection_refused"
	case errors.Is(err, syscall.ENETUNREACH):
		f.socks = socksNetworkUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH):
		f.socks = socksHostUnreachable
	}
	return f
}
