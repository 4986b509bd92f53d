// SPDX-License-Identifier: Apache-2.0

package audit

import "github.com/sluice-dev/sluice/proxy"

// FromProxy is the audit event of a session proxy's refusal (name_refused
// when a tunnel's first bytes named a host the policy does not allow,
// proxy_refused otherwise); ok is false for its other events (failures
// to reach an allowed host, malformed requests), which are the client's
// business, not decisions.
func FromProxy(session string, ev proxy.Event) (e Event, ok bool) {
	if ev.Kind != proxy.EventRefused && ev.Kind != proxy.EventRebinding {
		return e, false
	}
	if ev.Flight != nil {
		// A tunnel's first bytes named a host the policy does not
		// allow: the verifier's event, as the datapath's path raises
		// it, without a process (the proxy sees only a loopback client).
		return Event{Type: NameRefused, Session: session, Dst: ev.Addr.String(), Port: ev.Port,
			Proto: string(ev.Flight.Proto), Host: ev.Flight.Name, Reason: ev.Reason, Message: "proxy: " + ev.String()}, true
	}
	e = Event{Type: ProxyRefused, Session: session, Host: ev.Host, Port: ev.Port, Proto: string(ev.Protocol),
		Reason: ev.Reason, Message: "proxy: " + ev.String()}
	if ev.Kind == proxy.EventRebinding {
		e.Type = Rebinding
		e.Dst = ev.Addr.String()
	}
	return e, true
}
