// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

func TestProcStatusKB(t *testing.T) {
	status := []byte("Name:\tsluice\nVmPeak:\t 1300000 kB\nVmRSS:\t   21504 kB\nThreads:\t9\n")
	got, err := procStatusKB(status, "VmRSS")
	if err != nil || got != 21504<<10 {
		t.Errorf("VmRSS = %d, %v; want %d", got, err, 21504<<10)
	}
	if _, err := procStatusKB(status, "VmSwap"); err == nil {
		t.Error("VmSwap: want an error for a missing line")
	}
	if _, err := procStatusKB(status, "Threads"); err == nil {
		t.Error("Threads: want an error for a line without kB")
	}
}

func TestProcStatCPU(t *testing.T) {
	// A command name with a space and a parenthesis, as a task may set.
	stat := []byte("4242 (sluice (x) d) S 1 4242 4242 0 -1 4194560 5000 0 0 0 150 75 3 4 20 0 9 0 100 0 0")
	got, err := procStatCPU(stat)
	if want := 2250 * time.Millisecond; err != nil || got != want {
		t.Errorf("procStatCPU = %v, %v; want %v", got, err, want)
	}
	if _, err := procStatCPU([]byte("4242 (sluice) S 1 2")); err == nil {
		t.Error("want an error for a short line")
	}
}

func TestFDKind(t *testing.T) {
	for target, want := range map[string]string{
		"socket:[123456]":                "socket",
		"pipe:[99]":                      "pipe",
		"anon_inode:bpf-map":             "bpf-map",
		"anon_inode:[eventpoll]":         "eventpoll",
		"anon_inode:[pidfd]":             "pidfd",
		"/run/x/sessions/a.lock":         "file",
		"/dev/null":                      "file",
		"net:[4026531840]":               "other",
		"anon_inode:bpf_link":            "bpf_link",
		"anon_inode:[timerfd]":           "timerfd",
		"/var/log/audit.jsonl (deleted)": "file",
	} {
		if got := fdKind(target); got != want {
			t.Errorf("fdKind(%q) = %q, want %q", target, got, want)
		}
	}
}

func TestKindDiff(t *testing.T) {
	before := map[string]int{"socket": 10, "pipe": 2, "file": 5}
	after := map[string]int{"socket": 13, "pipe": 1, "file": 5, "pidfd": 1}
	if got, want := kindDiff(before, after), "+3 socket, +1 pidfd, -1 pipe"; got != want {
		t.Errorf("kindDiff = %q, want %q", got, want)
	}
	if got := kindDiff(before, before); got != "" {
		t.Errorf("kindDiff of equal maps = %q, want \"\"", got)
	}
}

func TestReadAudit(t *testing.T) {
	log := `{"type":"daemon_started","message":"sluice daemon started"}
{"type":"session_started","session":"run-1-a"}
{"type":"session_started","session":"run-1-b"}
{"type":"session_ended","session":"run-1-a","message":"cleanup: delete ring buffer of session 7: operation not permitted"}
{"type":"session_ended","session":"run-1-a","message":"session run-1-a ended"}
not json
{"type":"egress_denied","session":"run-1-b"}
`
	a, err := readAudit(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if a.started != 2 || a.ended != 1 || len(a.cleanupErrs) != 1 || !strings.Contains(a.cleanupErrs[0], "ring buffer") {
		t.Errorf("readAudit = %+v, want 2 started, 1 ended, 1 cleanup error", a)
	}
}

func TestLeakReport(t *testing.T) {
	var l leakReport
	l.add("session cgroups", 0, "")
	l.add("policies (map sessions)", 0, "")
	if len(l.leaked()) != 0 || !strings.HasPrefix(l.summary(), "nothing left: 2 checks") {
		t.Errorf("clean report: leaked %v, summary %q", l.leaked(), l.summary())
	}
	l.add("daemon descriptors", 3, "+3 socket")
	if got := l.leaked(); len(got) != 1 || got[0].what != "daemon descriptors" {
		t.Errorf("leaked = %v, want the descriptors", got)
	}
	if got, want := l.summary(), "left: daemon descriptors: +3"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}

func TestDaemonResultMissed(t *testing.T) {
	d := &daemonResult{}
	d.wall.add(float64(time.Millisecond), float64(10*time.Millisecond))
	if d.missed() {
		t.Error("9 ms added, no leak: want not missed")
	}
	d.leaks.add("session cgroups", 1, "run-1-a")
	if !d.missed() {
		t.Error("a leak: want missed")
	}
	rows := d.rows()
	if last := rows[len(rows)-1]; last.result != "**LEAK**" {
		t.Errorf("leak row result = %q, want **LEAK**", last.result)
	}
	d = &daemonResult{}
	d.wall.add(float64(time.Millisecond), float64(20*time.Millisecond))
	if !d.missed() {
		t.Error("19 ms added: want missed")
	}
}

func TestFmtBytes(t *testing.T) {
	for _, c := range []struct {
		b      float64
		signed bool
		want   string
	}{
		{512 << 10, false, "512 KiB"},
		{21.4 * (1 << 20), false, "21.4 MiB"},
		{309 << 10, true, "+309 KiB"},
		{-(2 << 20), true, "-2.0 MiB"},
	} {
		if got := fmtBytes(c.b, c.signed); got != c.want {
			t.Errorf("fmtBytes(%v, %v) = %q, want %q", c.b, c.signed, got, c.want)
		}
	}
}

func TestFmtCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 100: "100", 1000: "1,000", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := fmtCount(n); got != want {
			t.Errorf("fmtCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestExamples(t *testing.T) {
	if got := examples([]string{"a", "b"}); got != "a, b" {
		t.Errorf("examples = %q", got)
	}
	if got := examples([]string{"a", "b", "c", "d", "e"}); got != "a, b, c and 2 more" {
		t.Errorf("examples = %q", got)
	}
}

func TestMapKeys(t *testing.T) {
	k := make([]byte, 24)
	binary.NativeEndian.PutUint64(k, 92562)
	if got := sessionKey(k); got != "session 92562" {
		t.Errorf("sessionKey = %q", got)
	}
	// 198.51.100.0/24 of session 0x1_0000_0002, as loader.cidrKey lays it out.
	c := make([]byte, 28)
	binary.NativeEndian.PutUint32(c, 64+96+24)
	binary.NativeEndian.PutUint32(c[4:], 2)
	binary.NativeEndian.PutUint32(c[8:], 1)
	copy(c[12:], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 51, 100, 0})
	if got, want := cidrKey(c), "session 4294967298 198.51.100.0/24"; got != want {
		t.Errorf("cidrKey = %q, want %q", got, want)
	}
	c6 := make([]byte, 28)
	binary.NativeEndian.PutUint32(c6, 64+32)
	binary.NativeEndian.PutUint32(c6[4:], 7)
	copy(c6[12:], []byte{0x20, 0x01, 0x0d, 0xb8})
	if got, want := cidrKey(c6), "session 7 2001:db8::/32"; got != want {
		t.Errorf("cidrKey = %q, want %q", got, want)
	}
	if got := cidrKey([]byte{1, 2}); got != "key 0102" {
		t.Errorf("cidrKey of a short key = %q", got)
	}
}

func TestNameMapFD(t *testing.T) {
	names := map[int]string{7: "session_events", 9: "listeners"}
	line := "1234 bpf(BPF_MAP_UPDATE_ELEM, {map_fd=7, key=0xc0001, value=0xc0002, flags=BPF_ANY}, 32) = 0 <0.012>\n"
	want := "1234 bpf(BPF_MAP_UPDATE_ELEM, {map_fd=7, map_name=\"session_events\", key=0xc0001, value=0xc0002, flags=BPF_ANY}, 32) = 0 <0.012>\n"
	if got := nameMapFD(line, names); got != want {
		t.Errorf("nameMapFD = %q, want %q", got, want)
	}
	costs, err := parseStrace(strings.NewReader(nameMapFD(line, names)))
	if err != nil || len(costs) != 1 || costs[0].what != "bpf BPF_MAP_UPDATE_ELEM session_events" {
		t.Errorf("parseStrace of a named line = %+v, %v", costs, err)
	}
	for _, l := range []string{
		"1234 bpf(BPF_MAP_UPDATE_ELEM, {map_fd=8, key=0x1}, 32) = 0 <0.001>\n", // unknown fd
		"1234 read(7, \"x\", 1) = 1 <0.000010>\n",                              // no map
		"1234 bpf(BPF_MAP_CREATE, {map_type=BPF_MAP_TYPE_RINGBUF, map_name=\"events\", map_fd=7}, 72) = 9 <0.001>\n",
	} {
		if got := nameMapFD(l, names); got != l {
			t.Errorf("nameMapFD(%q) = %q, want it unchanged", l, got)
		}
	}
}

func TestParsePerfReport(t *testing.T) {
	out := `# To display the perf.data header info, please use --header/--header-only options.
#
# Children      Self  Symbol
# ........  ........  ..............
#
    86.23%     0.38%  [k] do_syscall_64
    69.16%     0.00%  [.] github.com/sluice-dev/sluice/daemon.(*Server).create.gowrap2
    69.16%     0.00%  [.] github.com/sluice-dev/sluice/daemon.(*session).waitCommand
    66.37%     0.23%  [.] github.com/sluice-dev/sluice/loader.(*Datapath).clearListeners
    63.70%    13.72%  [k] generic_map_lookup_batch
    19.58%     9.70%  [k] __check_object_size
    11.91%    11.84%  [k] _copy_to_user
     7.54%     0.00%  [.] github.com/sluice-dev/sluice/daemon.(*Server).handleCreate-fm
     7.54%     0.00%  [.] github.com/sluice-dev/sluice/daemon.(*Server).handleCreate
     5.00%     5.00%  [.] runtime.memclrNoHeapPointers
`
	lines, err := parsePerfReport(bufio.NewScanner(strings.NewReader(out)))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 10 {
		t.Fatalf("got %d lines, want 10", len(lines))
	}
	top := topPerf(lines, 2, 2)
	var got []string
	for _, l := range top {
		got = append(got, l.label())
	}
	want := []string{
		"daemon.(*session).waitCommand",
		"loader.(*Datapath).clearListeners",
		"kernel: generic_map_lookup_batch",
		"kernel: _copy_to_user",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("topPerf = %q, want %q", got, want)
	}
	if _, err := parsePerfReport(bufio.NewScanner(strings.NewReader("# nothing\n"))); err == nil {
		t.Error("want an error without samples")
	}
}

func TestDaemonOptionsValidate(t *testing.T) {
	ok := daemonOptions{rounds: 40, idle: 100, sessions: 1000, clients: 6}
	if err := ok.validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, bad := range []daemonOptions{
		{rounds: 0, idle: 100, sessions: 1000, clients: 6},
		{rounds: 40, idle: 0, sessions: 1000, clients: 6},
		{rounds: 40, idle: 100, sessions: 0, clients: 6},
		{rounds: 40, idle: 100, sessions: 1000, clients: 65},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}
