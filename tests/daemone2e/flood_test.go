// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/world"
)

// asUser runs fn on an OS thread that has the credentials of uid:gid and
// no supplementary groups, so that the sockets fn connects carry them
// (SO_PEERCRED, SO_PEERGROUPS record the connecting thread's). The thread
// is never given back to the Go runtime: it ends with fn.
func asUser(uid, gid uint32, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		for _, c := range [][3]uintptr{{unix.SYS_SETGROUPS, 0, 0}, {unix.SYS_SETRESGID, uintptr(gid), uintptr(gid)}, {unix.SYS_SETRESUID, uintptr(uid), uintptr(uid)}} {
			if _, _, e := unix.RawSyscall(c[0], c[1], c[2], c[2]); e != 0 {
				errc <- fmt.Errorf("change credentials: %w", e)
				return
			}
		}
		errc <- fn()
	}()
	return <-errc
}

// openFDs counts the daemon's open descriptors.
func (f *fixture) openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", f.daemon.Process.Pid))
	if err != nil {
		t.Fatalf("the daemon's descriptors: %v", err)
	}
	return len(ents)
}

// settledFDs counts the daemon's open descriptors once the count has held
// still for 300 ms (at most 5 s): a daemon just started may still be
// opening what it opens after its socket answers, and a loaded machine
// stretches that out.
func (f *fixture) settledFDs(t *testing.T) int {
	t.Helper()
	n, since := f.openFDs(t), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := f.openFDs(t); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) >= 300*time.Millisecond {
			break
		}
	}
	return n
}

// TestDescriptorFloodIsBounded: every member of the daemon's group can
// reach the API socket, as can a confined agent. Descriptors sent with
// requests that do not take them are closed on arrival and the request
// refused; a caller's connections are bounded, and idle or stalled ones
// are closed; while one user floods, the next client is served.
func TestDescriptorFloodIsBounded(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	const uid, gid = 65533, 65534 // a member of the session group, not root
	before := f.openFDs(t)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	eight := make([]int, 8)
	for i := range eight {
		eight[i] = int(devnull.Fd())
	}
	rights := unix.UnixRights(eight...)

	// 1. The reported attack: 2,600 GET /v1/status on one connection,
	// each carrying 8 descriptors of /dev/null.
	const requests = 2600
	var sent, holding int
	var codes []int
	var firstBody string
	var answered atomic.Int64
	start := time.Now()
	err = asUser(uid, gid, func() error {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: f.sock, Net: "unix"})
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		read := make(chan error, 1)
		go func() {
			br := bufio.NewReader(c)
			for {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					read <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				if len(codes) == 0 {
					firstBody = string(b)
				}
				codes = append(codes, resp.StatusCode)
				answered.Add(1)
			}
		}()
		req := []byte("GET /v1/status HTTP/1.1\r\nHost: sluice\r\n\r\n")
		for ; sent < requests; sent++ {
			if _, _, err := c.WriteMsgUnix(req, rights, nil); err != nil {
				break // the daemon closed the connection (EPIPE), or the kernel's in-flight limit
			}
		}
		// What the daemon holds while the connection is open, once it has
		// answered what it will.
		err = nil
		for end := time.Now().Add(5 * time.Second); answered.Load() < int64(sent) && time.Now().Before(end); {
			select {
			case err = <-read:
				end = time.Now()
			case <-time.After(20 * time.Millisecond):
			}
		}
		// On another thread: this one has given up root.
		ch := make(chan int)
		go func() { ch <- f.openFDs(t) }()
		holding = <-ch
		_ = c.CloseWrite()
		if err == nil {
			err = <-read
		}
		// The end of the connection: a clean EOF, a reset, or (when the
		// close lands while the reader waits on the next response) an
		// unexpected EOF.
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, unix.ECONNRESET) {
			t.Errorf("reading the answers: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d of %d requests with 8 descriptors each in %v, %d answered; daemon descriptors: %d before, %d with the connection open, %d after", sent, requests, time.Since(start).Round(time.Millisecond), len(codes), before, holding, f.openFDs(t))
	if len(codes) != 1 || codes[0] != http.StatusBadRequest || !strings.Contains(firstBody, "descriptors are accepted only with POST /v1/sessions") {
		t.Errorf("status requests with descriptors: %d answered, the first %.200s; want one 400 naming the descriptors, then the end of the connection", len(codes), firstBody)
	}
	if holding > before+4 {
		t.Errorf("the daemon held %d descriptors with the flooding connection open, %d before", holding, before)
	}

	// 2. Many connections, each a keep-alive one after a good request,
	// plus one that stalls after its headers.
	const conns = 300
	var held, refused []*net.UnixConn
	var refusal string
	var stalled *net.UnixConn
	err = asUser(uid, gid, func() error {
		for range conns {
			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: f.sock, Net: "unix"})
			if err != nil {
				return err
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _ = io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: sluice\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				c.Close()
				return fmt.Errorf("connection %d: %w", len(held)+len(refused), err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				held = append(held, c)
			case http.StatusServiceUnavailable:
				refusal = string(b)
				refused = append(refused, c)
			default:
				c.Close()
				return fmt.Errorf("connection %d: %d %s", len(held)+len(refused), resp.StatusCode, b)
			}
		}
		return nil
	})
	if err == nil {
		// Another user (this one is at its limit) sends the headers of a
		// request with a body, and not all the body (the handler reads
		// it: decode comes before any permission check).
		err = asUser(65532, 65534, func() error {
			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: f.sock, Net: "unix"})
			if err != nil {
				return err
			}
			stalled = c
			_, err = io.WriteString(c, "POST /v1/sessions HTTP/1.1\r\nHost: sluice\r\nContent-Length: 100\r\n\r\n{\"argv\"")
			return err
		})
	}
	all := append(append([]*net.UnixConn{stalled}, held...), refused...)
	defer func() {
		for _, c := range all {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	during := f.openFDs(t)
	t.Logf("%d connections: %d served and held open, %d refused (%s); daemon descriptors %d", conns, len(held), len(refused), strings.TrimSpace(refusal), during)
	if len(held) > 128 || len(refused) == 0 || !strings.Contains(refusal, "uid 65533 already has") {
		t.Errorf("one user held %d connections and was refused %d: want at most 128 held and the rest refused with the reason", len(held), len(refused))
	}
	if during > before+2*128+16 {
		t.Errorf("the daemon holds %d descriptors during the flood (%d before)", during, before)
	}

	// 3. The next clients are served: root, and a member of the session
	// group running a session.
	if out, _, code := f.sluice(t, 0, 0, "status"); code != 0 || !strings.HasPrefix(out, "daemon:") {
		t.Errorf("root's status during the flood: exit %d %s", code, out)
	}
	if out, stderr, code := f.sluice(t, 65534, 65534, "run", "--", "echo", "served"); code != 0 || strings.TrimSpace(out) != "served" {
		t.Errorf("a session during the flood: exit %d %q %s", code, out, stderr)
	}

	// 4. The daemon closes what waits: the idle keep-alive connections
	// (15 s) and the stalled request (20 s).
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	waited := time.Now()
	wg.Go(func() {
		_ = stalled.SetReadDeadline(time.Now().Add(35 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(stalled), nil)
		if err != nil {
			t.Errorf("the stalled request: %v", err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		t.Logf("the stalled request was answered after %v: %d %s", time.Since(waited).Round(time.Second), resp.StatusCode, strings.TrimSpace(string(b)))
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "did not arrive within") {
			t.Errorf("the stalled request: %d %s, want 408", resp.StatusCode, b)
		}
	})
	for _, c := range held {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(35 * time.Second))
			_, err := io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("the idle connections were closed within %v", time.Since(waited).Round(time.Second))
	if open > 0 {
		t.Errorf("%d connections were still open 35 s after their last request", open)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.openFDs(t) > before+4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := f.openFDs(t); n > before+4 {
		t.Errorf("the daemon holds %d descriptors once the flood is over, %d before", n, before)
	}
	f.assertNoPanic(t)
}

// TestCreateTakesExactlyThreeDescriptors: a session request with more than
// stdin, stdout and stderr is refused and none of them is kept, and so is
// one whose descriptors come after the connection's first bytes; the twin
// with three on the first bytes runs.
func TestCreateTakesExactlyThreeDescriptors(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	before := f.settledFDs(t)
	body := `{"argv": ["/bin/true"], "user": "65534:65534"}`
	head := fmt.Sprintf("POST /v1/sessions HTTP/1.1\r\nHost: sluice\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	out, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// send sends the request with fds on c and reads the answer.
	send := func(t *testing.T, c *net.UnixConn, req string, fds ...int) (int, string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		if _, _, err := c.WriteMsgUnix([]byte(req), oob, nil); err != nil {
			t.Fatalf("send: %v", err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	o := int(out.Fd())
	if code, resp := send(t, f.dialAPI(t), head+body, 0, o, o, o, o, o, o, o); code != http.StatusBadRequest || !strings.Contains(resp, "got more than 3 descriptors") {
		t.Errorf("8 descriptors: %d %s, want 400", code, resp)
	}
	// A keep-alive connection: a first request, then the session request
	// with its descriptors.
	c := f.dialAPI(t)
	if code, resp := send(t, c, "GET /v1/status HTTP/1.1\r\nHost: sluice\r\n\r\n"); code != http.StatusOK {
		t.Fatalf("status: %d %s", code, resp)
	}
	if code, resp := send(t, c, head+body, 0, o, o); code != http.StatusBadRequest || !strings.Contains(resp, "first bytes of its connection (got 3 descriptors)") {
		t.Errorf("descriptors with a later request: %d %s, want 400", code, resp)
	}
	// The refused connections' ends close as the daemon gets to them.
	for deadline := time.Now().Add(2 * time.Second); f.openFDs(t) > before+2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := f.openFDs(t); n > before+2 {
		t.Errorf("the daemon holds %d descriptors, %d before", n, before)
	}
	// The twin: three descriptors with the first bytes, from a client in
	// the daemon's network namespace (this process is not in it).
	c2 := exec.Command(world.BuildProbe(t), "daemon-run", f.sock, "/bin/true")
	var stdout bytes.Buffer
	c2.Stdout = &stdout
	if err := f.w.StartInClient(c2); err != nil {
		t.Fatal(err)
	}
	_ = c2.Wait()
	if r, err := world.ParseProbeResult(stdout.Bytes()); err != nil || !r.OK {
		t.Errorf("three descriptors with the first bytes: %v %v", r, err)
	}
}
