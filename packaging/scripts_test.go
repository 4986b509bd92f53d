// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runScript runs a maintainer script with args in a private mount
// namespace whose /run is an empty tmpfs (with /run/systemd/system when
// systemd is set, as where systemd runs), and stubs of systemctl, getent,
// groupadd and groupdel first in PATH; it returns the stubs' calls, one a
// line. The script never reaches the host's systemd, groups or /run.
func runScript(t *testing.T, script string, systemd bool, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs the script in a mount namespace of its own")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1)")
	}
	dir := t.TempDir()
	stubs := filepath.Join(dir, "bin")
	if err := os.Mkdir(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	for _, name := range []string{"systemctl", "getent", "groupadd", "groupdel"} {
		stub := "#!/bin/sh\necho \"" + name + " $*\" >>\"$STUB_LOG\"\n"
		if name == "getent" { // the group exists
			stub += "exit 0\n"
		}
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	setup := "mount -t tmpfs tmpfs /run"
	if systemd {
		setup += " && mkdir -p /run/systemd/system"
	}
	abs, err := filepath.Abs(filepath.Join("scripts", script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
		setup + ` && exec sh "$0" "$@"`, abs}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "STUB_LOG="+log)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", script, args, err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestPostinstallRestartsOnUpgrade: an upgrade (deb configure with the old
// version, rpm $1 >= 2) restarts a running daemon, a fresh install does
// not start one, and without systemd nothing calls systemctl.
func TestPostinstallRestartsOnUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name     string
		systemd  bool
		args     []string
		reload   bool
		restarts bool
	}{
		{"deb install", true, []string{"configure", ""}, true, false},
		{"deb upgrade", true, []string{"configure", "0.9.0"}, true, true},
		{"rpm install", true, []string{"1"}, true, false},
		{"rpm upgrade", true, []string{"2"}, true, true},
		{"deb upgrade without systemd", false, []string{"configure", "0.9.0"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := runScript(t, "postinstall.sh", tc.systemd, tc.args...)
			if got := strings.Contains(calls, "systemctl daemon-reload"); got != tc.reload {
				t.Errorf("daemon-reload %v, want %v; calls:\n%s", got, tc.reload, calls)
			}
			if got := strings.Contains(calls, "systemctl try-restart sluice.service"); got != tc.restarts {
				t.Errorf("try-restart %v, want %v; calls:\n%s", got, tc.restarts, calls)
			}
			if strings.Contains(calls, "systemctl start") || strings.Contains(calls, "systemctl restart") {
				t.Errorf("a daemon that was not running was started; calls:\n%s", calls)
			}
		})
	}
}

// TestPostremoveReloadsSystemd: every removal tells systemd the unit is
// gone (a plain deb remove too); an upgrade's removal of the old package
// does nothing. Only the cases that remove nothing from the host's /etc.
func TestPostremoveReloadsSystemd(t *testing.T) {
	if calls := runScript(t, "postremove.sh", true, "remove"); !strings.Contains(calls, "systemctl daemon-reload") ||
		strings.Contains(calls, "groupdel") {
		t.Errorf("deb remove: want daemon-reload and the group kept; calls:\n%s", calls)
	}
	for _, arg := range []string{"upgrade", "1"} {
		if calls := runScript(t, "postremove.sh", true, arg); calls != "" {
			t.Errorf("postremove %s (an upgrade): want nothing done; calls:\n%s", arg, calls)
		}
	}
}
