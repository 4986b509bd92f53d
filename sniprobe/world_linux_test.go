// SPDX-License-Identifier: Apache-2.0

package sniprobe

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/namecheck"
	"github.com/sluice-dev/sluice/netns"

	"github.com/sluice-dev/sluice/tests/needs"
)

// The test world: a client namespace (203.0.113.1) and a "CDN" namespace
// (203.0.113.2) whose TLS-shaped listener on 443 records, per client port,
// every byte it received and the SNI they carry. A ClientHello naming
// bulk.example is answered with bulkBytes bytes, any other with one byte.
var (
	clientAddr = netip.MustParseAddr("203.0.113.1")
	cdnAddr    = netip.MustParseAddr("203.0.113.2")
)

const (
	bulkName   = "bulk.example"
	uploadName = "upload.example"
)

type record struct {
	bytes int
	sni   string
}

type world struct {
	t          *testing.T
	cns, sns   string
	cgOn, cgOf string
	probe      *Probe
	bulkBytes  int64
	ln         net.Listener
	mu         sync.Mutex
	got        map[int]*record
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newWorld(t *testing.T, bulkBytes int64, o Options) *world {
	needs.Have(t, needs.World...)
	if _, err := exec.LookPath("iptables"); err != nil {
		needs.Skip(t, "needs iptables (apt-get install iptables)")
	}
	id := os.Getpid()
	w := &world{t: t, cns: fmt.Sprintf("spc%d", id), sns: fmt.Sprintf("sps%d", id), bulkBytes: bulkBytes, got: map[int]*record{}}
	va, vb := fmt.Sprintf("spa%d", id), fmt.Sprintf("spb%d", id)
	run(t, "ip", "netns", "add", w.cns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", w.cns).Run() })
	run(t, "ip", "netns", "add", w.sns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", w.sns).Run() })
	run(t, "ip", "link", "add", va, "netns", w.cns, "type", "veth", "peer", "name", vb, "netns", w.sns)
	run(t, "ip", "-n", w.cns, "addr", "add", clientAddr.String()+"/24", "dev", va)
	run(t, "ip", "-n", w.sns, "addr", "add", cdnAddr.String()+"/24", "dev", vb)
	for _, ns := range [][2]string{{w.cns, va}, {w.sns, vb}} {
		run(t, "ip", "-n", ns[0], "link", "set", "lo", "up")
		run(t, "ip", "-n", ns[0], "link", "set", ns[1], "up")
	}
	// The CDN answers TCP Fast Open, as the big ones do.
	run(t, "ip", "netns", "exec", w.sns, "sysctl", "-qw", "net.ipv4.tcp_fastopen=3")

	root := filepath.Join(cgroup2Root(t), fmt.Sprintf("sniprobe%d", id))
	w.cgOn, w.cgOf = filepath.Join(root, "on"), filepath.Join(root, "off")
	for _, d := range []string{root, w.cgOn, w.cgOf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("cgroup: %v", err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{w.cgOn, w.cgOf, root} {
			_ = os.Remove(d)
		}
	})
	p, err := Attach(w.cgOn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	w.probe = p
	if err := p.Check(cdnAddr); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"allowed.example", bulkName, uploadName} {
		if err := p.Allow(cdnAddr, n); err != nil {
			t.Fatal(err)
		}
	}

	err = netns.DoPath("/run/netns/"+w.sns, func() error {
		var lerr error
		w.ln, lerr = net.Listen("tcp4", netip.AddrPortFrom(cdnAddr, 443).String())
		return lerr
	})
	if err != nil {
		t.Fatalf("listen in the CDN: %v", err)
	}
	t.Cleanup(func() { _ = w.ln.Close() })
	go w.serve()
	return w
}

// cgroup2Root is where the unified hierarchy is mounted.
func cgroup2Root(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	t.Fatal("no cgroup2 mount")
	return ""
}

func (w *world) serve() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		go w.conn(c)
	}
}

func (w *world) conn(c net.Conn) {
	defer c.Close()
	port := c.RemoteAddr().(*net.TCPAddr).Port
	r := &record{}
	w.mu.Lock()
	w.got[port] = r
	w.mu.Unlock()
	buf := make([]byte, 0, 20000)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		w.mu.Lock()
		r.bytes = len(buf)
		w.mu.Unlock()
		f, ierr := namecheck.Inspect(buf)
		if ierr == nil {
			w.mu.Lock()
			r.sni = f.Name
			w.mu.Unlock()
			break
		}
		if err != nil || len(buf) == cap(buf) {
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	if r.sni == bulkName {
		chunk := make([]byte, 256<<10)
		for left := w.bulkBytes; left > 0; left -= int64(len(chunk)) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
		return
	}
	if r.sni == uploadName {
		_, _ = io.Copy(io.Discard, c)
		_, _ = c.Write([]byte{'k'})
		return
	}
	if _, err := c.Write([]byte{'k'}); err != nil {
		return
	}
	// Record whatever else comes (a leak after a refusal would show).
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	w.mu.Lock()
	r.bytes += int(n)
	w.mu.Unlock()
}

// seen is what the world recorded from client port port.
func (w *world) seen(port int) (record, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.got[port]
	if !ok {
		return record{}, false
	}
	return *r, true
}

// seenName counts the connections whose first flight named sni.
func (w *world) seenName(sni string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.got {
		if r.sni == sni {
			n++
		}
	}
	return n
}

// childResult is what a client child reports.
type childResult struct {
	Port    int       `json:"port"`
	Err     string    `json:"err,omitempty"`
	Reply   bool      `json:"reply"`
	Ns      []float64 `json:"ns,omitempty"`
	Bytes   int64     `json:"bytes,omitempty"`
	Seconds float64   `json:"seconds,omitempty"`
	Eagain  int       `json:"eagain,omitempty"`
}

// child runs this test binary as a client in the client namespace and in
// cgroup cg, in mode with args, and decodes its report.
func (w *world) child(cg, mode string, args ...string) childResult {
	w.t.Helper()
	fd, err := os.Open(cg)
	if err != nil {
		w.t.Fatal(err)
	}
	defer fd.Close()
	self, err := os.Executable()
	if err != nil {
		w.t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", w.cns, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "SNIPROBE_CHILD="+mode, "SNIPROBE_ARGS="+strings.Join(args, ","))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("child %s %v: %v: %s", mode, args, err, out)
	}
	var r childResult
	if err := json.Unmarshal(out, &r); err != nil {
		w.t.Fatalf("child %s: %v: %q", mode, err, out)
	}
	return r
}

// helloBytes is the first flight crypto/tls sends for sni.
func helloBytes(sni string) []byte {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_ = c.Handshake()
	}()
	buf := make([]byte, 0, namecheck.MaxFlight)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, err := b.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if _, ierr := namecheck.Inspect(buf); ierr == nil || err != nil {
			return buf
		}
	}
}
