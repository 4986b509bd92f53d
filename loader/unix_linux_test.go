// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/needs"
)

// The test binary doubles as the confined unix-socket client: with
// SLUICE_UNIX_CLIENT=stream|dgram PATH it connects (or sends a datagram)
// to PATH ("@name": abstract), prints "ok" or the errno name, and exits.
func init() {
	mode := os.Getenv("SLUICE_UNIX_CLIENT")
	if mode == "" {
		return
	}
	fmt.Println(unixClient(mode, os.Args[len(os.Args)-1]))
	os.Exit(0)
}

func unixClient(mode, path string) string {
	switch mode {
	case "bench": // path: N connects+closes, prints ns per connect
		return unixBench(path, 20000)
	case "tcp": // path is a loopback port
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+path, 2*time.Second)
		if err != nil {
			return errnoOf(err)
		}
		c.Close()
		return "ok"
	case "tcp-self": // a listener of its own, then a connect to it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return errnoOf(err)
		}
		defer l.Close()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
		if err != nil {
			return errnoOf(err)
		}
		c.Close()
		return "ok"
	}
	typ := unix.SOCK_STREAM
	if mode == "dgram" {
		typ = unix.SOCK_DGRAM
	}
	fd, err := unix.Socket(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "socket: " + err.Error()
	}
	defer unix.Close(fd)
	name := path
	if strings.HasPrefix(path, "@") {
		name = "\x00" + path[1:]
	}
	sa := &unix.SockaddrUnix{Name: name}
	if mode == "dgram" {
		err = unix.Sendto(fd, []byte("x"), 0, sa)
	} else {
		err = unix.Connect(fd, sa)
	}
	var en unix.Errno
	if errors.As(err, &en) {
		return unix.ErrnoName(en)
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func errnoOf(err error) string {
	var en unix.Errno
	if errors.As(err, &en) {
		return unix.ErrnoName(en)
	}
	return err.Error()
}

// clientInSession runs this test binary as the unix client in the session.
func (f *fixture) clientInSession(t *testing.T, mode, path string) string {
	t.Helper()
	fd, err := unix.Open(f.session, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$", path)
	cmd.Env = append(os.Environ(), "SLUICE_UNIX_CLIENT="+mode)
	cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

func TestUnixEventLayout(t *testing.T) {
	if got := int(unsafe.Sizeof(sluiceUnixEvent{})); got != unixEventSize {
		t.Fatalf("sizeof(struct unix_event) = %d, ParseEvent expects %d", got, unixEventSize)
	}
}

func TestUnixSocketsJudgedByName(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.UnixJudging(); err != nil {
		needs.Skip(t, "%v", err)
	}
	r, err := f.dp.AddSession(f.cgid, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := t.TempDir()
	listen := func(network, name string) {
		addr := name
		if strings.HasPrefix(name, "@") {
			addr = "\x00" + name[1:]
		}
		if network == "unixgram" {
			c, err := net.ListenUnixgram(network, &net.UnixAddr{Name: addr, Net: network})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	relay := filepath.Join(dir, "relay.sock")
	listed := filepath.Join(dir, "listed.sock")
	globbed := filepath.Join(dir, "g-1.sock")
	dgram := filepath.Join(dir, "dgram.sock")
	abstract := fmt.Sprintf("@sluice-loadertest-%d", os.Getpid())
	listen("unix", relay)
	listen("unix", listed)
	listen("unix", globbed)
	listen("unixgram", dgram)
	listen("unix", abstract)
	// The unconfined twin: every socket answers outside the session.
	for _, p := range []string{relay, listed, globbed, abstract} {
		if got := unixClient("stream", p); got != "ok" {
			t.Fatalf("unconfined connect to %s: %s", p, got)
		}
	}
	for _, c := range []struct{ mode, path, want string }{
		{"stream", relay, "EPERM"},
		{"stream", abstract, "EPERM"},
		{"dgram", dgram, "EPERM"},
		{"stream", listed, "EPERM"},
	} {
		if got := f.clientInSession(t, c.mode, c.path); got != c.want {
			t.Errorf("%s %s before listing: %s, want %s", c.mode, c.path, got, c.want)
		}
	}
	ev, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseEvent(ev.RawSample)
	if err != nil {
		t.Fatal(err)
	}
	if e.Hook != HookUnixConnect || e.Unix != relay || !strings.Contains(e.String(), "-> unix:"+relay+": not in the allowlist") {
		t.Errorf("first event: %+v, %q", e, e.String())
	}
	r.SetDeadline(time.Now().Add(2 * time.Second))
	if ev, err = r.Read(); err != nil {
		t.Fatal(err)
	}
	if e, _ = ParseEvent(ev.RawSample); e.Unix != abstract || !strings.Contains(e.String(), "unix:"+abstract) {
		t.Errorf("abstract event: %+v", e)
	}

	if err := f.dp.AllowUnix(f.cgid, []string{listed, dgram, abstract}); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetUnixGlobs(f.cgid, []string{filepath.Join(dir, "g-*.sock")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, path, want string }{
		{"stream", relay, "EPERM"},
		{"stream", listed, "ok"},
		{"stream", abstract, "ok"},
		{"dgram", dgram, "ok"},
		{"stream", globbed, "ok"},
		// The glob's '*' never stands for "..", and names are compared
		// as written: another spelling of a listed path is refused.
		{"stream", dir + "/g-../../" + filepath.Base(dir) + "/relay.sock", "EPERM"},
		{"stream", dir + "/./listed.sock", "EPERM"},
		{"stream", dir + "//listed.sock", "EPERM"},
	} {
		if got := f.clientInSession(t, c.mode, c.path); got != c.want {
			t.Errorf("%s %s after listing: %s, want %s", c.mode, c.path, got, c.want)
		}
	}
	names, err := f.dp.UnixAllowed(f.cgid)
	if err != nil || len(names) != 3 {
		t.Fatalf("UnixAllowed = %v, %v", names, err)
	}
	if err := f.dp.RemoveSession(f.cgid, &Known{Ring: true, Unix: names}); err != nil {
		t.Fatal(err)
	}
	if names, _ := f.dp.UnixAllowed(f.cgid); len(names) != 0 {
		t.Fatalf("RemoveSession left %v", names)
	}
	var g sluiceUnixGlob
	if err := f.dp.objs.UnixGlobs.Lookup(&sluiceUnixGlobKey{Session: f.cgid}, &g); err == nil {
		t.Fatal("RemoveSession left the session's glob")
	}
}

// A prefix entry allows every clean name below its directory, at any
// depth, and nothing else: not the directory's own name, not a name that
// climbs out with "..", not a relative name, not "." or "//" spellings.
func TestUnixPrefixEntry(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.UnixJudging(); err != nil {
		needs.Skip(t, "%v", err)
	}
	r, err := f.dp.AddSession(f.cgid, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := t.TempDir()
	own := filepath.Join(dir, "own")
	if err := os.MkdirAll(filepath.Join(own, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	var ls []net.Listener
	listen := func(name string) string {
		l, err := net.Listen("unix", name)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		return name
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	top := listen(filepath.Join(own, "top.sock"))
	deep := listen(filepath.Join(own, "a", "b", "deep.sock"))
	outside := listen(filepath.Join(dir, "outside.sock"))
	// A sibling whose name begins like the prefix without its '/'.
	sibling := listen(own + "x.sock")
	for _, bad := range []string{"/", "own/", "/a/../b/", "/a//b/", "/a/./", "/a"} {
		if err := f.dp.SetUnixMatches(f.cgid, nil, []string{bad}); err == nil {
			t.Errorf("SetUnixMatches took prefix %q", bad)
		}
	}
	if err := f.dp.SetUnixMatches(f.cgid, nil, []string{own + "/"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{top, deep, outside, sibling} {
		if got := unixClient("stream", p); got != "ok" {
			t.Fatalf("unconfined connect to %s: %s", p, got)
		}
	}
	for _, c := range []struct{ path, want string }{
		{top, "ok"},
		{deep, "ok"},
		{outside, "EPERM"},
		{sibling, "EPERM"},
		{own + "/../outside.sock", "EPERM"},
		{own + "/a/../../outside.sock", "EPERM"},
		{own + "/./top.sock", "EPERM"},
		{own + "//top.sock", "EPERM"},
		{"own/top.sock", "EPERM"},
	} {
		if got := f.clientInSession(t, "stream", c.path); got != c.want {
			t.Errorf("connect %s with prefix %s/: %s, want %s", c.path, own, got, c.want)
		}
	}
	// Globs and prefixes share the slots; replacing them drops the prefix.
	if err := f.dp.SetUnixGlobs(f.cgid, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.clientInSession(t, "stream", top); got != "EPERM" {
		t.Errorf("after the prefix was dropped: %s, want EPERM", got)
	}
}

func TestLoopbackSessionMode(t *testing.T) {
	f := newFixture(t)
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	outside, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	listed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listed.Close()
	port := func(l net.Listener) string { return fmt.Sprint(l.Addr().(*net.TCPAddr).Port) }
	// Default mode: everything on loopback answers.
	for _, c := range []struct{ mode, arg string }{{"tcp", port(outside)}, {"tcp", port(listed)}, {"tcp-self", ""}} {
		if got := f.clientInSession(t, c.mode, c.arg); got != "ok" {
			t.Fatalf("loopback all: %s %s: %s", c.mode, c.arg, got)
		}
	}
	if err := f.dp.MarkLoopbackStrict(); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetSession(f.cgid, SessionConfig{Flags: FlagLoopbackSession}); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetLoopbackPorts(f.cgid, []uint16{uint16(listed.Addr().(*net.TCPAddr).Port)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, arg, want string }{
		{"tcp", port(outside), "EPERM"},
		{"tcp", port(listed), "ok"},
		{"tcp-self", "", "ok"},
	} {
		if got := f.clientInSession(t, c.mode, c.arg); got != c.want {
			t.Errorf("loopback session: %s %s: %s, want %s", c.mode, c.arg, got, c.want)
		}
	}
	l, b, err := f.dp.LoopbackPorts(f.cgid)
	if err != nil || len(l) != 1 || len(b) == 0 {
		t.Fatalf("LoopbackPorts = %v %v %v", l, b, err)
	}
	if err := f.dp.RemoveSession(f.cgid, &Known{Ring: true, LoopbackSession: true}); err != nil {
		t.Fatal(err)
	}
	if l, b, _ := f.dp.LoopbackPorts(f.cgid); len(l)+len(b) != 0 {
		t.Fatalf("RemoveSession left loopback ports %v %v", l, b)
	}
}

// unixBench connects to and closes a stream unix socket n times and returns
// the mean nanoseconds per connect+close.
func unixBench(path string, n int) string {
	sa := &unix.SockaddrUnix{Name: path}
	start := time.Now()
	for range n {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err.Error()
		}
		if err := unix.Connect(fd, sa); err != nil {
			unix.Close(fd)
			return err.Error()
		}
		unix.Close(fd)
	}
	return fmt.Sprint(time.Since(start).Nanoseconds() / int64(n))
}

// TestUnixConnectCost measures what judging costs a unix connect+close:
// unconfined, from a session whose name is listed exactly, and from one
// that reaches it through the second of two globs. Alternating rounds,
// medians. Set UNIX_BENCH=1 to run it (a measurement, not a pass/fail
// check: speed targets belong to benchmarks).
func TestUnixConnectCost(t *testing.T) {
	if os.Getenv("UNIX_BENCH") == "" {
		t.Skip("set UNIX_BENCH=1 to measure")
	}
	f := newFixture(t)
	if err := f.dp.UnixJudging(); err != nil {
		needs.Skip(t, "%v", err)
	}
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exact := filepath.Join(dir, "exact.sock")
	globbed := filepath.Join(dir, "g-1.sock")
	for _, p := range []string{exact, globbed} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	if err := f.dp.AllowUnix(f.cgid, []string{exact}); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetUnixGlobs(f.cgid, []string{"/nothing/*/here.sock", filepath.Join(dir, "g-*.sock")}); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	unconfined := func(p string) string {
		cmd := exec.Command(exe, "-test.run=^$", p)
		cmd.Env = append(os.Environ(), "SLUICE_UNIX_CLIENT=bench")
		out, _ := cmd.CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	// The programs' own cost, from the kernel's run-time statistics
	// (exact, unlike wall time on a loaded machine).
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	progCost := func(p *ebpf.Program, run func()) float64 {
		before, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		run()
		after, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if after.RunCount == before.RunCount {
			return 0
		}
		return float64(after.Runtime-before.Runtime) / float64(after.RunCount-before.RunCount)
	}
	cu := f.dp.objs.SluiceConnectUnix
	t.Logf("connect_unix program: exact name %.0f ns per call, second glob %.0f ns per call",
		progCost(cu, func() { f.clientInSession(t, "bench", exact) }),
		progCost(cu, func() { f.clientInSession(t, "bench", globbed) }))
	// The session's own directory: a prefix entry tried first, a name
	// two levels below it (as Python's forkserver makes); an abstract
	// name left to the Landlock scope (an event per connect).
	own := filepath.Join(dir, "own")
	if err := os.MkdirAll(filepath.Join(own, "pymp-x"), 0o755); err != nil {
		t.Fatal(err)
	}
	ownSock := filepath.Join(own, "pymp-x", "listener-1")
	abstract := fmt.Sprintf("@sluice-cost-%d", os.Getpid())
	for _, p := range []string{ownSock, "\x00" + abstract[1:]} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	if err := f.dp.SetUnixMatches(f.cgid, nil, []string{own + "/"}); err != nil {
		t.Fatal(err)
	}
	_ = f.dp.SetSession(f.cgid, SessionConfig{Flags: FlagOwnAbstract})
	t.Logf("connect_unix program: below the own directory %.0f ns per call, abstract name left to the scope (with its event) %.0f ns per call",
		progCost(cu, func() { f.clientInSession(t, "bench", ownSock) }),
		progCost(cu, func() { f.clientInSession(t, "bench", abstract) }))
	_ = f.dp.SetSession(f.cgid, SessionConfig{})
	if err := f.dp.SetUnixGlobs(f.cgid, []string{"/nothing/*/here.sock", filepath.Join(dir, "g-*.sock")}); err != nil {
		t.Fatal(err)
	}
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	go func() {
		for {
			c, err := lo.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	lport := fmt.Sprint(lo.Addr().(*net.TCPAddr).Port)
	c4 := f.dp.objs.SluiceConnect4
	loop := func() {
		for range 200 {
			f.clientInSessionQuiet("tcp", lport)
		}
	}
	allCost := progCost(c4, loop)
	if err := f.dp.MarkLoopbackStrict(); err != nil {
		t.Fatal(err)
	}
	markedCost := progCost(c4, loop)
	_ = f.dp.SetSession(f.cgid, SessionConfig{Flags: FlagLoopbackSession})
	_ = f.dp.SetLoopbackPorts(f.cgid, []uint16{uint16(lo.Addr().(*net.TCPAddr).Port)})
	strictCost := progCost(c4, loop)
	t.Logf("connect4 program on loopback: default mode %.0f ns per call, after a strict session was registered %.0f ns, in session mode (listed port) %.0f ns",
		allCost, markedCost, strictCost)

	var a, b, c []float64
	for range 7 {
		for _, m := range []struct {
			v   *[]float64
			out string
		}{{&a, unconfined(exact)}, {&b, f.clientInSession(t, "bench", exact)}, {&c, f.clientInSession(t, "bench", globbed)}} {
			var ns float64
			if _, err := fmt.Sscan(m.out, &ns); err != nil {
				t.Fatalf("bench client: %q", m.out)
			}
			*m.v = append(*m.v, ns)
		}
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	t.Logf("unix connect+close, wall: unconfined %.0f ns, exact name %.0f ns (%.2fx), second glob %.0f ns (%.2fx)",
		med(a), med(b), med(b)/med(a), med(c), med(c)/med(a))
}

// clientInSessionQuiet is clientInSession for loops: no test helper, no
// failure, the output dropped.
func (f *fixture) clientInSessionQuiet(mode, arg string) {
	fd, err := unix.Open(f.session, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), "SLUICE_UNIX_CLIENT="+mode)
	cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	_ = cmd.Run()
}

// TestLoopbackAllModeCost compares what connect4 costs a session in the
// default loopback mode with the object of another build (BASE_OBJ, e.g.
// `git show main:loader/sluice_bpfel.o`): both programs attached to
// sibling cgroups, loopback connects from each in alternating rounds, the
// kernel's run-time statistics. Set UNIX_BENCH=1 and BASE_OBJ to run it.
func TestLoopbackAllModeCost(t *testing.T) {
	base := os.Getenv("BASE_OBJ")
	if os.Getenv("UNIX_BENCH") == "" || base == "" {
		t.Skip("set UNIX_BENCH=1 and BASE_OBJ=path/to/other/sluice_bpfel.o to measure")
	}
	f := newFixture(t)
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	spec, err := ebpf.LoadCollectionSpec(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	var old struct {
		Connect4 *ebpf.Program `ebpf:"sluice_connect4"`
		Sessions *ebpf.Map     `ebpf:"sessions"`
	}
	if err := spec.LoadAndAssign(&old, nil); err != nil {
		t.Fatal(err)
	}
	defer old.Connect4.Close()
	defer old.Sessions.Close()
	oldRoot := f.root + "-base"
	oldSession := filepath.Join(oldRoot, "s1")
	if err := os.MkdirAll(oldSession, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(oldRoot)
	defer os.Remove(oldSession)
	l, err := link.AttachCgroup(link.CgroupOptions{Path: oldRoot, Attach: ebpf.AttachCGroupInet4Connect, Program: old.Connect4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	oldID, err := cgroupID(oldSession)
	if err != nil {
		t.Fatal(err)
	}
	v := sluiceSession{}
	if err := old.Sessions.Update(oldID, &v, ebpf.UpdateAny); err != nil {
		t.Fatal(err)
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	go func() {
		for {
			c, err := lo.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	lport := fmt.Sprint(lo.Addr().(*net.TCPAddr).Port)
	other := &fixture{session: oldSession}
	perCall := func(p *ebpf.Program, fx *fixture) float64 {
		before, _ := p.Stats()
		for range 100 {
			fx.clientInSessionQuiet("tcp", lport)
		}
		after, _ := p.Stats()
		return float64(after.Runtime-before.Runtime) / float64(max(1, after.RunCount-before.RunCount))
	}
	var a, b []float64
	for i := range 10 {
		if i%2 == 0 {
			a = append(a, perCall(old.Connect4, other))
			b = append(b, perCall(f.dp.objs.SluiceConnect4, f))
		} else {
			b = append(b, perCall(f.dp.objs.SluiceConnect4, f))
			a = append(a, perCall(old.Connect4, other))
		}
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	t.Logf("connect4 per loopback call, default mode: base object %.0f ns, this build %.0f ns (%.2fx); rounds %v / %v", med(a), med(b), med(b)/med(a), a, b)
}

// TestWithoutUnixHooks: on a kernel without connect_unix/sendmsg_unix
// (simulated), the rest of the datapath loads, attaches and verifies,
// UnixJudging says why unix sockets are not judged, and they are not.
func TestWithoutUnixHooks(t *testing.T) {
	t.Setenv("SLUICE_TEST_NO_UNIX_HOOKS", "1")
	f := newFixture(t)
	if err := f.dp.UnixJudging(); !errors.Is(err, ErrUnixUnsupported) {
		t.Fatalf("UnixJudging = %v, want ErrUnixUnsupported", err)
	}
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatalf("the datapath without unix hooks does not verify: %v", err)
	}
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "open.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := f.clientInSession(t, "stream", path); got != "ok" {
		t.Errorf("unix connect without the hooks: %s, want ok (not judged)", got)
	}
	// The IP hooks still judge: loopback is open, a session CIDR miss is not.
	if out := f.inSession(t, `exec 3<>/dev/tcp/203.0.113.9/80`); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("connect4 without the unix hooks: want EPERM, got %q", out)
	}
}
