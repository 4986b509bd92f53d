// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/proxy"
)

func TestReporterRateLimits(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	e := loader.Event{PID: 42, Comm: "curl", Hook: loader.HookConnect4, Reason: loader.ReasonNotAllowed,
		Addr: netip.MustParseAddr("203.0.113.20"), Port: 443, Proto: 6}
	for range 100 {
		r.Report(audit.FromKernelBrief("", e), nil)
	}
	if n := strings.Count(buf.String(), "\n"); n != 10 {
		t.Fatalf("a burst of 100 printed %d lines, want 10:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "denied curl[42] -> 203.0.113.20:443/tcp: not in the allowlist") {
		t.Fatalf("line does not say who, where and why:\n%s", buf.String())
	}
	now = now.Add(2 * time.Second)
	r.Report(audit.FromKernelBrief("", e), nil)
	if !strings.Contains(buf.String(), "(90 more denials not shown)") {
		t.Fatalf("suppressed count missing:\n%s", buf.String())
	}
	if got := r.Summary(); got != "sluice: denied 101 attempts to reach 1 destination" {
		t.Fatalf("summary %q", got)
	}
}

func TestReporterAudit(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf)
	r.Report(audit.FromKernelBrief("", loader.Event{PID: 1, Comm: "x", Hook: loader.HookSockCreate, Reason: loader.ReasonSocketType, Audit: true, Args: [3]int32{2, 2, 1}}), nil)
	if !strings.Contains(buf.String(), "audit: would deny x[1] -> socket(AF_INET, SOCK_DGRAM, icmp): only TCP and UDP sockets are allowed") {
		t.Fatalf("got %q", buf.String())
	}
	if got := r.Summary(); !strings.Contains(got, "would have been denied") {
		t.Fatalf("summary %q", got)
	}
	if got := New(&buf).Summary(); got != "" {
		t.Fatalf("empty summary %q", got)
	}
}

// TestReporterMPTCPFallback: a refused MPTCP socket, which Go servers try
// before TCP and recover from by themselves, is neither printed nor
// counted, whether it comes from the kernel or through the daemon; other
// refused sockets still are.
func TestReporterMPTCPFallback(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf)
	mptcp := loader.Event{PID: 7, Comm: "server", Hook: loader.HookSockCreate, Reason: loader.ReasonSocketType, Args: [3]int32{2, 1, 262}}
	if got, want := mptcp.Destination(), "socket(AF_INET, SOCK_STREAM, mptcp)"; got != want {
		t.Fatalf("Destination() = %q, want %q", got, want)
	}
	r.Report(audit.FromKernelBrief("", mptcp), nil)
	mptcp.Audit = true
	r.Report(audit.FromKernelBrief("", mptcp), nil)
	r.Report(audit.Event{Type: audit.EgressDenied, Reason: loader.ReasonSocketType.String(), Proto: "mptcp",
		Dst: "socket(AF_INET, SOCK_STREAM, mptcp)", Message: "denied server[7] -> socket(AF_INET, SOCK_STREAM, mptcp): only TCP and UDP sockets are allowed"}, nil)
	if buf.Len() != 0 {
		t.Fatalf("an MPTCP fallback was printed:\n%s", buf.String())
	}
	if got := r.Summary(); got != "" {
		t.Fatalf("an MPTCP fallback was counted: %q", got)
	}
	sctp := loader.Event{PID: 7, Comm: "server", Hook: loader.HookSockCreate, Reason: loader.ReasonSocketType, Args: [3]int32{2, 1, 132}}
	r.Report(audit.FromKernelBrief("", sctp), nil)
	if !strings.Contains(buf.String(), "denied server[7] -> socket(AF_INET, SOCK_STREAM, sctp)") {
		t.Fatalf("an SCTP refusal was not printed: %q", buf.String())
	}
}

// TestReporterAskedByIsLazy: a resolver's line names the asking process,
// which costs /proc reads, so the lookup runs only for printed lines.
func TestReporterAskedByIsLazy(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	calls := 0
	report := DNSEvents(r, &AuditLog{}, func(dnsresolver.Event) string { calls++; return "curl[42]" })
	for range 30 {
		report(dnsresolver.Event{Kind: dnsresolver.EventRefused, Name: "evil.example", Reason: dnsresolver.ReasonNotAllowed})
	}
	if calls != 10 {
		t.Errorf("the asking process was looked up %d times for 10 printed lines", calls)
	}
	if !strings.Contains(buf.String(), "refused DNS query for evil.example") || !strings.Contains(buf.String(), "(asked by curl[42])") {
		t.Errorf("the line does not name the asking process:\n%s", buf.String())
	}
	if got := r.Summary(); !strings.Contains(got, "refused 30 DNS queries") {
		t.Errorf("summary %q", got)
	}
}

// TestReporterProxyFailureIsANote: the proxy's failures to reach an
// allowed host are no audit events, but the terminal shows them; only its
// refusals count as denials.
func TestReporterProxyFailureIsANote(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf)
	report := ProxyEvents(r, &AuditLog{})
	report(proxy.Event{Kind: proxy.EventFailed, Protocol: proxy.ProtoConnect, Host: "allowed.example", Port: 443, Reason: "connection refused"})
	if !strings.Contains(buf.String(), "proxy: failed connect to allowed.example:443") {
		t.Fatalf("the proxy's failure is not on the terminal: %q", buf.String())
	}
	if got := r.Summary(); got != "" {
		t.Fatalf("a failure was counted as a denial: %q", got)
	}
	report(proxy.Event{Kind: proxy.EventRefused, Protocol: proxy.ProtoConnect, Host: "evil.example", Port: 443, Reason: "evil.example is not in the allowlist"})
	if !strings.Contains(buf.String(), "proxy: refused connect to evil.example:443") || r.Summary() != "sluice: denied 1 attempt to reach 1 destination" {
		t.Fatalf("the proxy's refusal: %q, summary %q", buf.String(), r.Summary())
	}
}
