// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/namecheck"
)

// Protocol is the way a client asked the proxy for a destination.
type Protocol string

// The protocols one proxy port speaks.
const (
	ProtoConnect Protocol = "connect" // HTTP CONNECT tunnel
	ProtoHTTP    Protocol = "http"    // absolute-form HTTP request (GET http://host/...)
	ProtoSOCKS5  Protocol = "socks5"  // SOCKS5 CONNECT
)

// EventKind says what an event is about.
type EventKind uint8

// The proxy's events. Allowed connections raise none: as in the datapath,
// the allowed path stays event-free and is only counted (see Stats).
const (
	// EventRefused: the policy does not allow the destination; nothing was
	// sent towards it.
	EventRefused EventKind = iota + 1
	// EventMalformed: the request could not be understood (bad syntax, a
	// relayed or smuggled target, an unsupported command); nothing was
	// sent anywhere.
	EventMalformed
	// EventFailed: the destination is allowed but could not be reached
	// (resolution or dial failed).
	EventFailed
	// EventRebinding: an allowed name resolved to some addresses sluice
	// refuses (loopback, private, link-local...) and some it accepts; the
	// connection went ahead to the accepted ones only. When no address is
	// left the event is EventRefused instead.
	EventRebinding
)

func (k EventKind) String() string {
	switch k {
	case EventRefused:
		return "refused"
	case EventMalformed:
		return "malformed"
	case EventFailed:
		return "failed"
	case EventRebinding:
		return "rebinding"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is something the user or the audit log should hear about. Config's
// OnEvent receives it.
type Event struct {
	Time     time.Time
	Kind     EventKind
	Client   netip.AddrPort // the proxy client (a loopback socket of the session)
	Protocol Protocol       // empty when the request was too malformed to tell
	Method   string         // ProtoHTTP: the request method
	Host     string         // the destination as requested: a normalized name or an IP literal
	Port     uint16
	Addr     netip.Addr // the address refused or that failed, when there is one
	Reason   string     // why, in words a user can act on
	// Flight, on an EventRefused, is what the first bytes of an open
	// tunnel named (its TLS SNI or HTTP Host) when that name was refused
	// (package namecheck); Addr is then the address the tunnel led to.
	// nil for every other event.
	Flight *namecheck.Flight
}

// String is the line a user reads, for example
// "refused connect to evil.example:443 (client 127.0.0.1:40112): evil.example is not in the allowlist".
func (e Event) String() string {
	what := string(e.Protocol)
	if e.Protocol == ProtoHTTP && e.Method != "" {
		what = "http " + e.Method
	}
	if what == "" {
		what = "request"
	}
	dest := ""
	if e.Host != "" {
		dest = " to " + hostPort(e.Host, e.Port)
	}
	if e.Flight != nil {
		// The datapath verifier's form after the client: "-> ADDR:PORT
		// (TLS SNI NAME): REASON".
		named := string(e.Flight.Proto)
		if e.Flight.Name != "" {
			named += " " + e.Flight.Name
		}
		return fmt.Sprintf("%s %s%s (client %v) -> %v (%s): %s", e.Kind, what, dest, e.Client,
			netip.AddrPortFrom(e.Addr, e.Port), named, e.Reason)
	}
	return fmt.Sprintf("%s %s%s (client %v): %s", e.Kind, what, dest, e.Client, e.Reason)
}

// Counters counts the outcomes of one protocol's requests.
type Counters struct {
	Allowed uint64 // tunnels opened or requests forwarded
	Refused uint64 // refused by the policy
	Failed  uint64 // allowed, but resolution, dial or the upstream's answer failed
}

// Stats is a snapshot of a proxy's counters, for metrics. The counters only
// grow, except Active.
type Stats struct {
	Connect Counters
	HTTP    Counters
	SOCKS5  Counters
	// Malformed counts requests refused as malformed, whatever the
	// protocol (it may be unknown).
	Malformed uint64
	// Active is the number of client connections open now.
	Active int64
	// BytesUp and BytesDown count payload relayed towards destinations and
	// back to clients (tunnels and HTTP bodies; not request heads).
	BytesUp, BytesDown uint64
}

// counters is the live form of Counters.
type counters struct{ allowed, refused, failed atomic.Uint64 }

func (c *counters) snapshot() Counters {
	return Counters{Allowed: c.allowed.Load(), Refused: c.refused.Load(), Failed: c.failed.Load()}
}

// stats is the live form of Stats.
type stats struct {
	connect, http, socks5 counters
	malformed             atomic.Uint64
	active                atomic.Int64
	up, down              atomic.Uint64
}

func (s *stats) of(p Protocol) *counters {
	switch p {
	case ProtoConnect:
		return &s.connect
	case ProtoHTTP:
		return &s.http
	case ProtoSOCKS5:
		return &s.socks5
	}
	return nil
}

func (s *stats) snapshot() Stats {
	return Stats{
		Connect:   s.connect.snapshot(),
		HTTP:      s.http.snapshot(),
		SOCKS5:    s.socks5.snapshot(),
		Malformed: s.malformed.Load(),
		Active:    s.active.Load(),
		BytesUp:   s.up.Load(),
		BytesDown: s.down.Load(),
	}
}
