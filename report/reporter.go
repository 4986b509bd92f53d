// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/proxy"
	"github.com/sluice-dev/sluice/suggest"
)

// Reporter prints one line per denial on the command's stderr, with a
// token bucket so that a retry loop cannot flood the terminal, and keeps
// the numbers for the summary at exit.
type Reporter struct {
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
	sandbox    int                 // refusals by the session's Landlock domain
	dests      map[string]bool     // destinations denied
	auditDests map[string]bool     // destinations audit mode let through
	suggest    *suggest.Suggestion // for --suggest-allowlist
}

// New is a reporter that writes its lines to w.
func New(w io.Writer) *Reporter {
	return &Reporter{w: w, now: time.Now, burst: 10, rate: 1, tokens: 10, dests: map[string]bool{}, auditDests: map[string]bool{},
		suggest: suggest.ForHost()}
}

// Report accounts for one event of the session (docs/audit.md's model,
// whoever produced it: the datapath, the session's resolver or proxy, or
// the daemon's stream) and prints its line unless rate-limited. who names
// the process that asked a DNS question when e.Comm does not; it reads
// /proc, so it is called only for lines that get printed (nil: nobody to
// name).
//
// A denial the program falls back from by itself (an MPTCP socket, which
// Go servers try first) is left to the audit log: neither a line nor a
// count in the summary, which ask the user to act.
func (r *Reporter) Report(e audit.Event, who func() string) {
	if fallsBack(e) {
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
	case audit.NameRefused:
		r.denied++
		r.dests[fmt.Sprintf("%s:%d", e.Dst, e.Port)] = true
	case audit.NameAudit:
		r.audited++
		r.auditDests[fmt.Sprintf("%s:%d", e.Dst, e.Port)] = true
	case audit.SandboxDenied:
		r.sandbox++
	case audit.SessionStarted, audit.SessionEnded:
		return
	}
	r.suggest.AddEvent(e)
	r.print(func() string {
		if !fromResolver(e) {
			return e.Message
		}
		comm := e.Comm
		if comm == "" && who != nil {
			comm = who()
		}
		if comm == "" {
			return e.Message
		}
		return e.Message + " (asked by " + comm + ")"
	})
}

// Note prints a line that reports no decision, such as the proxy failing
// to reach an allowed host: the user needs it to understand a failure,
// the audit log and the summary do not.
func (r *Reporter) Note(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.print(func() string { return line })
}

// fallsBack is loader.Event.FallsBack in the audit model: a refused socket
// whose protocol is MPTCP.
func fallsBack(e audit.Event) bool {
	return (e.Type == audit.EgressDenied || e.Type == audit.EgressAudit) &&
		e.Reason == loader.ReasonSocketType.String() && e.Proto == "mptcp"
}

// fromResolver reports whether e is a session resolver's event, whose
// line names the asking process. A proxy's rebinding refusal shares its
// type but has no asking process (no Comm, no who).
func fromResolver(e audit.Event) bool {
	switch e.Type {
	case audit.DNSRefused, audit.DNSAudit, audit.Rebinding, audit.RebindingAudit,
		audit.CapReached, audit.MapFull, audit.UpstreamFailed:
		return true
	}
	return false
}

// ProxyEvents reports a session proxy's events: its refusals on the
// terminal and in the --audit-log, its failures (which decide nothing) as
// a note on the terminal.
func ProxyEvents(rep *Reporter, alog *AuditLog) func(proxy.Event) {
	return func(ev proxy.Event) {
		e, ok := audit.FromProxy("", ev)
		if !ok {
			rep.Note("proxy: " + ev.String())
			return
		}
		rep.Report(e, nil)
		alog.Write(e)
	}
}

// DNSEvents reports a session resolver's events on the terminal and in
// the --audit-log. owner names the asking process (nil: the proxy asked,
// no program); it reads /proc, so only for lines that are written.
func DNSEvents(rep *Reporter, alog *AuditLog, owner func(dnsresolver.Event) string) func(dnsresolver.Event) {
	return func(ev dnsresolver.Event) {
		e := audit.FromDNS("", ev, "")
		var who func() string
		if owner != nil {
			who = func() string { return owner(ev) }
		}
		rep.Report(e, who)
		if alog.On() {
			if who != nil {
				e.Comm = who()
			}
			alog.Write(e)
		}
	}
}

// print writes one line unless the token bucket is empty. r.mu is held.
func (r *Reporter) print(line func() string) {
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

// Suggestion is what the reporter's events would add to the allowlist
// (--suggest-allowlist).
func (r *Reporter) Suggestion() *suggest.Suggestion { return r.suggest }

// Summary is the line printed when the command exits, or "" when nothing
// was denied.
func (r *Reporter) Summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s string
	switch {
	case r.denied > 0:
		s = fmt.Sprintf("sluice: denied %d attempt%s to reach %d destination%s", r.denied, plural(r.denied), len(r.dests), plural(len(r.dests)))
	case r.audited > 0:
		s = fmt.Sprintf("sluice: audit: %d attempt%s to reach %d destination%s would have been denied", r.audited, plural(r.audited), len(r.auditDests), plural(len(r.auditDests)))
	case r.dnsRefused == 0 && r.sandbox == 0:
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
	if r.sandbox > 0 {
		if s == "" {
			s = "sluice:"
		} else {
			s += ";"
		}
		s += fmt.Sprintf(" refused %d access%s to processes outside the session", r.sandbox, map[bool]string{true: "", false: "es"}[r.sandbox == 1])
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
