package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/userspace/proxy"
)

// reporter prints one line per denial on the command's stderr, with a
// token bucket so that a retry loop cannot flood the terminal, and keeps
// the numbers for the summary at exit.
type reporter struct {
	mu         sync.Mutex
	w          io.Writer
	now        func() time.Time
	burst      float64
	rate       float64 // lines per second once the burst is spent
	tokens     float64
	last       time.Time
	suppressed int
	denied     int
	audited    int
	dnsRefused int
	dests      map[string]bool // destinations denied
	auditDests map[string]bool // destinations audit mode let through
	suggest    *suggestion     // for --suggest-allowlist
}

func newReporter(w io.Writer) *reporter {
	return &reporter{w: w, now: time.Now, burst: 10, rate: 1, tokens: 10, dests: map[string]bool{}, auditDests: map[string]bool{},
		suggest: newSuggestion()}
}

// Report accounts for one event and prints it unless rate-limited.
// A denial the program falls back from by itself (loader.Event.FallsBack:
// an MPTCP socket, which Go servers try first) is left to the audit log:
// neither a line nor a count in the summary, which ask the user to act.
func (r *reporter) Report(e loader.Event) {
	if e.FallsBack() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Audit {
		r.audited++
		r.auditDests[e.Destination()] = true
	} else {
		r.denied++
		r.dests[e.Destination()] = true
	}
	// Only "not in the allowlist": an expired learned address belongs to
	// a name the policy already has; sockets and options have no address.
	switch {
	case e.IsUnix():
		r.suggest.addUnix(e.Unix)
	case e.Reason == loader.ReasonNotAllowed:
		r.suggest.addAddr(e.Addr)
	}
	r.print(e.String)
}

// ReportDNS accounts for a resolver event; who names the asking process
// and is only called for lines that get printed (it reads /proc).
func (r *reporter) ReportDNS(e dnsresolver.Event, who func() string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Kind == dnsresolver.EventRefused && !e.Audit {
		r.dnsRefused++
	}
	switch {
	case e.Kind == dnsresolver.EventRefused && e.Reason == dnsresolver.ReasonNotAllowed:
		r.suggest.addName(e.Name)
	case e.Kind == dnsresolver.EventRebinding:
		r.suggest.addPrivate(e.Name)
	}
	r.print(func() string {
		line := e.String()
		if w := who(); w != "" {
			line += " (asked by " + w + ")"
		}
		return line
	})
}

// ReportDaemon accounts for an event streamed by the daemon.
func (r *reporter) ReportDaemon(e audit.Event) {
	if daemonFallsBack(e) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Type {
	case audit.EgressDenied:
		r.denied++
		r.dests[e.Dst+":"+fmt.Sprint(e.Port)] = true
	case audit.EgressAudit:
		r.audited++
		r.auditDests[e.Dst+":"+fmt.Sprint(e.Port)] = true
	case audit.DNSRefused:
		r.dnsRefused++
	case audit.ProxyRefused:
		r.denied++
		r.dests[fmt.Sprintf("%s:%d", e.Host, e.Port)] = true
	case audit.SessionStarted, audit.SessionEnded:
		return
	}
	r.suggest.addEvent(e)
	r.print(func() string {
		if e.Comm != "" && (e.Type == audit.DNSRefused || e.Type == audit.DNSAudit) {
			return e.Message + " (asked by " + e.Comm + ")"
		}
		return e.Message
	})
}

// daemonFallsBack is loader.Event.FallsBack for an event the daemon
// converted: a refused socket whose protocol is MPTCP.
func daemonFallsBack(e audit.Event) bool {
	return (e.Type == audit.EgressDenied || e.Type == audit.EgressAudit) &&
		e.Reason == loader.ReasonSocketType.String() && e.Proto == "mptcp"
}

// ReportProxy accounts for an event of the session's proxy.
func (r *reporter) ReportProxy(e proxy.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case proxy.EventRefused:
		r.denied++
		r.dests[fmt.Sprintf("%s:%d", e.Host, e.Port)] = true
		r.suggest.addProxy(e.Host, e.Reason)
	case proxy.EventRebinding:
		r.suggest.addPrivate(e.Host)
	}
	r.print(func() string { return "proxy: " + e.String() })
}

// print writes one line unless the token bucket is empty. r.mu is held.
func (r *reporter) print(line func() string) {
	now := r.now()
	if !r.last.IsZero() {
		r.tokens = min(r.burst, r.tokens+now.Sub(r.last).Seconds()*r.rate)
	}
	r.last = now
	if r.tokens < 1 {
		r.suppressed++
		return
	}
	r.tokens--
	if r.suppressed > 0 {
		fmt.Fprintf(r.w, "sluice: (%d more denials not shown)\n", r.suppressed)
		r.suppressed = 0
	}
	fmt.Fprintf(r.w, "sluice: %s\n", line())
}

// Summary is the line printed when the command exits, or "" when nothing
// was denied.
func (r *reporter) Summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s string
	switch {
	case r.denied > 0:
		s = fmt.Sprintf("sluice: denied %d attempt%s to reach %d destination%s", r.denied, plural(r.denied), len(r.dests), plural(len(r.dests)))
	case r.audited > 0:
		s = fmt.Sprintf("sluice: audit: %d attempt%s to reach %d destination%s would have been denied", r.audited, plural(r.audited), len(r.auditDests), plural(len(r.auditDests)))
	case r.dnsRefused == 0:
		return ""
	}
	if r.dnsRefused > 0 {
		if s == "" {
			s = "sluice:"
		} else {
			s += ";"
		}
		s += fmt.Sprintf(" refused %d DNS quer%s", r.dnsRefused, map[bool]string{true: "y", false: "ies"}[r.dnsRefused == 1])
	}
	if r.suppressed > 0 {
		s += fmt.Sprintf(" (%d not shown above)", r.suppressed)
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
