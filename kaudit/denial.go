// SPDX-License-Identifier: Apache-2.0

package kaudit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Denial is one Landlock refusal, assembled from the records of its audit
// event.
type Denial struct {
	Time   time.Time
	Serial uint64
	// Domain is the Landlock domain that refused (its id, as the kernel
	// logs it in hex).
	Domain string
	// Blockers is what refused it: "ptrace", "scope.signal",
	// "scope.abstract_unix_socket", "fs.*", "net.*".
	Blockers []string
	// PID, Comm and Exe are the process that was refused (the SYSCALL
	// record's; PID 0 when the event had no syscall context).
	PID  uint32
	PPID uint32
	Comm string
	Exe  string
	// Syscall names the refused system call ("" when unknown).
	Syscall string
	// TargetPID and TargetComm are the process it reached for (ptrace
	// and signal refusals).
	TargetPID  uint32
	TargetComm string
	// Path is the file or socket path of an fs or abstract-socket refusal.
	Path string
	// Creator is the pid that created Domain, known with the domain's
	// first refusal only (0 otherwise): the session's command, whose shim
	// made the domain and exec'd in place.
	Creator uint32
}

// Sideways reports whether the refusal is one of a process outside the
// domain (ptrace-class access, signals, abstract sockets), the kind a
// session's domain exists for.
func (d Denial) Sideways() bool {
	for _, b := range d.Blockers {
		if b == "ptrace" || strings.HasPrefix(b, "scope.") {
			return true
		}
	}
	return false
}

// Access is what was refused, as a phrase that takes the target:
// "ptrace of", "pidfd_getfd of", "process_vm_writev of", "/proc files of"
// (an open of another process's /proc/PID/mem, environ, ...), "signal
// to", "abstract unix socket".
func (d Denial) Access() string {
	for _, b := range d.Blockers {
		switch b {
		case "ptrace":
			switch d.Syscall {
			case "":
				return "ptrace-class access to"
			case "openat", "openat2", "readlinkat", "syscall 2":
				return "/proc files of"
			}
			return d.Syscall + " of"
		case "scope.signal":
			return "signal to"
		case "scope.abstract_unix_socket":
			return "abstract unix socket"
		}
	}
	return strings.Join(d.Blockers, ",") + " on"
}

// Target is the process or path reached for: "bash[1234]", or the path.
func (d Denial) Target() string {
	if d.TargetPID != 0 {
		return fmt.Sprintf("%s[%d]", d.TargetComm, d.TargetPID)
	}
	if d.Path != "" {
		return d.Path
	}
	return "?"
}

// String is the refusal as sluice prints it, without the "sluice: "
// prefix: "denied gdb[4242] -> ptrace of bash[1234]: outside the session".
func (d Denial) String() string {
	who := "?"
	if d.PID != 0 {
		who = fmt.Sprintf("%s[%d]", d.Comm, d.PID)
	}
	why := "outside the session"
	if !d.Sideways() {
		why = "refused by Landlock"
	}
	return fmt.Sprintf("denied %s -> %s %s: %s", who, d.Access(), d.Target(), why)
}

// Assembler groups audit records into Denials. The kernel writes a
// refusal's records in order (LANDLOCK_ACCESS, LANDLOCK_DOMAIN with a
// domain's first refusal, SYSCALL when the task has an audit context,
// EOE), but other events' records may come between them: they are matched
// by serial. Records of events without a Landlock access record are
// dropped at once, so memory stays bounded by the refusals pending.
type Assembler struct {
	pending map[uint64]*pendingDenial
	// Arch is the audit arch of this machine's native system calls
	// (AUDIT_ARCH_*), to name them; 0 leaves them unnamed.
	Arch uint64
	// Names maps the native arch's syscall numbers to names.
	Names map[uint64]string
}

// pendingDenial is an event's refusals (one system call can be refused
// access to several processes: a readdir of /proc) waiting for the rest
// of the event.
type pendingDenial struct {
	ds   []Denial
	seen time.Time
}

// done hands out the event's refusals, without the ones that are not
// attempts on a process: listing /proc (getdents64) asks, for each pid,
// whether the reader may see it (hidepid=invisible), and the session's
// domain answers no for every process outside it. `ps` in a session is
// not an attack.
func (p *pendingDenial) done() []Denial {
	out := p.ds[:0]
	for _, d := range p.ds {
		if d.Syscall != "getdents64" && d.Syscall != "getdents" {
			out = append(out, d)
		}
	}
	return out
}

// maxPending bounds the refusals waiting for their EOE; beyond it the
// oldest are handed out as they are.
const maxPending = 4096

// Add takes one record and returns the refusals it completes.
func (a *Assembler) Add(r Record, now time.Time) []Denial {
	if a.pending == nil {
		a.pending = map[uint64]*pendingDenial{}
	}
	p := a.pending[r.Serial]
	switch r.Type {
	case TypeLandlockAccess:
		if p != nil {
			p.ds = append(p.ds, a.access(r))
			return nil
		}
		a.pending[r.Serial] = &pendingDenial{ds: []Denial{a.access(r)}, seen: now}
		if len(a.pending) > maxPending {
			return a.Flush(now)
		}
	case TypeLandlockDomain:
		if p != nil && r.Get("status") == "allocated" {
			for i := range p.ds {
				if p.ds[i].Domain == r.Get("domain") {
					p.ds[i].Creator = uint32(r.Uint("pid"))
				}
			}
		}
	case TypeSyscall:
		if p != nil {
			for i := range p.ds {
				p.ds[i].PID = uint32(r.Uint("pid"))
				p.ds[i].PPID = uint32(r.Uint("ppid"))
				p.ds[i].Comm = r.Untrusted("comm")
				p.ds[i].Exe = r.Untrusted("exe")
				p.ds[i].Syscall = a.syscallName(r)
			}
		}
	case TypeEOE:
		if p != nil {
			delete(a.pending, r.Serial)
			return p.done()
		}
	}
	return nil
}

// Flush hands out the refusals that have waited since before cutoff: an
// event without a syscall context has no EOE.
func (a *Assembler) Flush(cutoff time.Time) []Denial {
	var out []Denial
	for s, p := range a.pending {
		if p.seen.Before(cutoff) {
			out = append(out, p.done()...)
			delete(a.pending, s)
		}
	}
	return out
}

func (a *Assembler) access(r Record) Denial {
	d := Denial{Time: r.Time, Serial: r.Serial, Domain: r.Get("domain"),
		TargetPID: uint32(r.Uint("opid")), TargetComm: r.Untrusted("ocomm")}
	if b := r.Get("blockers"); b != "" {
		d.Blockers = strings.Split(b, ",")
	}
	if _, ok := r.Fields["path"]; ok {
		d.Path = r.Untrusted("path")
	}
	return d
}

func (a *Assembler) syscallName(r Record) string {
	arch, err := strconv.ParseUint(r.Get("arch"), 16, 64)
	n, err2 := strconv.ParseUint(r.Get("syscall"), 10, 64)
	if err != nil || err2 != nil {
		return ""
	}
	if arch == a.Arch && a.Names != nil {
		if name, ok := a.Names[n]; ok {
			return name
		}
	}
	return "syscall " + strconv.FormatUint(n, 10)
}
