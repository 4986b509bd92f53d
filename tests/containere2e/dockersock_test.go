// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
)

// dockerSockScript is the agent of TestDockerPolicyAndSocketPath: it runs
// docker with the session's DOCKER_HOST, then by the usual socket names
// without it, tries to unmount those names (as itself and as root of a
// user namespace of its own), and asks for the engine's socket in a
// container.
const dockerSockScript = `set -u
cd "$WS"
export HOME="$WS" DOCKER_CONFIG="$WS/.docker"
r() { n=$1; shift; "$@" > "$n.out" 2>&1; echo "exit=$?" >> "$n.out"; }
r policy docker run --rm --network none "$IMG" echo hello-by-policy
r varrun env -u DOCKER_HOST docker -H unix:///var/run/docker.sock run --rm --privileged "$IMG" true
r run env -u DOCKER_HOST docker -H unix:///run/docker.sock run --rm --privileged "$IMG" true
r default env -u DOCKER_HOST docker run --rm --network none "$IMG" echo hello-by-path
r umount umount /var/run/docker.sock
r umountsys python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for flags in (0, 2):  # MNT_DETACH
    if libc.umount2(b"/var/run/docker.sock", flags) == 0:
        print("unmounted"); sys.exit(0)
    print(os.strerror(ctypes.get_errno()))
sys.exit(1)'
r umountns unshare -rm --propagation unchanged umount /run/docker.sock
r umountlazy unshare -rm --propagation unchanged umount -l /var/run/docker.sock
r after env -u DOCKER_HOST docker -H unix:///var/run/docker.sock run --rm --privileged "$IMG" true
r ctrsock docker run --rm -v /var/run/docker.sock:/var/run/docker.sock "$IMG" true
r ctrls docker run --rm --network none "$IMG" ls /var/run/docker.sock /run/docker.sock
touch done
`

// TestDockerPolicyAndSocketPath runs a session given Docker by
// "docker": true in its policy file (no --docker), with a stand-in for
// the host's engine listening at /run/docker.sock that counts who
// connects: from outside sluice (the unconfined twin) it answers; in the
// session, /var/run/docker.sock and /run/docker.sock, dialled by name
// without DOCKER_HOST, lead to sluice's broker (its refusal of
// --privileged, and a container that runs on the private engine), the
// names cannot be unmounted, and the stand-in records nothing. The
// session's containers get no Docker socket.
func TestDockerPolicyAndSocketPath(t *testing.T) {
	const hostSock = "/run/docker.sock"
	var standIn atomic.Int64
	if _, err := os.Lstat(hostSock); err == nil {
		t.Fatalf("%s exists on this machine (an engine of its own?): the test puts a stand-in there and will not touch it", hostSock)
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); os.Remove(hostSock) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			standIn.Add(1)
			c.Close()
		}
	}()
	// The unconfined twin: by the usual name, the stand-in answers.
	if c, err := net.Dial("unix", "/var/run/docker.sock"); err != nil {
		t.Fatalf("the twin could not reach the stand-in at /var/run/docker.sock: %v", err)
	} else {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for standIn.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := standIn.Load(); n != 1 {
		t.Fatalf("the stand-in recorded %d connections of the twin, want 1", n)
	}

	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	bin, instance := embeddedSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ws := sessionWorkspace(t, bin)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"allowed_hosts": [], "docker": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "run", "--user", "65534:65534", "--docker-host", e.Host, "--allowlist", policy,
		"--", "sh", "-c", dockerSockScript)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "SLUICE_INSTANCE="+instance, "WS="+ws, "IMG="+dockertest.BaseImage)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice run with \"docker\": true: %v\n%s", err, out.String())
	}
	t.Logf("sluice run:\n%s", out.String())
	if _, err := os.Stat(filepath.Join(ws, "done")); err != nil {
		t.Fatalf("the script did not finish:\n%s", out.String())
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(ws, name+".out"))
		return string(b)
	}
	if s := read("policy"); s != "hello-by-policy\nexit=0\n" {
		t.Errorf("docker run with the policy's DOCKER_HOST: %q", s)
	}
	if s := read("default"); s != "hello-by-path\nexit=0\n" {
		t.Errorf("docker run by the default socket name, no DOCKER_HOST: %q (want the broker, forwarding to the private engine)", s)
	}
	for _, name := range []string{"varrun", "run", "after"} {
		if s := read(name); !strings.Contains(s, "sluice: refused") || !strings.Contains(s, "--privileged") || strings.Contains(s, "exit=0") {
			t.Errorf("%s: %q, want the broker's refusal of --privileged", name, s)
		}
	}
	for _, name := range []string{"umount", "umountsys", "umountns", "umountlazy"} {
		s := read(name)
		if strings.Contains(s, "exit=0") || !strings.Contains(s, "exit=") {
			t.Errorf("%s: %q, want the unmount to fail", name, s)
		}
		t.Logf("%s: %q", name, s)
	}
	// The direct umount2(2), plain and lazy, is what the kernel says.
	if s := read("umountsys"); strings.Count(s, "Operation not permitted") != 2 {
		t.Errorf("umount2 of /var/run/docker.sock in the session: %q, want EPERM twice", s)
	}
	if s := read("ctrsock"); !strings.Contains(s, "sluice: refused") || strings.Contains(s, "exit=0") {
		t.Errorf("a container asking for /var/run/docker.sock: %q, want a refusal", s)
	}
	if s := read("ctrls"); strings.Contains(s, "exit=0") || !strings.Contains(s, "No such file") {
		t.Errorf("a session's container looking for a Docker socket: %q, want none", s)
	}
	if n := standIn.Load(); n != 1 {
		t.Errorf("the stand-in engine at %s recorded %d connections, want only the twin's", hostSock, n)
	}
}
