// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/world"
)

// rawAPI sends one request to the daemon as uid:gid (0: root, as the
// test), with fds as SCM_RIGHTS on its first bytes, and returns the
// answer.
func (f *fixture) rawAPI(t *testing.T, uid, gid uint32, method, path, body string, fds ...int) (*http.Response, string) {
	t.Helper()
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: sluice\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, path, len(body), body)
	var resp *http.Response
	var b []byte
	do := func() error {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: f.sock, Net: "unix"})
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(15 * time.Second))
		var oob []byte
		if len(fds) > 0 {
			oob = unix.UnixRights(fds...)
		}
		// Written while the answer is read: the daemon may answer (413)
		// before it has read it all.
		go func() {
			// sendmsg may take only part of a long request.
			if n, _, err := c.WriteMsgUnix([]byte(req), oob, nil); err == nil && n < len(req) {
				_, _ = c.Write([]byte(req[n:]))
			}
		}()
		if resp, err = http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method}); err != nil {
			return err
		}
		b, err = io.ReadAll(resp.Body)
		return err
	}
	var err error
	if uid == 0 {
		err = do()
	} else {
		err = asUser(uid, gid, do)
	}
	if err != nil {
		t.Fatalf("%s %s as uid %d: %v", method, path, uid, err)
	}
	return resp, string(b)
}

// TestAPIErrorStatusesAsDocumented holds docs/api.md's promises about
// error answers: the status, the JSON body and the start of its message,
// for each row that a test can bring about, and the router's plain-text
// errors.
func TestAPIErrorStatusesAsDocumented(t *testing.T) {
	// The socket lets everyone connect, so that the answers to callers
	// outside every group (the outsider below) are the daemon's; by
	// default the socket file refuses them (TestSocketOnlyForTheGroup).
	f := newFixtureFlags(t, []string{"--socket-mode", "0666"}, "203.0.113.10", "allowed.test")
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	n := int(devnull.Fd())
	stdio := []int{n, n, n}
	const root, nobody, outsider = 0, 65534, 65533 // nobody: gid 65534 is the session group; outsider: in no group
	cases := []struct {
		name         string
		uid          uint32
		method, path string
		body         string
		fds          []int
		code         int
		prefix       string
	}{
		// Conventions.
		{"malformed JSON", root, "POST", "/v1/sessions", `{"argv": [`, nil, 400, "malformed request"},
		{"unknown field", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "allow_everything": true}`, nil, 400, "malformed request"},
		{"data after the object", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"]} {}`, nil, 400, "malformed request: trailing data"},
		{"body over 1 MiB", root, "POST", "/v1/allowlist", `{"entries": ["` + strings.Repeat("a", 1<<20) + `"]}`, nil, 413, "request body larger than 1048576 bytes"},
		{"descriptors with another request", root, "GET", "/v1/status", "", stdio, 400, "descriptors are accepted only with POST /v1/sessions"},
		// POST /v1/sessions, in the table's order.
		{"not in the session group", outsider, "POST", "/v1/sessions", `{"argv": ["/bin/true"]}`, stdio, 403, "uid 65533 may not create sessions"},
		{"no command", root, "POST", "/v1/sessions", `{"argv": [], "user": "65534"}`, stdio, 400, "argv: a command is required"},
		{"empty command", root, "POST", "/v1/sessions", `{"argv": [""], "user": "65534"}`, stdio, 400, "argv: a command is required"},
		{"negative limit", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534", "pids_max": -1}`, stdio, 400, "pids_max and memory_max must not be negative"},
		{"another user, not root", nobody, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65533"}`, stdio, 403, "user: only root may run a session as another user"},
		{"unknown user", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "no-such-user-sluice"}`, stdio, 400, `user "no-such-user-sluice"`},
		{"as root", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"]}`, stdio, 400, "sluice never runs the command as root"},
		{"invalid entry", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534", "allow": ["https://x.example/"]}`, stdio, 400, "allow: "},
		{"beyond the machine", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534", "allow": ["evil.example"]}`, stdio, 403, "a session may only narrow the machine allowlist"},
		{"no descriptors", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534"}`, nil, 400, "pass stdin, stdout and stderr with the request"},
		{"two descriptors", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534"}`, stdio[:2], 400, "pass stdin, stdout and stderr with the request"},
		{"four descriptors", root, "POST", "/v1/sessions", `{"argv": ["/bin/true"], "user": "65534"}`, []int{n, n, n, n}, 400, "pass stdin, stdout and stderr with the request"},
		{"no slash", root, "POST", "/v1/sessions", `{"argv": ["true"], "user": "65534"}`, stdio, 400, "true: command not found (pass an absolute path)"},
		// The 403s for callers in another network namespace or root
		// directory: TestCallersElsewhereRefused.
		// Sessions.
		{"show unknown", root, "GET", "/v1/sessions/nope", "", nil, 404, `no session "nope"`},
		{"kill unknown", root, "DELETE", "/v1/sessions/nope", "", nil, 404, `no session "nope"`},
		{"signal unknown", root, "POST", "/v1/sessions/nope/signal", `{"signal": "TERM"}`, nil, 404, `no session "nope"`},
		// The machine allowlist.
		{"allow, not admin", nobody, "POST", "/v1/allowlist", `{"entries": ["evil.example"]}`, nil, 403, "changing the machine allowlist needs root or the admin group"},
		{"remove, not admin", outsider, "POST", "/v1/allowlist/remove", `{"entries": ["allowed.test"]}`, nil, 403, "changing the machine allowlist needs root or the admin group"},
		{"revoke, not admin", outsider, "POST", "/v1/allowlist/revoke", `{"owner": "x"}`, nil, 403, "changing the machine allowlist needs root or the admin group"},
		{"bad entry", root, "POST", "/v1/allowlist", `{"entries": ["https://x.example.com/v1"]}`, nil, 400, `entries[0] "https://x.example.com/v1"`},
		{"nothing to allow", root, "POST", "/v1/allowlist", `{"entries": []}`, nil, 400, "entries: nothing to allow"},
		{"remove absent", root, "POST", "/v1/allowlist/remove", `{"entries": ["absent.example"]}`, nil, 404, "none of"},
		{"revoke without owner", root, "POST", "/v1/allowlist/revoke", `{}`, nil, 400, "owner is required"},
		{"revoke unknown owner", root, "POST", "/v1/allowlist/revoke", `{"owner": "nobody"}`, nil, 404, `no entry is owned by "nobody"`},
	}
	for _, c := range cases {
		resp, body := f.rawAPI(t, c.uid, c.uid, c.method, c.path, c.body, c.fds...)
		var e struct{ Error string }
		if resp.StatusCode != c.code || resp.Header.Get("Content-Type") != "application/json" ||
			json.Unmarshal([]byte(body), &e) != nil || !strings.HasPrefix(e.Error, c.prefix) {
			t.Errorf("%s: %d %s %.300s, want %d application/json with an error starting %q", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), body, c.code, c.prefix)
		}
	}

	// The router's own errors are plain text; HEAD works where GET does.
	if resp, body := f.rawAPI(t, root, root, "GET", "/v2/nothing", "", nil...); resp.StatusCode != 404 || strings.TrimSpace(body) != "404 page not found" {
		t.Errorf("unknown path: %d %q", resp.StatusCode, body)
	}
	if resp, body := f.rawAPI(t, root, root, "PUT", "/v1/status", "", nil...); resp.StatusCode != 405 || !strings.Contains(resp.Header.Get("Allow"), "GET") || json.Valid([]byte(body)) {
		t.Errorf("wrong method: %d Allow %q %q", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	if resp, _ := f.rawAPI(t, root, root, "HEAD", "/v1/status", "", nil...); resp.StatusCode != 200 {
		t.Errorf("HEAD /v1/status: %d", resp.StatusCode)
	}

	// A signal a session cannot be sent: 400, once the session is found.
	marker := filepath.Join(f.dir, "sleeping")
	go f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", "echo $SLUICE_SESSION > "+marker+"; sleep 30")
	session := strings.TrimSpace(string(waitFile(t, marker)))
	if resp, body := f.rawAPI(t, root, root, "POST", "/v1/sessions/"+session+"/signal", `{"signal": "BOGUS"}`); resp.StatusCode != 400 || !strings.Contains(body, `unknown signal \"BOGUS\"`) {
		t.Errorf("unknown signal: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.rawAPI(t, root, root, "DELETE", "/v1/sessions/"+session, ""); resp.StatusCode != 200 {
		t.Errorf("kill: %d %s", resp.StatusCode, body)
	}

	// "start …" (400): what the daemon cannot run is refused before the
	// answer, not reported by the shim after a 200. From the daemon's
	// network namespace, as a client must be.
	scratch := filepath.Join(f.dir, "scratch")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(scratch, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		scratch:                           "is a directory",
		plain:                             "permission denied",
		filepath.Join(scratch, "missing"): "no such file or directory",
		"/bin/true":                       "",
	} {
		c := exec.Command(world.BuildProbe(t), "daemon-run", f.sock, path)
		var out bytes.Buffer
		c.Stdout = &out
		if err := f.w.StartInClient(c); err != nil {
			t.Fatal(err)
		}
		_ = c.Wait()
		r, err := world.ParseProbeResult(out.Bytes())
		switch {
		case err != nil:
			t.Errorf("daemon-run %s: %v", path, err)
		case want == "" && !r.OK:
			t.Errorf("positive twin: daemon-run %s: %s", path, r)
		case want != "" && (r.OK || !strings.Contains(r.Error, "daemon: start "+path+": exec "+path+": "+want)):
			t.Errorf("daemon-run %s: %s, want a refusal starting \"start\" with %q", path, r, want)
		}
	}
}

// TestDaemonDNSSettings holds docs/design.md's promise: the daemon takes
// the DNS settings (TestAdoptedSessionForgetsExpiredAnswers shows them
// applied), and `sluice run` through a daemon ignores its own and says so.
func TestDaemonDNSSettings(t *testing.T) {
	f := newFixture(t, "203.0.113.10")
	out, _, code := f.sluice(t, 0, 0, "daemon", "--help")
	for _, flag := range []string{"--dns-ttl-min", "--dns-ttl-max", "--dns-grace", "--dns-max-ips-per-name"} {
		if code != 0 || !strings.Contains(out, flag) {
			t.Errorf("sluice daemon --help (exit %d) does not list %s", code, flag)
		}
		value := "1s"
		if flag == "--dns-max-ips-per-name" {
			value = "3"
		}
		_, stderr, code := f.sluice(t, 65534, 65534, "run", flag, value, "--", "true")
		if code != 0 || !strings.Contains(stderr, "the daemon's DNS settings apply; --dns-* flags are ignored") {
			t.Errorf("sluice run %s through the daemon: exit %d, no note: %s", flag, code, stderr)
		}
	}
}
