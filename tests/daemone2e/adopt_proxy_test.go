// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestAdoptedSessionKeepsItsProxy: after kill -9 of the daemon, the next
// daemon serves an adopted session's allowlist proxy again on the port the
// command's HTTPS_PROXY names, with the session's policy: an allowed host
// through it works, a name off the allowlist gets 403 and is never looked
// up, and the port is the session's own again: another session may not
// use it.
func TestAdoptedSessionKeepsItsProxy(t *testing.T) {
	f := newFixture(t, "allowed.test")
	probe, d := world.BuildProbe(t), f.dir
	script := fmt.Sprintf(`
echo "$HTTPS_PROXY" > %[3]s/env.tmp; mv %[3]s/env.tmp %[3]s/env
%[1]s proxy-connect allowed.test %[2]d > %[3]s/1.tmp; mv %[3]s/1.tmp %[3]s/1
while [ ! -e %[3]s/go ]; do sleep 0.05; done
%[1]s proxy-connect allowed.test %[2]d > %[3]s/2.tmp; mv %[3]s/2.tmp %[3]s/2
%[1]s proxy-connect allowed2.test %[2]d > %[3]s/3.tmp; mv %[3]s/3.tmp %[3]s/3
while [ ! -e %[3]s/end ]; do sleep 0.05; done
`, probe, f.port, d)
	// A failure before the end still lets the script end.
	t.Cleanup(func() {
		_ = os.WriteFile(d+"/go", nil, 0o644)
		_ = os.WriteFile(d+"/end", nil, 0o644)
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/1")); !r.OK || r.Reply != world.Greeting {
		t.Fatalf("through the proxy before the crash: %s", r)
	}
	f.stopDaemon(t) // kill -9
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	if err := os.WriteFile(d+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/2")); !r.OK || r.Reply != world.Greeting {
		t.Fatalf("allowed host through the adopted session's proxy: %s", r)
	}
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/3")); r.OK || !strings.Contains(r.Error, "403") {
		t.Fatalf("a name off the allowlist through the adopted session's proxy: %s", r)
	}
	if f.dns.Saw("allowed2.test") {
		t.Error("the adopted session's proxy forwarded a name off the allowlist")
	}
	other := fmt.Sprintf("HTTPS_PROXY=%s exec %s proxy-connect allowed.test %d", strings.TrimSpace(string(waitFile(t, d+"/env"))), probe, f.port)
	out, stderr, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", other)
	if r, _ := world.ParseProbeResult([]byte(out)); r.OK || r.Errno != "EPERM" || !strings.Contains(stderr, "another session's sluice proxy") {
		t.Fatalf("another session used the adopted session's proxy: %s\n%s", out, stderr)
	}
	// Only now may the session end: while it lives its proxy's port is
	// another session's; after its end nobody listens there.
	if err := os.WriteFile(d+"/end", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.waitAudit(t, "proxy_refused", func(e map[string]any) bool { return e["host"] == "allowed2.test" })
	f.waitAudit(t, "session_ended", nil)
	<-done
}

// TestAdoptedSessionProxyPortTaken: when another program took the proxy's
// port while no daemon ran, the session is still adopted (and confined),
// and the audit log and the daemon's log say that its proxy is gone.
func TestAdoptedSessionProxyPortTaken(t *testing.T) {
	f := newFixture(t, "allowed.test")
	d := f.dir
	script := fmt.Sprintf(`
echo "$HTTPS_PROXY" > %[1]s/env.tmp; mv %[1]s/env.tmp %[1]s/env
while [ ! -e %[1]s/go ]; do sleep 0.05; done
`, d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	u, err := url.Parse(strings.TrimSpace(string(waitFile(t, d+"/env"))))
	if err != nil || u.Port() == "" {
		t.Fatalf("HTTPS_PROXY of the session: %q: %v", u, err)
	}
	f.stopDaemon(t) // kill -9
	var squatter net.Listener
	if err := f.w.InClient(func() (err error) {
		squatter, err = net.Listen("tcp", "127.0.0.1:"+u.Port())
		return err
	}); err != nil {
		t.Fatalf("take the proxy's port: %v", err)
	}
	defer squatter.Close()
	f.startDaemon(t)
	e := f.waitAudit(t, "session_adopted", nil)
	msg, _ := e["message"].(string)
	if !strings.Contains(msg, "proxy could not be restarted") || !strings.Contains(msg, "port "+u.Port()) {
		t.Fatalf("session_adopted does not say the proxy is gone: %v", e)
	}
	if !strings.Contains(f.log.String(), "proxy could not be restarted") {
		t.Errorf("the daemon's log does not say the proxy is gone:\n%s", f.log.String())
	}
	if err := os.WriteFile(d+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.waitAudit(t, "session_ended", nil)
	<-done
}
