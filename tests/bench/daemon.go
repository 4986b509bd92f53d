// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The daemon part: what `sluice daemon` costs per session, what it holds
// in memory per idle session, and whether creating and removing many
// sessions leaves anything behind. This file holds what needs neither root
// nor Linux: options, parsers of /proc and the audit log, the leak report
// and the table rows; daemon_linux.go and its daemon_*_linux.go siblings
// measure.

const (
	// daemonBudget bounds the daemon part, cleanup excluded: phases run
	// fewer rounds or sessions rather than overrun.
	daemonBudget = 90 * time.Second
	// maxDaemonAdded is the target for what a session through the daemon
	// adds to a bare exec of the same command.
	maxDaemonAdded = 15 * time.Millisecond
	// fdSlack is how far the daemon's open descriptors may end from their
	// idle level: a keep-alive API connection or two may come and go.
	fdSlack = 2
)

// daemonOptions are the flags of the daemon part.
type daemonOptions struct {
	rounds   int // A/B rounds of create + spawn + exit
	idle     int // sessions held open for the memory figure
	sessions int // sessions created and removed for the leak check
	clients  int // concurrent clients creating them
}

// addDaemonFlags registers the daemon part's flags; on is -daemon.
func addDaemonFlags(fs *flag.FlagSet, on *bool, d *daemonOptions) {
	fs.BoolVar(on, "daemon", true, "run the daemon benchmarks (session create+spawn+exit, memory, leaks after many sessions; about a minute)")
	fs.IntVar(&d.rounds, "daemon-rounds", 40, "A/B rounds of session create+spawn+exit through the daemon")
	fs.IntVar(&d.idle, "daemon-idle", 100, "idle sessions held open for the daemon's memory figure")
	fs.IntVar(&d.sessions, "daemon-sessions", 1000, "sessions created and removed before the leak check")
	fs.IntVar(&d.clients, "daemon-clients", 6, "concurrent clients creating those sessions")
}

// validate checks the daemon part's flags.
func (d daemonOptions) validate() error {
	if d.rounds < 1 || d.rounds > 500 || d.idle < 1 || d.idle > 1000 || d.sessions < 1 || d.sessions > 100_000 || d.clients < 1 || d.clients > 64 {
		return errors.New("want 1 ≤ -daemon-rounds ≤ 500, 1 ≤ -daemon-idle ≤ 1000, 1 ≤ -daemon-sessions ≤ 100000 and 1 ≤ -daemon-clients ≤ 64")
	}
	return nil
}

// procStatusKB reads a "Key:   123 kB" line of /proc/<pid>/status, in
// bytes.
func procStatusKB(status []byte, key string) (uint64, error) {
	for line := range strings.Lines(string(status)) {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: unexpected line %q", key, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, fixed
// at 100 by the kernel's ABI whatever the kernel's own tick.
const userHZ = 100

// procStatCPU reads the user and system CPU time of a process (all its
// threads, not its children) from /proc/<pid>/stat. The command name, in
// parentheses, may hold spaces and parentheses itself, so fields are
// counted from the last ')'.
func procStatCPU(stat []byte) (time.Duration, error) {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	// After the name: state (field 3), ..., utime (14), stime (15).
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the name, want at least 13", len(f))
	}
	var ticks uint64
	for _, v := range f[11:13] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// fdKind names what an open descriptor is, from its /proc/<pid>/fd link,
// so that a leak says what leaked: "socket", "bpf-map", "pipe", "file", ...
func fdKind(target string) string {
	switch {
	case strings.HasPrefix(target, "socket:"):
		return "socket"
	case strings.HasPrefix(target, "pipe:"):
		return "pipe"
	case strings.HasPrefix(target, "anon_inode:"):
		return strings.Trim(strings.TrimPrefix(target, "anon_inode:"), "[]") // bpf-map, eventpoll, ...
	case strings.HasPrefix(target, "/"):
		return "file"
	}
	return "other"
}

// kindDiff describes how the descriptor kinds in after differ from before,
// e.g. "+3 socket, -1 pipe", most changed first; "" when they do not.
func kindDiff(before, after map[string]int) string {
	type change struct {
		kind string
		d    int
	}
	keys := slices.Collect(maps.Keys(before))
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var cs []change
	for _, k := range keys {
		if d := after[k] - before[k]; d != 0 {
			cs = append(cs, change{k, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b change) int { return cmp.Compare(max(b.d, -b.d), max(a.d, -a.d)) })
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%+d %s", c.d, c.kind)
	}
	return strings.Join(parts, ", ")
}

// auditSummary is what the daemon's audit log says about sessions.
type auditSummary struct {
	started, ended int
	cleanupErrs    []string // messages of sessions whose teardown failed
}

// readAudit reads the daemon's audit log (JSON lines, docs/audit.md). A
// session whose teardown failed ends with a "cleanup: ..." message
// (daemon/session_linux.go, session.end), which names what was left.
func readAudit(r io.Reader) (auditSummary, error) {
	var a auditSummary
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		switch e.Type {
		case "session_started":
			a.started++
		case "session_ended":
			if strings.HasPrefix(e.Message, "cleanup: ") {
				a.cleanupErrs = append(a.cleanupErrs, e.Message)
				continue // the same session's normal end follows
			}
			a.ended++
		}
	}
	return a, sc.Err()
}

// leakCheck is one thing that must be back to nothing (or to its idle
// level) once every session has ended.
type leakCheck struct {
	what     string // "session cgroups under /sys/fs/cgroup/x"
	left     int    // how many are left over; 0 is a pass
	examples string // a few of them, or what changed, for the report
}

// leakReport is every check made after the churn.
type leakReport struct {
	checks []leakCheck
	notes  []string // not leaks, but worth saying (audit log counts)
}

func (l *leakReport) add(what string, left int, examples string) {
	l.checks = append(l.checks, leakCheck{what: what, left: left, examples: examples})
}

// leaked lists the failed checks.
func (l *leakReport) leaked() []leakCheck {
	var out []leakCheck
	for _, c := range l.checks {
		if c.left != 0 {
			out = append(out, c)
		}
	}
	return out
}

// summary is the table cell: what was checked, or what leaked.
func (l *leakReport) summary() string {
	bad := l.leaked()
	if len(bad) == 0 {
		return fmt.Sprintf("nothing left: %d checks (cgroups, maps, listener ports, fds, state files)", len(l.checks))
	}
	parts := make([]string, len(bad))
	for i, c := range bad {
		parts[i] = fmt.Sprintf("%s: %+d", c.what, c.left)
	}
	return "left: " + strings.Join(parts, "; ")
}

// fmtBytes shows a size in bytes in KiB or MiB, with a sign when signed.
func fmtBytes(b float64, signed bool) string {
	sign := ""
	if signed && b >= 0 {
		sign = "+"
	}
	switch abs := max(b, -b); {
	case abs < 1<<20:
		return fmt.Sprintf("%s%.0f KiB", sign, b/(1<<10))
	default:
		return fmt.Sprintf("%s%.1f MiB", sign, b/(1<<20))
	}
}

// fmtCount writes n with thousands separators, as the issue does (1,000).
func fmtCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// daemonResult is the outcome of the daemon part.
type daemonResult struct {
	opts    daemonOptions
	clients int // of the churn, after capping

	// Session create + spawn + exit of `true`: A bare exec, B through the
	// daemon, and B's two halves as the client sees them: from the
	// request to the session line (create, spawn) and from there to the
	// exit line (the command, its wait and the session's teardown).
	wall           series
	toSession      []float64
	toExit         []float64
	cold           time.Duration // the first session of a fresh daemon
	cpuPerSession  time.Duration // the daemon's own CPU time per session of the rounds
	wallPerSession time.Duration // ... against its wall time

	// Memory: idle (no session), with idle sessions, after the churn.
	rssIdle, rssBusy, rssAfter uint64
	fdIdle, fdBusy             int
	fdBusyKinds                string // what the idle sessions' descriptors are
	busy                       int    // idle sessions open when rssBusy was read

	// Churn.
	churned   int
	churnTime time.Duration
	churnLat  []float64 // per session, ns, under concurrency
	leaks     leakReport

	breakdown strings.Builder // where the time goes, when the target is missed
}

func (d *daemonResult) wallMissed() bool {
	return median(d.wall.added()) >= float64(maxDaemonAdded)
}

// missed reports whether the session target was missed or anything leaked.
func (d *daemonResult) missed() bool { return d.wallMissed() || len(d.leaks.leaked()) > 0 }

// rows are the daemon's lines of the results table.
func (d *daemonResult) rows() []tableRow {
	perSession := (float64(d.rssBusy) - float64(d.rssIdle)) / float64(max(d.busy, 1))
	leak := "ok"
	if len(d.leaks.leaked()) > 0 {
		leak = "**LEAK**"
	}
	rate := "—"
	if d.churnTime > 0 {
		rate = fmt.Sprintf("%.0f sessions/s", float64(d.churned)/d.churnTime.Seconds())
	}
	return []tableRow{
		addedRow("`true` as uid 65534: session create + spawn + exit through the daemon (Go client) vs bare exec, wall", &d.wall, maxDaemonAdded),
		{bench: "daemon memory (RSS), idle", a: "—", b: fmtBytes(float64(d.rssIdle), false), cmp: "—", target: "—", result: "report only"},
		{bench: fmt.Sprintf("daemon memory (RSS) with %s idle sessions (`sleep 60`)", fmtCount(d.busy)), a: "—", b: fmtBytes(float64(d.rssBusy), false),
			cmp:    fmt.Sprintf("%s (%s per session)", fmtBytes(float64(d.rssBusy)-float64(d.rssIdle), true), fmtBytes(perSession, true)),
			target: "—", result: "report only"},
		{bench: fmt.Sprintf("%s sessions of `true` created and removed, %d clients", fmtCount(d.churned), d.clients), a: "—", b: rate,
			cmp: d.leaks.summary(), target: "nothing left", result: leak},
	}
}

// describe says how the daemon rows were measured, and what leaked.
func (d *daemonResult) describe(w io.Writer) {
	o := d.opts
	rounds := fmt.Sprintf("%d rounds", len(d.wall.a))
	if len(d.wall.a) < o.rounds {
		rounds = fmt.Sprintf("%d rounds (of %d asked: the machine was too slow for the daemon part's %s budget)", len(d.wall.a), o.rounds, daemonBudget)
	}
	fmt.Fprintf(w, "Daemon rows: `sluice daemon` of this build, on an instance of its own, its allowlist 3 documentation CIDRs (each session's policy: 3 CIDR entries; no traffic), resolver upstream 127.0.0.1:1 (nothing is resolved). "+
		"Session row: %s, arms alternating (A B, then B A); A runs `true` with exec as uid 65534, B sends `POST /v1/sessions` with api.Client.Run (user 65534:65534, stdio /dev/null) and waits for the exit line. "+
		"The client saw B's median split as %s from the request to the session line (checks, cgroup, datapath entries, resolver, record, spawn) and %s from there to the exit line (the command, its reaping, the session's teardown). "+
		"The daemon spent %s of CPU per session (user+system, its children excluded) for %s of wall; the first session of a fresh daemon took %s.\n\n",
		rounds, fmtNS(median(d.toSession)), fmtNS(median(d.toExit)), fmtNS(float64(d.cpuPerSession)), fmtNS(float64(d.wallPerSession)), fmtNS(float64(d.cold)))
	fmt.Fprintf(w, "Memory rows: VmRSS of the daemon process in /proc (the Go heap of a separate process is not visible from here), idle after the session rounds, and once %s sessions each running `sleep 60` had all started (their streams open, as `sluice run` keeps them), then killed with DELETE; "+
		"open descriptors %d idle, %d with those sessions (%s). After the churn the daemon's RSS was %s.\n\n",
		fmtCount(d.busy), d.fdIdle, d.fdBusy, d.fdBusyKinds, fmtBytes(float64(d.rssAfter), false))
	lat := slices.Clone(d.churnLat)
	slices.Sort(lat)
	p := func(q float64) string {
		if len(lat) == 0 {
			return "—"
		}
		return fmtNS(lat[min(len(lat)-1, int(q*float64(len(lat))))])
	}
	churn := fmt.Sprintf("%s sessions", fmtCount(d.churned))
	if d.churned < o.sessions {
		churn = fmt.Sprintf("%s sessions (of %s asked: the machine was too slow for the budget)", fmtCount(d.churned), fmtCount(o.sessions))
	}
	fmt.Fprintf(w, "Leak row: %s of `true` by %d concurrent clients in %s (per session p50 %s, p99 %s), together with the idle sessions above; once the daemon listed none, every check below must find nothing left.\n\n",
		churn, d.clients, d.churnTime.Round(time.Millisecond), p(0.5), p(0.99))
	fmt.Fprintln(w, "| leak check | left | details |")
	fmt.Fprintln(w, "| --- | ---: | --- |")
	for _, c := range d.leaks.checks {
		ex := c.examples
		if ex == "" {
			ex = "—"
		}
		fmt.Fprintf(w, "| %s | %d | %s |\n", c.what, c.left, ex)
	}
	for _, n := range d.leaks.notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
	if d.breakdown.Len() > 0 {
		fmt.Fprintln(w)
		io.WriteString(w, d.breakdown.String())
	}
}

// examples shows up to three of xs, and how many more there are.
func examples(xs []string) string {
	const show = 3
	if len(xs) <= show {
		return strings.Join(xs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(xs[:show], ", "), len(xs)-show)
}

// sessionKey names a key that starts with a session's cgroup id.
func sessionKey(k []byte) string {
	if len(k) < 8 {
		return fmt.Sprintf("key %x", k)
	}
	return "session " + strconv.FormatUint(binary.NativeEndian.Uint64(k), 10)
}

// cidrKey names an entry of the CIDR trie: prefix length (64 bits of
// session id, then the address as IPv6), session id low and high halves,
// address (loader/session_linux.go, cidrKey).
func cidrKey(k []byte) string {
	if len(k) != 28 {
		return fmt.Sprintf("key %x", k)
	}
	bits := int(binary.NativeEndian.Uint32(k)) - 64
	id := uint64(binary.NativeEndian.Uint32(k[4:])) | uint64(binary.NativeEndian.Uint32(k[8:]))<<32
	addr := netip.AddrFrom16([16]byte(k[12:28]))
	if addr.Is4In6() {
		addr, bits = addr.Unmap(), bits-96
	}
	return fmt.Sprintf("session %d %s/%d", id, addr, bits)
}

// procStatusField is the value of a "Key:\tvalue" line of a status file.
func procStatusField(status []byte, key string) (string, error) {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("no %s line", key)
}

// mapFD finds the map descriptor of a bpf(2) call in strace's output.
var mapFD = regexp.MustCompile(`\bmap_fd=(\d+)`)

// nameMapFD adds map_name="NAME" after a bpf(2) call's map_fd=N when names
// knows N, so that parseStrace labels the call by the map it works on.
func nameMapFD(line string, names map[int]string) string {
	m := mapFD.FindStringSubmatchIndex(line)
	if m == nil || strings.Contains(line, "map_name=") {
		return line
	}
	fd, err := strconv.Atoi(line[m[2]:m[3]])
	if err != nil || names[fd] == "" {
		return line
	}
	return line[:m[1]] + fmt.Sprintf(", map_name=%q", names[fd]) + line[m[1]:]
}

// perfLine is one symbol of `perf report --children --sort sym -g none`.
type perfLine struct {
	children, self float64 // percent of the samples, with and without callees
	kernel         bool
	sym            string
}

// label is the symbol as the table shows it: sluice's without the module
// path, the kernel's marked.
func (l perfLine) label() string {
	if l.kernel {
		return "kernel: " + l.sym
	}
	return strings.TrimPrefix(l.sym, "github.com/sluice-dev/sluice/")
}

// parsePerfReport reads perf report's lines: "  63.70%  13.72%  [k] sym".
func parsePerfReport(sc *bufio.Scanner) ([]perfLine, error) {
	var out []perfLine
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || strings.HasPrefix(f[0], "#") || !strings.HasSuffix(f[0], "%") || !strings.HasSuffix(f[1], "%") {
			continue
		}
		c, err1 := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		s, err2 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		if err1 != nil || err2 != nil || (f[2] != "[k]" && f[2] != "[.]") {
			continue
		}
		out = append(out, perfLine{children: c, self: s, kernel: f[2] == "[k]", sym: strings.Join(f[3:], " ")})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("perf report: no samples")
	}
	return out, nil
}

// topPerf picks the lines worth a table: up to nSluice of sluice's own
// functions by their share with callees (where in sluice the CPU goes),
// then up to nKernel kernel functions by their own share (what burns it).
func topPerf(lines []perfLine, nSluice, nKernel int) []perfLine {
	var sl, kl []perfLine
	for _, l := range lines {
		switch {
		case l.kernel:
			kl = append(kl, l)
		case strings.Contains(l.sym, ".gowrap") || strings.HasSuffix(l.sym, "-fm"):
			// Compiler-made wrappers: the same share as what they wrap.
		case strings.HasPrefix(l.sym, "github.com/sluice-dev/sluice/"):
			sl = append(sl, l)
		}
	}
	slices.SortStableFunc(sl, func(a, b perfLine) int { return cmp.Compare(b.children, a.children) })
	slices.SortStableFunc(kl, func(a, b perfLine) int { return cmp.Compare(b.self, a.self) })
	return append(sl[:min(nSluice, len(sl))], kl[:min(nKernel, len(kl))]...)
}
