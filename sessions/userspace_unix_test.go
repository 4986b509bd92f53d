// SPDX-License-Identifier: Apache-2.0

//go:build unix

package sessions

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

// runUserspace runs argv in a proxy-mode session and returns
// its exit status, what it wrote, what started saw and Run's error.
func runUserspace(t *testing.T, noProxyEnv bool, argv ...string) (int, string, *UserspaceStarted, error) {
	t.Helper()
	policy, err := allowlist.FromStrings([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	u, err := StartUserspace(UserspaceConfig{Mode: ModeProxy, Policy: policy, Argv: argv, NoProxyEnv: noProxyEnv,
		Stdio: [3]*os.File{nil, out, out}})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if u.Mode() != ModeProxy {
		t.Errorf("mode %q, want proxy", u.Mode())
	}
	var started *UserspaceStarted
	code, err := u.Run([]string{"PATH=" + os.Getenv("PATH"), "KEPT=yes"}, func(s UserspaceStarted) { started = &s })
	b, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if started != nil && started.Name != "proxy-"+strconv.Itoa(os.Getpid()) {
		t.Errorf("session name %q, want proxy-%d", started.Name, os.Getpid())
	}
	return code, string(b), started, err
}

// The command gets the environment it is given plus the proxy variables
// pointing at the session's proxy, and its exit status is the session's.
func TestUserspaceRunExitAndEnv(t *testing.T) {
	code, out, started, err := runUserspace(t, false, "sh", "-c", `echo "$KEPT $HTTPS_PROXY"; exit 3`)
	if err != nil || code != 3 {
		t.Fatalf("exit %d, %v; want 3", code, err)
	}
	if started == nil || started.PID <= 0 || filepath.Base(started.Path) != "sh" || len(started.Policy) != 1 || started.UID != uint32(os.Getuid()) {
		t.Fatalf("started: %+v", started)
	}
	if !strings.HasPrefix(out, "yes http://127.0.0.1:") {
		t.Errorf("the command saw %q, want its own variable and the proxy's address", out)
	}

	_, out, _, _ = runUserspace(t, true, "sh", "-c", `echo "$KEPT [$HTTPS_PROXY]"`)
	if out != "yes []\n" {
		t.Errorf("with NoProxyEnv the command saw %q, want no proxy variables", out)
	}
}

// A command a signal ends exits 128+signal, as in a shell.
func TestUserspaceRunSignalled(t *testing.T) {
	if code, _, _, err := runUserspace(t, false, "sh", "-c", "kill -TERM $$"); err != nil || code != 128+15 {
		t.Fatalf("exit %d, %v; want 143", code, err)
	}
}

// A command that cannot start is an error before started is called.
func TestUserspaceRunCannotStart(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, started, err := runUserspace(t, false, prog)
	if err == nil || started != nil || code != 0 {
		t.Fatalf("exit %d, %v, started %+v; want an error and no start", code, err, started)
	}
}
