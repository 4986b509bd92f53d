// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/needs"
)

func TestEventLayout(t *testing.T) {
	if got := int(unsafe.Sizeof(sluiceEvent{})); got != eventSize {
		t.Fatalf("sizeof(struct event) = %d, ParseEvent expects %d", got, eventSize)
	}
}

// cgroup2Mount finds the cgroup2 mount without the cgroups package, so the
// loader's tests stand alone.
func cgroup2Mount(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" {
				return f[4]
			}
		}
	}
	needs.Skip(t, "no cgroup2 mount")
	return ""
}

type fixture struct {
	dp      *Datapath
	root    string
	session string
	cgid    uint64
}

func newFixture(t *testing.T) *fixture {
	needs.Have(t, needs.Datapath...) // loads BPF programs and creates cgroups
	name := fmt.Sprintf("sluice-loadertest-%08x", rand.Uint32())
	root := filepath.Join(cgroup2Mount(t), name)
	session := filepath.Join(root, "s1")
	pin := filepath.Join("/sys/fs/bpf", name)
	if err := os.MkdirAll(session, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(session, "cgroup.procs")); err == nil {
			for _, p := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(p)
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
		os.Remove(session)
		os.Remove(root)
		if err := Remove(pin); err != nil {
			t.Error(err)
		}
	})
	dp, err := Open(pin, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	cgid, err := cgroupID(session)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{dp: dp, root: root, session: session, cgid: cgid}
}

// inSession runs a shell snippet inside the session cgroup and a fresh,
// empty network namespace: an address that gets through the datapath then
// fails with ENETUNREACH, one that is refused fails with EPERM, and no
// packet can leave the machine either way.
func (f *fixture) inSession(t *testing.T, script string) string {
	t.Helper()
	return inCgroup(t, f.session, script)
}

func TestDatapathJudgesInKernel(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatal(err)
	}
	// No session entry yet: loopback only.
	out := f.inSession(t, `exec 3<>/dev/tcp/203.0.113.7/80`)
	if !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("before AddSession: want EPERM, got %q", out)
	}
	r, err := f.dp.AddSession(f.cgid, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := f.dp.AddCIDRs(f.cgid, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/25"), netip.MustParsePrefix("2001:db8:5::/48")}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		addr string
		want string
	}{
		{"203.0.113.7", "Network is unreachable"},
		{"203.0.113.200", "Operation not permitted"},
		{"2001:db8:5::1", "Network is unreachable"},
		{"2001:db8:6::1", "Operation not permitted"},
		{"::ffff:203.0.113.7", "Network is unreachable"},
		{"::ffff:203.0.113.200", "Operation not permitted"},
		{"127.0.0.1", "Connection refused"},
		{"::1", "Connection refused"},
	}
	for _, c := range cases {
		out := f.inSession(t, fmt.Sprintf(`exec 3<>/dev/tcp/%s/9`, c.addr))
		if !strings.Contains(out, c.want) {
			t.Errorf("connect %s: want %q, got %q", c.addr, c.want, out)
		}
	}
	// Learned IPs are judged against the kernel clock.
	learned := netip.MustParseAddr("198.51.100.77")
	if err := f.dp.Learn(f.cgid, learned, BootTime()+time.Hour); err != nil {
		t.Fatal(err)
	}
	if out := f.inSession(t, `exec 3<>/dev/tcp/198.51.100.77/9`); !strings.Contains(out, "Network is unreachable") {
		t.Errorf("learned address: got %q", out)
	}
	if err := f.dp.Learn(f.cgid, learned, BootTime()-time.Second); err != nil {
		t.Fatal(err)
	}
	if out := f.inSession(t, `exec 3<>/dev/tcp/198.51.100.77/9`); !strings.Contains(out, "Operation not permitted") {
		t.Errorf("expired learned address: got %q", out)
	}
	c, err := f.dp.Counters(f.cgid)
	if err != nil {
		t.Fatal(err)
	}
	if c.Denied < 4 || c.Allowed < 4 {
		t.Errorf("counters %+v: want >=4 allowed and denied", c)
	}
	// Events: every denial, with the process and the reason.
	var reasons []Reason
	r.SetDeadline(time.Now().Add(2 * time.Second))
	for len(reasons) < 4 {
		rec, err := r.Read()
		if err != nil {
			t.Fatalf("read events (got %v): %v", reasons, err)
		}
		e, err := ParseEvent(rec.RawSample)
		if err != nil {
			t.Fatal(err)
		}
		if e.Cgroup != f.cgid || e.Comm != "bash" || e.PID == 0 {
			t.Errorf("event %+v: wrong session or process", e)
		}
		reasons = append(reasons, e.Reason)
		t.Log(e)
	}
	if err := f.dp.RemoveSession(f.cgid, nil); err != nil {
		t.Fatal(err)
	}
	if n, l, err := f.dp.Entries(f.cgid); err != nil || n != 0 || l != 0 {
		t.Fatalf("after RemoveSession: %d CIDRs, %d learned, %v", n, l, err)
	}
}

func TestPinnedLinksSurviveReopen(t *testing.T) {
	f := newFixture(t)
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{Flags: FlagAudit}); err != nil {
		t.Fatal(err)
	}
	f.dp.Close()
	// The loader's fds are gone; the pins keep enforcing.
	if out := f.inSession(t, `exec 3<>/dev/tcp/203.0.113.7/80`); !strings.Contains(out, "Network is unreachable") {
		t.Fatalf("audit session after close: want pass-through, got %q", out)
	}
	if err := f.dp.SetSession(f.cgid, SessionConfig{}); err == nil {
		t.Fatal("closed datapath still usable")
	}
	dp, err := Open(filepath.Join("/sys/fs/bpf", filepath.Base(f.root)), f.root)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if err := dp.SetSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := dp.Verify(f.session); err != nil {
		t.Fatal(err)
	}
	if out := f.inSession(t, `exec 3<>/dev/tcp/203.0.113.7/80`); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("after reopen: want EPERM, got %q", out)
	}
}

func TestForeignListenerRefused(t *testing.T) {
	f := newFixture(t)
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	// Port 9 on loopback belongs to another session: refused. Port 7 is
	// this session's own: reachable (connection refused: nobody listens).
	if err := f.dp.SetListener(9, f.cgid+1); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetListener(7, f.cgid); err != nil {
		t.Fatal(err)
	}
	if out := f.inSession(t, `exec 3<>/dev/tcp/127.0.0.1/9`); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("another session's listener: want EPERM, got %q", out)
	}
	if out := f.inSession(t, `exec 3<>/dev/tcp/::1/9`); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("another session's listener over IPv6: want EPERM, got %q", out)
	}
	if out := f.inSession(t, `exec 3<>/dev/tcp/127.0.0.1/7`); !strings.Contains(out, "Connection refused") {
		t.Fatalf("own listener: want ECONNREFUSED, got %q", out)
	}
	if err := f.dp.RemoveSession(f.cgid, nil); err != nil {
		t.Fatal(err)
	}
	var owner uint64
	if err := f.dp.objs.Listeners.Lookup(uint32(7), &owner); err != nil || owner != 0 {
		t.Fatalf("RemoveSession left port 7 registered: %d %v", owner, err)
	}
	_ = f.dp.ClearListener(9, f.cgid+1)
}

// TestHelperSockopts is not a test: TestSetsockoptPassesOptions runs the
// test binary again with it, inside and outside the session, and compares
// what the kernel answered.
func TestHelperSockopts(t *testing.T) {
	switch os.Getenv("SLUICE_LOADERTEST_HELPER") {
	case "sockopts":
	case "mptcp":
		_, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP)
		if e, ok := err.(unix.Errno); ok {
			fmt.Printf("mptcp=%s\n", unix.ErrnoName(e))
		} else {
			fmt.Printf("mptcp=%v\n", err)
		}
		return
	default:
		t.Skip("helper process of TestSetsockoptPassesOptions and TestMPTCPRefusalErrno")
	}
	errno := func(err error) string {
		if err == nil {
			return "ok"
		}
		if e, ok := err.(unix.Errno); ok {
			return unix.ErrnoName(e)
		}
		return err.Error()
	}
	tcp, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	nodelay := errno(unix.SetsockoptInt(tcp, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1))
	v, err := unix.GetsockoptInt(tcp, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	udp, err2 := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	// An option value longer than a page (a source filter of zeros).
	big := make([]byte, 3*4096)
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(udp), unix.IPPROTO_IP, unix.IP_MSFILTER,
		uintptr(unsafe.Pointer(&big[0])), uintptr(len(big)), 0)
	var bigErr error
	if e != 0 {
		bigErr = e
	}
	fmt.Printf("nodelay=%s value=%d msfilter=%s\n", nodelay, v, errno(bigErr))
}

// TestSetsockoptPassesOptions: the setsockopt hook hands options it does
// not judge to the kernel unchanged: a value set is the value read back,
// and an option longer than a page (of which the program sees only the
// first page) gets the same answer as outside the session.
func TestSetsockoptPassesOptions(t *testing.T) {
	f := newFixture(t)
	r, err := f.dp.AddSession(f.cgid, SessionConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	run := func(cgroup bool) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSockopts$", "-test.v")
		cmd.Env = append(os.Environ(), "SLUICE_LOADERTEST_HELPER=sockopts")
		if cgroup {
			fd, err := unix.Open(f.session, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		}
		out, err := cmd.CombinedOutput()
		for l := range strings.Lines(string(out)) {
			if strings.HasPrefix(l, "nodelay=") {
				return strings.TrimSpace(l)
			}
		}
		t.Fatalf("helper (in session: %v): %v\n%s", cgroup, err, out)
		return ""
	}
	free, confined := run(false), run(true)
	if !strings.HasPrefix(free, "nodelay=ok value=1 ") {
		t.Fatalf("unconfined: %s", free)
	}
	if confined != free {
		t.Errorf("in the session the kernel answered %q, outside %q", confined, free)
	}
}

// TestKDNSOptional: where the kernel DNS path's programs do not load
// (simulated), the rest of the datapath loads, attaches and verifies, and
// no session can be put on the kernel path, so no socket is ever pointed
// at an upstream without the programs that judge its traffic.
func TestKDNSOptional(t *testing.T) {
	t.Setenv("SLUICE_TEST_NO_KDNS", "1")
	f := newFixture(t)
	if err := f.dp.KDNSSupported(); !errors.Is(err, ErrKDNSUnsupported) {
		t.Fatalf("KDNSSupported: %v, want ErrKDNSUnsupported", err)
	}
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatalf("the rest of the datapath: %v", err)
	}
	cfg := KDNSConfig{Upstream4: netip.MustParseAddrPort("203.0.113.53:53"), MaxTTL: time.Hour}
	if err := f.dp.SetKDNS(f.cgid, cfg, []KDNSName{{Name: "allowed.test", Exact: true}}); !errors.Is(err, ErrKDNSUnsupported) {
		t.Fatalf("SetKDNS without the programs: %v, want ErrKDNSUnsupported", err)
	}
	if f.dp.KDNSEnabled(f.cgid) {
		t.Fatal("the session is on the kernel path without its programs")
	}
	if err := ProbeKDNS(); !errors.Is(err, ErrKDNSUnsupported) {
		t.Fatalf("ProbeKDNS: %v", err)
	}
	// Twin: with the programs, the same session takes the kernel path.
	t.Setenv("SLUICE_TEST_NO_KDNS", "")
	if err := ProbeKDNS(); err != nil {
		t.Fatalf("ProbeKDNS on this kernel: %v", err)
	}
	dp, err := Open(f.dp.pinDir, f.root)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if err := dp.AttachKDNS(f.cgid, f.session); err != nil {
		t.Fatal(err)
	}
	if err := dp.SetKDNS(f.cgid, cfg, []KDNSName{{Name: "allowed.test", Exact: true}}); err != nil || !dp.KDNSEnabled(f.cgid) {
		t.Fatalf("SetKDNS with the programs: %v", err)
	}
	if err := dp.Verify(f.session); err != nil {
		t.Fatal(err)
	}
	if err := dp.ClearKDNS(f.cgid); err != nil || dp.KDNSEnabled(f.cgid) {
		t.Fatalf("ClearKDNS: %v", err)
	}
}

// TestMPTCPRefusalErrno: a refused MPTCP socket gets EPROTONOSUPPORT where
// the kernel lets sock_create programs set the error (have_set_retval, as
// loadSpec finds it here), and the datapath built for a kernel without that
// helper (have_set_retval = 0, the call pruned) still loads and refuses
// with EPERM.
func TestMPTCPRefusalErrno(t *testing.T) {
	needs.Have(t, needs.Datapath...) // loads BPF programs and creates cgroups
	// A cgroup of its own: under a sluice datapath, that one's program
	// would refuse too, and set its own error.
	cg := filepath.Join(cgroup2Mount(t), fmt.Sprintf("sluice-loadertest-mptcp-%08x", rand.Uint32()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) })
	for _, tc := range []struct {
		have uint8
		want string
	}{{1, "EPROTONOSUPPORT"}, {0, "EPERM"}} {
		spec, err := loadSpec()
		if err != nil {
			t.Fatal(err)
		}
		if tc.have == 1 {
			var got uint8
			if err := spec.Variables["have_set_retval"].Get(&got); err != nil || got != 1 {
				t.Logf("this kernel has no bpf_set_retval for sock_create programs (%v): only the EPERM case runs", err)
				continue
			}
		}
		if err := spec.Variables["have_set_retval"].Set(tc.have); err != nil {
			t.Fatal(err)
		}
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
		}
		var objs sluiceObjects
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			t.Fatalf("have_set_retval=%d: load: %v", tc.have, err)
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupInetSockCreate, Program: objs.SluiceSockCreate})
		if err != nil {
			objs.Close()
			t.Fatal(err)
		}
		fd, err := unix.Open(cg, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSockopts$", "-test.v")
		cmd.Env = append(os.Environ(), "SLUICE_LOADERTEST_HELPER=mptcp")
		cmd.SysProcAttr = &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		out, _ := cmd.CombinedOutput()
		unix.Close(fd)
		l.Close()
		objs.Close()
		if !strings.Contains(string(out), "mptcp="+tc.want+"\n") {
			t.Errorf("have_set_retval=%d: want %s\n%s", tc.have, tc.want, out)
		}
	}
}

// TestKDNSPerSession: the kernel DNS path's programs run only on the
// cgroups of sessions on that path, never on the parent (where every
// session would pay for them on every packet); a kernel-path session whose
// links are gone fails Verify, a resolver-path session passes without
// them, and a re-opened datapath (reuse, or a fresh load) still attaches
// them and keeps the session's links in force.
func TestKDNSPerSession(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.KDNSSupported(); err != nil {
		t.Skipf("kernel DNS path not supported here: %v", err)
	}
	effective := func(path string) []ebpf.ProgramID {
		t.Helper()
		fd, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(fd.Fd()), Attach: ebpf.AttachCGroupInetIngress, QueryFlags: unix.BPF_F_QUERY_EFFECTIVE})
		if err != nil {
			t.Fatal(err)
		}
		var ids []ebpf.ProgramID
		for _, p := range res.Programs {
			ids = append(ids, p.ID)
		}
		return ids
	}
	if got := effective(f.root); len(got) != 0 {
		t.Fatalf("ingress programs on the parent cgroup: %v, want none", got)
	}
	if got := effective(f.session); len(got) != 0 {
		t.Fatalf("ingress programs on a resolver-path session: %v, want none", got)
	}
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatalf("resolver-path session: %v", err)
	}
	cfg := KDNSConfig{Upstream4: netip.MustParseAddrPort("203.0.113.53:53"), MaxTTL: time.Hour}
	names := []KDNSName{{Name: "allowed.test", Exact: true}}
	if err := f.dp.SetKDNS(f.cgid, cfg, names); err == nil || f.dp.KDNSEnabled(f.cgid) {
		t.Fatalf("SetKDNS without AttachKDNS: %v, want a refusal", err)
	}
	if err := f.dp.AttachKDNS(f.cgid, f.session); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.SetKDNS(f.cgid, cfg, names); err != nil {
		t.Fatal(err)
	}
	if got := effective(f.session); len(got) != 1 {
		t.Fatalf("ingress programs on a kernel-path session: %v, want one", got)
	}
	if got := effective(f.root); len(got) != 0 {
		t.Fatalf("ingress programs on the parent cgroup: %v, want none", got)
	}
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatalf("kernel-path session: %v", err)
	}
	// Another process re-opens the pinned datapath (reuse) and the same
	// binary loads it afresh: the session's links stay in force.
	for _, fresh := range []bool{false, true} {
		if fresh {
			os.Remove(filepath.Join(f.dp.pinDir, metaPin)) // forces a full load
		}
		dp, err := Open(f.dp.pinDir, f.root)
		if err != nil {
			t.Fatal(err)
		}
		if fresh == dp.reused {
			t.Fatalf("reused=%v, want %v", dp.reused, !fresh)
		}
		if err := dp.Verify(f.session); err != nil {
			dp.Close()
			t.Fatalf("after re-open (fresh=%v): %v", fresh, err)
		}
		dp.Close()
	}
	// The links gone while the session is on the kernel path: refuse.
	if err := f.dp.DetachKDNS(f.cgid); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.Verify(f.session); err == nil {
		t.Fatal("Verify passed a kernel-path session without its programs")
	}
	if err := f.dp.AttachKDNS(f.cgid, f.session); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.ClearKDNS(f.cgid); err != nil {
		t.Fatal(err)
	}
	// The kernel frees an unpinned link from a work queue: its detachment
	// is seen a moment after the unpin returns.
	got := effective(f.session)
	for deadline := time.Now().Add(2 * time.Second); len(got) != 0 && time.Now().Before(deadline); got = effective(f.session) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != 0 {
		t.Fatalf("ingress programs after ClearKDNS: %v, want none", got)
	}
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatalf("after ClearKDNS: %v", err)
	}
}

// TestUpgradeReplacesIncompatiblePins: a datapath pinned by an older
// sluice whose map has another layout (here cidrs with another value
// size) is opened without `sluice cleanup`: that map is replaced, the
// others keep their contents (the session is still judged as before,
// without being added again).
func TestUpgradeReplacesIncompatiblePins(t *testing.T) {
	f := newFixture(t)
	if _, err := f.dp.AddSession(f.cgid, SessionConfig{}); err != nil {
		t.Fatal(err)
	}
	f.dp.Close()
	pin := filepath.Join("/sys/fs/bpf", filepath.Base(f.root))
	// Another version: another object hash, and an old cidrs layout.
	if err := os.Remove(filepath.Join(pin, metaPin)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(pin, "cidrs")); err != nil {
		t.Fatal(err)
	}
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: "cidrs", Type: ebpf.LPMTrie, KeySize: 4 + 8 + 16, ValueSize: 8,
		MaxEntries: 16, Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(filepath.Join(pin, "cidrs")); err != nil {
		t.Fatal(err)
	}
	old.Close()
	dp, err := Open(pin, f.root)
	if err != nil {
		t.Fatalf("open over an older layout: %v", err)
	}
	defer dp.Close()
	if got := dp.Replaced(); len(got) != 1 || got[0] != "cidrs" {
		t.Fatalf("replaced %v, want [cidrs]", got)
	}
	info, err := dp.objs.Cidrs.Info()
	if err != nil || info.ValueSize == 8 {
		t.Fatalf("cidrs after the upgrade: %+v %v: still the old layout", info, err)
	}
	if err := dp.Verify(f.session); err != nil {
		t.Fatal(err)
	}
	// The session entry survived in its unchanged map: still judged.
	if out := f.inSession(t, `exec 3<>/dev/tcp/203.0.113.7/80`); !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("after the upgrade: want EPERM, got %q", out)
	}
}

// TestKDNSObjectSharesMaps: the kernel DNS path's programs, loaded from
// their own object (bpf/kdns.c), run on the datapath's maps (the ones user
// space writes: a map of their own would hold no session) but for their
// per-CPU scratch space, and the datapath's egress program reaches the
// pinned kernel DNS egress program through kdns_tail; both after a full
// load and after a re-open that loads nothing (reuse).
func TestKDNSObjectSharesMaps(t *testing.T) {
	f := newFixture(t)
	if err := f.dp.KDNSSupported(); err != nil {
		t.Fatalf("kernel DNS path not supported here: %v", err)
	}
	own := map[string]bool{"kdns_qscratch": true, "kdns_ascratch": true}
	for _, reopen := range []bool{false, true} {
		dp := f.dp
		if reopen {
			var err error
			if dp, err = Open(f.dp.pinDir, f.root); err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			if !dp.reused {
				t.Fatal("the re-open loaded the objects again")
			}
		}
		shared := make(map[ebpf.MapID]string)
		for name, m := range dp.objs.sluiceMaps.byName() {
			info, err := m.Info()
			if err != nil {
				t.Fatal(err)
			}
			id, _ := info.ID()
			shared[id] = name
		}
		for i, p := range dp.kdnsProgs {
			info, err := p.Info()
			if err != nil {
				t.Fatal(err)
			}
			ids, ok := info.MapIDs()
			if !ok || len(ids) == 0 {
				t.Fatalf("%s: no map ids", kdnsAttachments[i].name)
			}
			var names []string
			for _, id := range ids {
				if name, ok := shared[id]; ok {
					names = append(names, name)
					continue
				}
				m, err := ebpf.NewMapFromID(id)
				if err != nil {
					t.Fatal(err)
				}
				mi, err := m.Info()
				m.Close()
				if err != nil {
					t.Fatal(err)
				}
				if !own[mi.Name] {
					t.Fatalf("%s (reopen=%v) uses map %d %q, not the datapath's", kdnsAttachments[i].name, reopen, id, mi.Name)
				}
			}
			if !slices.Contains(names, "kdns_sessions") || !slices.Contains(names, "kdns_queries") {
				t.Fatalf("%s (reopen=%v) uses the datapath's %v, want kdns_sessions and kdns_queries among them", kdnsAttachments[i].name, reopen, names)
			}
		}
		var slot uint32
		if err := dp.objs.KdnsTail.Lookup(uint32(0), &slot); err != nil {
			t.Fatalf("kdns_tail (reopen=%v): %v", reopen, err)
		}
		info, err := dp.kdnsProgs[0].Info()
		if err != nil {
			t.Fatal(err)
		}
		if id, _ := info.ID(); ebpf.ProgramID(slot) != id {
			t.Fatalf("kdns_tail (reopen=%v) holds program %d, want the kernel DNS egress program %d", reopen, slot, id)
		}
	}
}

// TestObjectHashCoversBothObjects: the pinned hash that lets a re-open skip
// loading (reuse) changes with either object, so that a build whose kernel
// DNS object alone changed still loads and pins its programs.
func TestObjectHashCoversBothObjects(t *testing.T) {
	h := objectHash()
	for _, b := range []*[]byte{&_SluiceBytes, &_KdnsBytes} {
		saved := *b
		*b = append(append([]byte(nil), saved...), 0)
		changed := objectHash() != h
		*b = saved
		if !changed {
			t.Fatal("objectHash did not change with an object's bytes")
		}
	}
	if objectHash() != h {
		t.Fatal("objectHash is not a function of the objects")
	}
}

// TestKDNSRefusedKeepsTheDatapath: on a kernel whose verifier refuses the
// kernel DNS object (here a program of it made invalid), Open still loads
// and attaches the datapath, says why the path is off, and leaves the tail
// call slot empty (sluice_egress then drops what a redirected socket sends:
// nothing judged leaves). Twin: the intact object, loaded afresh, fills it.
func TestKDNSRefusedKeepsTheDatapath(t *testing.T) {
	intact := kdnsSpec
	kdnsSpec = func() (*ebpf.CollectionSpec, error) {
		spec, err := intact()
		if err != nil {
			return nil, err
		}
		// R0 is never set: every verifier refuses the program.
		spec.Programs[kdnsProgSluiceKdnsIngress].Instructions = asm.Instructions{asm.Return()}
		return spec, nil
	}
	defer func() { kdnsSpec = intact }()
	f := newFixture(t)
	err := f.dp.KDNSSupported()
	if !errors.Is(err, ErrKDNSUnsupported) || !strings.Contains(err.Error(), kdnsProgSluiceKdnsIngress) {
		t.Fatalf("KDNSSupported: %v, want ErrKDNSUnsupported naming %s", err, kdnsProgSluiceKdnsIngress)
	}
	if err := f.dp.Verify(f.session); err != nil {
		t.Fatalf("the rest of the datapath: %v", err)
	}
	var slot uint32
	if err := f.dp.objs.KdnsTail.Lookup(uint32(0), &slot); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Fatalf("kdns_tail with the path refused: %v (program %d), want an empty slot", err, slot)
	}

	kdnsSpec = intact
	if err := os.Remove(filepath.Join(f.dp.pinDir, metaPin)); err != nil {
		t.Fatal(err)
	}
	dp, err := Open(f.dp.pinDir, f.root)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if err := dp.KDNSSupported(); err != nil {
		t.Fatalf("KDNSSupported with the intact object: %v", err)
	}
	if err := dp.objs.KdnsTail.Lookup(uint32(0), &slot); err != nil {
		t.Fatalf("kdns_tail with the intact object: %v", err)
	}
}
