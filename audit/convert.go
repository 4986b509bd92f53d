// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"fmt"
	"net/netip"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/kaudit"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/namecheck"
)

// The audit events of a session's enforcement, the same whoever runs the
// session: the daemon, or `sluice run` embedded (--audit-log).

// FromKernel is the audit event of a datapath denial (or, in audit mode,
// of what would have been one). learnedFrom names the host names an
// address was learned from (nil: none). It reads /proc/<pid>/exe for Exe.
func FromKernel(session string, ev loader.Event, learnedFrom func(netip.Addr) []string) Event {
	var e Event
	if ev.Hook == loader.HookTLS || ev.Hook == loader.HookHTTP {
		e = FromNameCheck(session, KernelNameRefusal(ev, learnedFrom))
	} else {
		e = FromKernelBrief(session, ev)
		if !ev.IsUnix() && ev.Addr.IsValid() && learnedFrom != nil {
			e.Host = strings.Join(learnedFrom(ev.Addr), ",")
		}
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ev.PID)); err == nil && inCgroup(ev.PID, session) {
		e.Exe = exe
	}
	return e
}

// KernelNameRefusal is a refusal of the kernel's name check (loader.HookTLS,
// loader.HookHTTP) as the session's verifier would have made it
// (namecheck.Refusal): one event type, one line, whichever judged the
// name. learnedFrom (may be nil) names the names the address was learned
// for.
func KernelNameRefusal(ev loader.Event, learnedFrom func(netip.Addr) []string) namecheck.Refusal {
	var learned []string
	if learnedFrom != nil && ev.Addr.IsValid() {
		learned = learnedFrom(ev.Addr)
	}
	why := ev.Reason.String()
	if ev.Reason == loader.ReasonSNI {
		why = namecheck.NameNotAllowed
	}
	proto := namecheck.ProtoTLS
	switch {
	case ev.Reason == loader.ReasonNoName:
		proto = namecheck.ProtoNone // the verifier's words for it
	case ev.Hook == loader.HookHTTP:
		proto = namecheck.ProtoHTTP
	}
	return namecheck.Refusal{
		PID: ev.PID, Comm: ev.Comm, Dst: netip.AddrPortFrom(ev.Addr, ev.Port),
		Flight:     namecheck.Flight{Proto: proto, Name: ev.Name},
		LearnedFor: learned, Reason: namecheck.Explain(why, ev.Name, learned), Audit: ev.Audit,
	}
}

// FromKernelBrief is FromKernel without Exe and Host, which cost a /proc
// read and a lookup per denial: all that a line on the terminal needs.
func FromKernelBrief(session string, ev loader.Event) Event {
	if ev.Hook == loader.HookTLS || ev.Hook == loader.HookHTTP {
		return FromNameCheck(session, KernelNameRefusal(ev, nil))
	}
	uid := ev.UID
	e := Event{
		Type: EgressDenied, Session: session, PID: ev.PID, Comm: ev.Comm, UID: &uid,
		Reason: ev.Why(), Message: ev.String(),
	}
	if ev.Audit {
		e.Type = EgressAudit
	}
	if ev.IsUnix() {
		e.Dst, e.Proto = ev.Destination(), "unix"
	} else if ev.Addr.IsValid() {
		e.Dst, e.Port, e.Proto = ev.Addr.String(), ev.Port, loader.ProtoName(ev.Proto)
	} else {
		e.Dst = ev.Destination()
		if ev.Hook == loader.HookSockCreate {
			e.Proto = loader.SocketProtoName(ev.Args[2])
		}
	}
	return e
}

// FromLandlock is the audit event of a refusal by a session's Landlock
// domain (package kaudit).
func FromLandlock(session string, d kaudit.Denial) Event {
	e := Event{Type: SandboxDenied, Session: session, PID: d.PID, Comm: d.Comm, Exe: d.Exe,
		Access: strings.TrimSuffix(strings.TrimSuffix(d.Access(), " of"), " to"), Target: d.Target(), TargetPID: d.TargetPID,
		Reason: "outside the session", Message: d.String()}
	if !d.Sideways() {
		e.Reason = "refused by Landlock"
	}
	return e
}

// FromDNS is the audit event of a session resolver's event; comm names
// the asking process ("" when unknown).
func FromDNS(session string, ev dnsresolver.Event, comm string) Event {
	e := Event{Session: session, Host: ev.Name, Reason: ev.Reason, Message: ev.String(), Comm: comm}
	switch ev.Kind {
	case dnsresolver.EventRefused:
		e.Type = DNSRefused
		if ev.Audit {
			e.Type = DNSAudit
		}
	case dnsresolver.EventRebinding:
		e.Type = Rebinding
		if ev.Audit {
			e.Type = RebindingAudit
		}
		e.Dst = ev.Addr.String()
	case dnsresolver.EventCapReached:
		e.Type = CapReached
	case dnsresolver.EventMapFull:
		e.Type = MapFull
	default:
		e.Type = UpstreamFailed
	}
	return e
}

// inCgroup reports whether process pid is (still) in the session's cgroup
// named name, or in a cgroup below it (a container's in the session). The
// event is read after the fact: if the process has exited and its pid was
// reused outside the session, /proc/<pid>/exe names another program, which
// the audit log must not pin on the session.
func inCgroup(pid uint32, name string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || name == "" {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return path.Base(p) == name || slices.Contains(strings.Split(p, "/"), name)
		}
	}
	return false
}
