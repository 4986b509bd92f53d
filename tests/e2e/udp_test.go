// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
	"golang.org/x/sys/unix"
)

// TestUDP: unconnected sendto (the sendmsg hooks), connected UDP (the
// connect hooks) and sendmmsg to a denied host fail with EPERM and send
// nothing; to the allowed host they get the echo back.
func TestUDP(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name            string
		allowed, denied netip.Addr
	}{
		{"ipv4", world.AllowedV4, world.DeniedV4},
		{"ipv6", world.AllowedV6, world.DeniedV6},
	} {
		deniedPort := w.ListenUDP(t, tc.denied)
		allowedPort := w.ListenUDP(t, tc.allowed)
		for _, action := range []struct{ name, stage string }{
			{"udp", "sendto"},
			{"udp-connected", "connect"},
			{"sendmmsg", "sendmmsg"},
		} {
			t.Run(action.name+"/"+tc.name, func(t *testing.T) {
				start := time.Now()
				r, run := confinedProbe(t, w, defaultPolicy, nil, action.name, tc.denied.String(), port(deniedPort))
				wantDenied(t, r, action.stage)
				wantDenialLine(t, run.Stderr, "denied", dest(tc.denied, deniedPort, "udp"), "not in the allowlist")
				w.AssertNothingArrived(t, arrived(start, tc.denied, 0), settle)

				start = time.Now()
				r, run = confinedProbe(t, w, defaultPolicy, nil, action.name, tc.allowed.String(), port(allowedPort))
				wantOK(t, r)
				if r.Reply == "" {
					t.Errorf("no echo from the allowed host: %v", r)
				}
				if l := denialLines(run.Stderr); len(l) > 0 {
					t.Errorf("denial lines for an allowed send: %q", l)
				}
				wantArrival(t, w, world.All(arrived(start, tc.allowed, allowedPort), world.Proto(unix.IPPROTO_UDP)), "the allowed "+action.name)
			})
		}
	}
}
