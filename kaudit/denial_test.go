// SPDX-License-Identifier: Apache-2.0

package kaudit

import (
	"testing"
	"time"
)

// Records as this machine's kernel (6.18) wrote them for a signal and a
// ptrace refusal by one domain, with a BPF record of another event in
// between.
var recorded = []struct {
	typ  uint16
	text string
}{
	{TypeLandlockAccess, `audit(1796142104.922:27): domain=150fbbb50 blockers=scope.signal opid=30029 ocomm="sleep"`},
	{TypeLandlockDomain, `audit(1796142104.922:27): domain=150fbbb50 status=allocated mode=enforcing pid=31687 uid=0 exe="/tmp/llexp/ll" comm="ll"`},
	{1334, `audit(1796142104.922:26): prog-id=30260 op=LOAD`},
	{TypeSyscall, `audit(1796142104.922:27): arch=c000003e syscall=62 success=no exit=-1 a0=754d a1=0 a2=0 a3=7fbd21d4d580 items=0 ppid=30027 pid=31687 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="ll" exe="/tmp/llexp/ll" key=(null)`},
	{1327, `audit(1796142104.922:27): proctitle=2E2F6C6C0030003330303239`},
	{TypeEOE, `audit(1796142104.922:27): `},
	{TypeLandlockAccess, `audit(1796142104.922:28): domain=150fbbb50 blockers=ptrace opid=30029 ocomm=6D7920736C656570`},
	{TypeSyscall, `audit(1796142104.922:28): arch=c000003e syscall=101 success=no exit=-1 a0=10 a1=754d a2=0 a3=0 items=0 ppid=30027 pid=31687 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="ll" exe="/tmp/llexp/ll" key=(null)`},
	{TypeEOE, `audit(1796142104.922:28): `},
	{TypeLandlockAccess, `audit(1796142104.930:29): domain=150fbbb50 blockers=ptrace opid=30029 ocomm="sleep"`},
}

func TestAssembler(t *testing.T) {
	a := Assembler{Arch: 0xc000003e, Names: map[uint64]string{62: "kill", 101: "ptrace"}}
	now := time.Unix(1796142105, 0)
	var got []Denial
	for _, r := range recorded {
		rec, err := ParseRecord(r.typ, r.text)
		if err != nil {
			t.Fatalf("ParseRecord(%q): %v", r.text, err)
		}
		got = append(got, a.Add(rec, now)...)
	}
	if len(got) != 2 {
		t.Fatalf("got %d denials before the flush, want 2: %+v", len(got), got)
	}
	want := []string{
		"denied ll[31687] -> signal to sleep[30029]: outside the session",
		"denied ll[31687] -> ptrace of my sleep[30029]: outside the session", // a hex-encoded comm
	}
	for i, d := range got {
		if d.String() != want[i] {
			t.Errorf("denial %d: %q, want %q", i, d.String(), want[i])
		}
	}
	if got[0].Creator != 31687 || got[1].Creator != 0 || got[0].Domain != "150fbbb50" || got[0].Exe != "/tmp/llexp/ll" {
		t.Errorf("creator/domain/exe: %+v", got)
	}
	if got[0].Time != time.Unix(1796142104, 922*int64(time.Millisecond)) {
		t.Errorf("time %v", got[0].Time)
	}
	// The last event has no EOE (no syscall context): only a flush
	// after it has waited hands it out.
	if d := a.Flush(now); len(d) != 0 {
		t.Errorf("flushed too early: %+v", d)
	}
	d := a.Flush(now.Add(time.Second))
	if len(d) != 1 || d[0].String() != "denied ? -> ptrace-class access to sleep[30029]: outside the session" {
		t.Errorf("flush: %+v", d)
	}
}

// A readdir of /proc in a session (ps) is refused a look at every outside
// process: not an attack, and not reported.
func TestAssemblerDropsProcListing(t *testing.T) {
	a := Assembler{Arch: 0xc000003e, Names: map[uint64]string{217: "getdents64", 101: "ptrace"}}
	now := time.Now()
	var got []Denial
	for _, txt := range []struct {
		typ  uint16
		text string
	}{
		{TypeLandlockAccess, `audit(1.0:5): domain=1a blockers=ptrace opid=10 ocomm="sh"`},
		{TypeLandlockAccess, `audit(1.0:5): domain=1a blockers=ptrace opid=11 ocomm="exe"`},
		{TypeSyscall, `audit(1.0:5): arch=c000003e syscall=217 success=yes exit=96 pid=20 comm="ps" exe="/usr/bin/ps"`},
		{TypeEOE, `audit(1.0:5): `},
		{TypeLandlockAccess, `audit(1.0:6): domain=1a blockers=ptrace opid=10 ocomm="sh"`},
		{TypeLandlockAccess, `audit(1.0:6): domain=1a blockers=ptrace opid=11 ocomm="exe"`},
		{TypeSyscall, `audit(1.0:6): arch=c000003e syscall=101 success=no exit=-1 pid=21 comm="gdb" exe="/usr/bin/gdb"`},
		{TypeEOE, `audit(1.0:6): `},
	} {
		r, err := ParseRecord(txt.typ, txt.text)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Add(r, now)...)
	}
	if len(got) != 2 || got[0].String() != "denied gdb[21] -> ptrace of sh[10]: outside the session" || got[1].TargetPID != 11 {
		t.Errorf("got %v", got)
	}
}

func TestParseRecordRejects(t *testing.T) {
	for _, s := range []string{"", "audit(", "audit(1.2): x=y", "audit(1.2:x): a=b", "nope"} {
		if _, err := ParseRecord(TypeEOE, s); err == nil {
			t.Errorf("ParseRecord(%q) = nil error", s)
		}
	}
}

func TestNotSideways(t *testing.T) {
	d := Denial{Blockers: []string{"fs.make_block"}, Path: "/dev/x", PID: 3, Comm: "mknod"}
	if d.Sideways() || d.String() != "denied mknod[3] -> fs.make_block on /dev/x: refused by Landlock" {
		t.Errorf("%q", d.String())
	}
}

func TestAttributor(t *testing.T) {
	live := map[uint32]string{10: "s1"}
	a := Attributor{SessionOf: func(pid uint32) string { return live[pid] }}
	if s := a.Session(Denial{PID: 11, Creator: 10, Domain: "d1"}); s != "s1" {
		t.Errorf("by creator: %q", s)
	}
	delete(live, 10)
	if s := a.Session(Denial{PID: 12, Domain: "d1"}); s != "s1" {
		t.Errorf("by a remembered domain: %q", s)
	}
	if s := a.Session(Denial{PID: 12, Domain: "d2"}); s != "" {
		t.Errorf("an unknown domain and a gone process: %q", s)
	}
	a.AddCreator(20, "s2")
	if s := a.Session(Denial{PID: 21, Creator: 20, Domain: "d3"}); s != "s2" {
		t.Errorf("by a registered creator: %q", s)
	}
	if s := a.Session(Denial{PID: 21, Domain: "d3"}); s != "s2" {
		t.Errorf("the creator's domain, later: %q", s)
	}
	// The daemon registers the supervisor, whose child is the command.
	a.AddCreator(30, "s3")
	if s := a.Session(Denial{PID: 31, PPID: 30, Creator: 31, Domain: "d4"}); s != "s3" {
		t.Errorf("by the registered parent: %q", s)
	}
	a.RemoveCreator(20, "s2")
	if s := a.Session(Denial{PID: 21, Domain: "d3"}); s != "" {
		t.Errorf("after the session ended: %q", s)
	}
}
