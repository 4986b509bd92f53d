// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDaemonDescriptorsStayOutOfSessions: a descriptor the daemon
// inherited (from a shell or a supervisor) does not reach the commands of
// its sessions: Go's exec leaves descriptors it did not open to the child,
// and a socket handed to a confined agent would be one the datapath never
// judges.
func TestDaemonDescriptorsStayOutOfSessions(t *testing.T) {
	f := newFixture(t, "allowed.test")
	secret := filepath.Join(f.dir, "daemon-only")
	fh, err := os.Create(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	f.stopDaemon(t)
	f.inherit = []*os.File{fh}
	f.startDaemon(t)
	// Positive twin: the daemon did inherit it.
	if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", f.daemon.Process.Pid)); err != nil || l != secret {
		t.Fatalf("the daemon's fd 3 is %q (%v), want %s: the test did not hand it the descriptor", l, err, secret)
	}
	out, _, code := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", "ls -l /proc/$$/fd")
	if code != 0 || !strings.Contains(out, "0 -> ") {
		t.Fatalf("list the session command's descriptors (exit %d): %s", code, out)
	}
	if strings.Contains(out, secret) {
		t.Fatalf("a descriptor the daemon inherited reached the session's command:\n%s", out)
	}
}
