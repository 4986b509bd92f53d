// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Package daemone2e tests the sluice daemon end to end: its API with good
// and bad input, who may do what (real other uids), crash survival and
// re-adoption, allowlist reloads, the audit log and the metrics. The daemon
// runs in the world's client namespace, so the commands it spawns do too.
package daemone2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/tests/needs"
	"github.com/sluice-dev/sluice/tests/world"
)

var sluiceBin string

var dnsAddr = netip.MustParseAddr("203.0.113.53")

const metricsAddr = "127.0.0.1:9469"

func TestMain(m *testing.M) {
	code := func() int {
		if code, ready := needs.Main(m, "daemone2e", needs.Kernel...); !ready {
			return code // every test skips, or one failure under SLUICE_REQUIRE_KERNEL=1
		}
		// Each fixture runs its own daemon instance; this one is unused.
		bin, _, cleanup, err := world.SluiceForTests("sluice-daemone2e")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		sluiceBin = bin
		defer world.RemoveProbe()
		return m.Run()
	}()
	os.Exit(code)
}

// fixture is a world with a DNS server and a running daemon.
type fixture struct {
	w        *world.World
	dns      *world.DNSServer
	instance string
	dir      string // 0755: socket, allowlist, audit log, scratch files
	sock     string
	allow    string
	audit    string
	daemon   *exec.Cmd
	port     uint16   // TCP server on AllowedV4
	denied   uint16   // TCP server on DeniedV4
	extra    []string // more daemon flags
	// mountSetup, if set, is a shell script run in a private mount
	// namespace that the daemon then runs in (as under systemd, whose
	// unit gives it one of its own).
	mountSetup string
	// log collects the output of every daemon the fixture started.
	log *lockedBuffer
	// inherit are descriptors the next daemon inherits (from fd 3 on).
	inherit []*os.File
	// env is more environment for the next daemon.
	env []string
}

func newFixture(t *testing.T, allowed ...string) *fixture {
	return newFixtureFlags(t, nil, allowed...)
}

// newFixtureFlags is newFixture with more daemon flags (later flags win).
func newFixtureFlags(t *testing.T, flags []string, allowed ...string) *fixture {
	return newFixtureMount(t, flags, "", allowed...)
}

// newFixtureMount is newFixtureFlags with the daemon in a mount namespace
// of its own, set up by the shell script mountSetup (see fixture).
func newFixtureMount(t *testing.T, flags []string, mountSetup string, allowed ...string) *fixture {
	w := world.New(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	f := &fixture{w: w, instance: "sluice-d2e-" + hex.EncodeToString(rnd[:]), dir: t.TempDir(), extra: flags, mountSetup: mountSetup}
	_ = os.Chmod(filepath.Dir(f.dir), 0o755)
	_ = os.Chmod(f.dir, 0o777)
	f.sock = filepath.Join(f.dir, "sluice.sock")
	f.allow = filepath.Join(f.dir, "network_allowlist.json")
	f.audit = filepath.Join(f.dir, "audit.jsonl")
	zone := world.Zone(map[string][]string{
		"allowed.test.":  {"A 203.0.113.10"},
		"allowed2.test.": {"A 203.0.113.10"},
		// One CDN address serving an allowed and a denied name (names_test.go).
		"cdn.test.":  {"A 203.0.113.30", "AAAA 2001:db8:2::30"},
		"evil.test.": {"A 203.0.113.30", "AAAA 2001:db8:2::30"},
		"many.test.": {"A 203.0.113.31", "A 203.0.113.32", "A 203.0.113.33", "A 203.0.113.34", "A 203.0.113.35",
			"A 203.0.113.36", "A 203.0.113.37", "A 203.0.113.38", "A 203.0.113.39", "A 203.0.113.40"},
	})
	f.dns = w.ServeDNS(t, dnsAddr, func(q dns.Question) []dns.RR {
		// Every name under fresh.test exists (fresh names on demand).
		if strings.HasSuffix(strings.ToLower(q.Name), ".fresh.test.") {
			if q.Qtype != dns.TypeA {
				return []dns.RR{} // NOERROR, no records
			}
			rr, _ := dns.NewRR(q.Name + " 60 IN A 203.0.113.10")
			return []dns.RR{rr}
		}
		// Every name under ask.test is one CDN address (ask_test.go):
		// names on demand that one server tells apart by SNI and Host.
		if strings.HasSuffix(strings.ToLower(q.Name), ".ask.test.") {
			if q.Qtype != dns.TypeA {
				return []dns.RR{}
			}
			rr, _ := dns.NewRR(q.Name + " 60 IN A " + askCDN.String())
			return []dns.RR{rr}
		}
		return zone(q)
	})
	f.port = w.ListenTCP(t, world.AllowedV4)
	f.denied = w.ListenTCP(t, world.DeniedV4)
	f.writeAllowlist(t, allowed...)
	t.Cleanup(func() {
		f.stopDaemon(t)
		c := exec.Command(sluiceBin, "cleanup", "--state-dir", "/run/"+f.instance)
		c.Env = append(os.Environ(), "SLUICE_INSTANCE="+f.instance)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sluice cleanup: %v: %s", err, out)
		}
	})
	f.startDaemon(t)
	return f
}

func (f *fixture) writeAllowlist(t *testing.T, entries ...string) {
	t.Helper()
	b, _ := json.Marshal(map[string][]string{"allowed_hosts": entries})
	f.writeFile(t, f.allow, b)
}

// writeFile replaces a file atomically, as editors do.
func (f *fixture) writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) startDaemon(t *testing.T) {
	t.Helper()
	args := append([]string{"daemon",
		"--socket", f.sock, "--allowlist", f.allow, "--state-dir", "/run/" + f.instance, "--audit-log", f.audit,
		"--metrics-addr", metricsAddr, "--dns-upstream", dnsAddr.String(), "--group", "65534"}, dnsPathFlags()...)
	args = append(args, f.extra...)
	c := f.w.ClientCmd(context.Background(), sluiceBin, args...)
	if f.mountSetup != "" {
		// unshare and sh exec, so the pid is still the daemon's.
		c = f.w.ClientCmd(context.Background(), "unshare", append([]string{"--mount", "--propagation", "private",
			"sh", "-c", f.mountSetup + "\nexec \"$@\"", "sh", sluiceBin}, args...)...)
	}
	c.Env = append(append(os.Environ(), "SLUICE_INSTANCE="+f.instance), f.env...)
	c.ExtraFiles = f.inherit
	if f.log == nil {
		f.log = &lockedBuffer{}
	}
	errb := f.log
	c.Stdout, c.Stderr = errb, errb
	if err := c.Start(); err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	f.daemon = c
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if out, _, code := f.sluice(t, 0, 0, "status"); code == 0 && strings.HasPrefix(out, "daemon:") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("daemon did not answer on %s: %s", f.sock, f.log.String())
}

// stopDaemon kills the daemon (the nsenter wrapper execs it, so the pid is
// the daemon's) with SIGKILL unless it already exited.
func (f *fixture) stopDaemon(t *testing.T) {
	if f.daemon == nil {
		return
	}
	_ = f.daemon.Process.Signal(syscall.SIGKILL)
	_ = f.daemon.Wait()
	f.daemon = nil
}

// stopDaemonGracefully stops the daemon with SIGTERM, as systemd does, and
// waits (bounded) for it to exit.
func (f *fixture) stopDaemonGracefully(t *testing.T) {
	t.Helper()
	if f.daemon == nil {
		return
	}
	_ = f.daemon.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- f.daemon.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = f.daemon.Process.Signal(syscall.SIGKILL)
		<-done
		t.Errorf("the daemon did not exit within 15 s of SIGTERM")
	}
	f.daemon = nil
}

// sluice runs a sluice client command as uid:gid (0: root) with the
// daemon's socket, in the daemon's network namespace (the daemon starts
// sessions only for callers that share it).
func (f *fixture) sluice(t *testing.T, uid, gid uint32, args ...string) (string, string, int) {
	t.Helper()
	return f.sluiceFrom(t, f.w.StartInClient, uid, gid, args...)
}

// sluiceFrom is sluice with the client started by start.
func (f *fixture) sluiceFrom(t *testing.T, start func(*exec.Cmd) error, uid, gid uint32, args ...string) (string, string, int) {
	t.Helper()
	return f.sluiceGroups(t, start, uid, gid, []uint32{}, args...)
}

// sluiceGroups is sluiceFrom with supplementary groups.
func (f *fixture) sluiceGroups(t *testing.T, start func(*exec.Cmd) error, uid, gid uint32, groups []uint32, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, sluiceBin, append([]string{"--socket", f.sock}, args...)...)
	c.Dir = "/"
	// The runner's own CI=true would turn --ask into --ask=never; a test
	// that wants it passes it explicitly (sluiceEnv).
	c.Env = environWithout("CI")
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := start(c)
	if err == nil {
		err = c.Wait()
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		// Errorf, not Fatalf: tests run sessions from other goroutines.
		t.Errorf("sluice %v: %v", args, err)
		return out.String(), errb.String(), -1
	}
	t.Logf("uid %d: sluice %s -> %d\nstdout: %s\nstderr: %s", uid, strings.Join(args, " "), code, out.String(), errb.String())
	return out.String(), errb.String(), code
}

// probe runs one confined probe action through the daemon as root asking
// for uid 65534.
func (f *fixture) probe(t *testing.T, flags []string, action ...string) world.ProbeResult {
	t.Helper()
	r, _ := f.probeStderr(t, flags, action...)
	return r
}

// probeStderr is probe that also returns sluice's stderr.
func (f *fixture) probeStderr(t *testing.T, flags []string, action ...string) (world.ProbeResult, string) {
	t.Helper()
	args := append([]string{"run", "--user", "65534:65534"}, flags...)
	args = append(append(args, "--", world.BuildProbe(t)), action...)
	out, stderr, _ := f.sluice(t, 0, 0, args...)
	r, err := world.ParseProbeResult([]byte(out))
	if err != nil {
		t.Fatalf("probe %v: %v", action, err)
	}
	return r, stderr
}

// wantSandboxDenial checks that a refusal by a daemon session's sandbox
// was explained: a line on the caller's terminal ("sluice: denied
// probe[42] -> pidfd_getfd of probe[41]: outside the session") and a
// sandbox_denied line in the daemon's audit log naming the access and the
// victim's pid.
func (f *fixture) wantSandboxDenial(t *testing.T, stderr, access string, victim int) {
	t.Helper()
	line := regexp.MustCompile(`(?m)^sluice: denied \S+\[\d+\] -> ` + regexp.QuoteMeta(access) + ` (of|to) \S+\[` + fmt.Sprint(victim) + `\]: outside the session$`)
	if !line.MatchString(stderr) {
		t.Errorf("no line explains the refused %s of %d:\n%s", access, victim, stderr)
	}
	f.waitAudit(t, "sandbox_denied", func(e map[string]any) bool {
		return e["access"] == access && fmt.Sprint(e["target_pid"]) == fmt.Sprint(victim) && e["reason"] == "outside the session"
	})
}

// auditEvents parses the audit log; every line must match
// docs/audit.schema.json.
func (f *fixture) auditEvents(t *testing.T) []map[string]any {
	t.Helper()
	return world.ReadAuditLog(t, f.audit)
}

// waitAudit waits (bounded) for an audit event of typ matching pred.
func (f *fixture) waitAudit(t *testing.T, typ string, pred func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(f.audit); err == nil {
			for _, e := range f.auditEvents(t) {
				if e["type"] == typ && (pred == nil || pred(e)) {
					return e
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s event in the audit log", typ)
	return nil
}

// api sends a raw request to the daemon as root.
func (f *fixture) api(t *testing.T, method, path string, body []byte) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", f.sock)
		}}}
	req, _ := http.NewRequest(method, "http://sluice"+path, bytes.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// waitFile waits (bounded) for a confined script's output file.
func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return nil
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// dnsPathFlags runs the daemon on the DNS path SLUICE_E2E_DNS_PATH names
// (auto, kernel or resolver; empty: sluice's default), so that CI runs the
// package once per path; a fixture's own flags come later and win.
func dnsPathFlags() []string {
	if p := os.Getenv("SLUICE_E2E_DNS_PATH"); p != "" {
		return []string{"--dns-path", p}
	}
	return nil
}

// dnsPath is the daemon's DNS path: the fixture's --dns-path, else
// SLUICE_E2E_DNS_PATH's, else sluice's default (auto).
func (f *fixture) dnsPath() string {
	path := os.Getenv("SLUICE_E2E_DNS_PATH")
	for i, a := range f.extra {
		if a == "--dns-path" && i+1 < len(f.extra) {
			path = f.extra[i+1]
		}
	}
	if path == "" {
		path = "auto"
	}
	return path
}

// kernelDNS reports whether the daemon's sessions resolve through the
// kernel DNS path while the daemon is down: always (kernel) or as the
// resolver's failover (auto).
func (f *fixture) kernelDNS() bool { p := f.dnsPath(); return p == "kernel" || p == "auto" }

// lockedBuffer is a bytes.Buffer that a daemon's output copier and a test
// may use at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// environWithout is os.Environ without the named variables.
func environWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			env = append(env, kv)
		}
	}
	return env
}
