// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
	"golang.org/x/sys/unix"
)

// socketReason is sluice's explanation for a refused socket().
const socketReason = "only TCP and UDP sockets are allowed"

// icmpTo selects ICMP/ICMPv6 packets to addr since start.
func icmpTo(start time.Time, addr netip.Addr) world.Filter {
	return world.All(world.Since(start), world.To(addr), world.Any(world.Proto(unix.IPPROTO_ICMP), world.Proto(unix.IPPROTO_ICMPV6)))
}

// TestPingSocket: an unprivileged ICMP ping socket (which the client
// namespace's ping_group_range allows uid 65534) is refused at socket() in
// the session, even towards an allowed host; unconfined, the same user's
// ping reaches it.
func TestPingSocket(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		host   netip.Addr
		socket string
	}{
		{world.AllowedV4, "socket(AF_INET, SOCK_DGRAM, icmp)"},
		{world.AllowedV6, "socket(AF_INET6, SOCK_DGRAM, icmpv6)"},
	} {
		t.Run(tc.host.String(), func(t *testing.T) {
			start := time.Now()
			r, run := confinedProbe(t, w, defaultPolicy, nil, "ping", tc.host.String())
			wantDenied(t, r, "socket")
			wantDenialLine(t, run.Stderr, "denied", tc.socket, socketReason)
			w.AssertNothingArrived(t, icmpTo(start, tc.host), settle)

			start = time.Now()
			wantOK(t, w.RunProbe(t, nobody, "ping", tc.host.String()))
			wantArrival(t, w, icmpTo(start, tc.host), "the unconfined ping")
		})
	}
}

// TestRawSocket: as uid 65534 the kernel itself refuses a raw socket; with
// CAP_NET_RAW from a fresh user namespace (`unshare -rn`), sluice's
// sock_create hook refuses it, while the very same command outside sluice
// gets its echo reply.
func TestRawSocket(t *testing.T) {
	w := newWorld(t)
	t.Run("no-capability", func(t *testing.T) {
		start := time.Now()
		r, _ := confinedProbe(t, w, defaultPolicy, nil, "raw", world.AllowedV4.String())
		wantDenied(t, r, "socket")
		w.AssertNothingArrived(t, icmpTo(start, world.AllowedV4), settle)
	})

	t.Run("user-namespace", func(t *testing.T) {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			needs.Skip(t, "unshare(1) not installed (apt-get install util-linux)")
		}
		ip, err := exec.LookPath("ip")
		if err != nil {
			needs.Skip(t, "ip(8) not installed (apt-get install iproute2)")
		}
		// The new network namespace's loopback starts down; bring it
		// up so the unconfined twin really gets an echo reply.
		script := shq(ip) + " link set lo up && exec " + probeLine(t, "raw", "127.0.0.1")
		argv := []string{unshare, "-rn", "sh", "-c", script}

		// Twin first: the same command as uid 65534, outside sluice.
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		twin := exec.CommandContext(ctx, argv[0], argv[1:]...)
		twin.SysProcAttr = nobody
		out, err := twin.CombinedOutput()
		if strings.Contains(string(out), "unshare failed") || strings.Contains(string(out), "unshare:") {
			needs.Absent(t, "unprivileged user namespaces are unavailable here: %s", out)
		}
		tr, perr := world.ParseProbeResult(out)
		if perr != nil {
			t.Fatalf("unconfined %v: %v (%v): %s", argv, perr, err, out)
		}
		if !tr.OK {
			t.Fatalf("unconfined raw socket in a user namespace failed, so the confined case would prove nothing: %v", tr)
		}

		run := runSluice(t, w, runArgs(defaultPolicy, nil, argv...)...)
		if strings.Contains(run.Stderr, "unshare failed") || strings.Contains(run.Stderr, "unshare:") {
			t.Fatalf("unshare failed inside the session (it worked outside): %v", run)
		}
		r, err := world.ParseProbeResult([]byte(run.Stdout))
		if err != nil {
			t.Fatalf("confined %v: %v\n%v", argv, err, run)
		}
		wantDenied(t, r, "socket")
		wantDenialLine(t, run.Stderr, "denied", "socket(AF_INET, SOCK_RAW, icmp)", socketReason)
	})
}

// TestSCTP: SCTP sockets are refused in the session. Skipped where the
// kernel has no SCTP (the probe reports it as unsupported).
func TestSCTP(t *testing.T) {
	w := newWorld(t)
	// The twin has a port of its own: its association's INIT
	// retransmissions and ABORT may arrive after the confined runs start.
	const sctpPort, twinPort = 9, 7
	sctpTo := func(start time.Time, a netip.Addr, port uint16) world.Filter {
		return world.All(world.Since(start), world.ToPort(a, port), world.Proto(unix.IPPROTO_SCTP))
	}
	start := time.Now()
	twin := w.RunProbe(t, nobody, "-timeout", "500ms", "sctp", world.AllowedV4.String(), fmt.Sprint(twinPort))
	if twin.Unsupported {
		needs.Absent(t, "this kernel has no SCTP: %v", twin)
	}
	wantArrival(t, w, sctpTo(start, world.AllowedV4, twinPort), "the unconfined SCTP INIT")

	for _, host := range []netip.Addr{world.AllowedV4, world.DeniedV4} {
		start = time.Now()
		r, run := confinedProbe(t, w, defaultPolicy, nil, "-timeout", "500ms", "sctp", host.String(), fmt.Sprint(sctpPort))
		if r.Unsupported {
			t.Fatalf("sctp unsupported inside the session but not outside: %v", r)
		}
		wantDenied(t, r, "socket")
		if !strings.Contains(run.Stderr, socketReason) {
			t.Errorf("stderr does not explain the refused SCTP socket:\n%s", run.Stderr)
		}
		w.AssertNothingArrived(t, sctpTo(start, host, sctpPort), settle)
	}
}

// TestMPTCPFallback: an MPTCP socket is refused with EPROTONOSUPPORT (not
// EPERM), the answer on which programs that try MPTCP first fall back to
// TCP; a Go server (net.Listen tries MPTCP first since Go 1.24) starts
// normally. The refusal names mptcp, not tcp (262 read as a byte is 6),
// and it is kept in the audit log but not printed on the terminal, where
// it would ask the user to act on something that failed nowhere.
func TestMPTCPFallback(t *testing.T) {
	w := newWorld(t)
	const afInet, sockStream, ipprotoMPTCP = "2", "1", "262"
	if twin := w.RunProbe(t, nobody, "socket-proto", afInet, sockStream, ipprotoMPTCP); !twin.OK {
		needs.Absent(t, "MPTCP sockets are not available here even unconfined (%s)", twin.Error)
	}
	const dst = "socket(AF_INET, SOCK_STREAM, mptcp)"
	quiet := func(t *testing.T, run runResult) {
		t.Helper()
		if strings.Contains(run.Stderr, "mptcp") || strings.Contains(run.Stderr, "SOCK_STREAM, tcp") || len(denialLines(run.Stderr)) > 0 {
			t.Errorf("the MPTCP refusal reached the terminal:\n%s", run.Stderr)
		}
		if strings.Contains(run.Stderr, "sluice: denied") || strings.Contains(run.Stderr, "would have been denied") {
			t.Errorf("the MPTCP refusal was counted in the summary:\n%s", run.Stderr)
		}
	}
	logged := func(t *testing.T, path, typ string) {
		t.Helper()
		for _, e := range world.ReadAuditLog(t, path) {
			if e["type"] == typ && e["dst"] == dst && e["proto"] == "mptcp" && e["reason"] == socketReason &&
				strings.Contains(fmt.Sprint(e["message"]), dst) {
				return
			}
		}
		t.Errorf("the audit log has no %s line for %s", typ, dst)
	}

	t.Run("socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		r, run := confinedProbe(t, w, defaultPolicy, []string{"--audit-log", path}, "socket-proto", afInet, sockStream, ipprotoMPTCP)
		if r.OK || r.Errno != "EPROTONOSUPPORT" || r.Stage != "socket" {
			t.Errorf("MPTCP socket: got %v, want EPROTONOSUPPORT at socket", r)
		}
		quiet(t, run)
		logged(t, path, "egress_denied")
	})
	t.Run("go-listener", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		r, run := confinedProbe(t, w, defaultPolicy, []string{"--audit-log", path}, "listen-go", "127.0.0.1")
		wantOK(t, r)
		quiet(t, run)
		logged(t, path, "egress_denied")
	})
	t.Run("audit", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		r, run := confinedProbe(t, w, defaultPolicy, []string{"--audit", "--audit-log", path}, "socket-proto", afInet, sockStream, ipprotoMPTCP)
		wantOK(t, r)
		quiet(t, run)
		logged(t, path, "egress_would_deny")
	})
	// Other refused sockets are still refused with EPERM and printed
	// (an ICMP ping socket, which the client namespace lets uid 65534
	// open).
	t.Run("ping-still-printed", func(t *testing.T) {
		r, run := confinedProbe(t, w, defaultPolicy, nil, "socket-proto", afInet, "2", "1")
		wantDenied(t, r, "socket")
		wantDenialLine(t, run.Stderr, "denied", "socket(AF_INET, SOCK_DGRAM, icmp)", socketReason)
		wantSummary(t, run.Stderr, 1, 1)
	})
}
