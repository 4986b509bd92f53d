// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestAttachFailureLeavesTheCgroupAlone: a container cgroup is its
// engine's. When attaching it fails (here: a DNS configuration the resolver
// refuses), sluice undoes what it added and nothing else: the container's
// process lives on and its cgroup stays. (A failed attach used to close the
// session the way a session sluice made is closed, killing the container
// while runc was still starting it.)
func TestAttachFailureLeavesTheCgroupAlone(t *testing.T) {
	e := testEnforcer(t, "sluice-attach")
	ctr := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	dir := filepath.Join(e.Root().Path(), ctr)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sleep.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-exited })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}

	_, err := e.AttachSession(ctr, Options{DNS: &DNSOptions{Path: DNSPathResolver, Upstreams: []string{"127.0.0.1:9"}, MinTTL: time.Hour, MaxTTL: time.Second}})
	if err == nil {
		t.Fatal("attach with a refused DNS configuration succeeded")
	}
	select {
	case <-exited:
		t.Fatalf("the container's process died when its attach failed: %v", sleep.ProcessState)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the container's cgroup after the failed attach: %v", err)
	}
	// The attach can be tried again, and succeed.
	s, err := e.AttachSession(ctr, Options{})
	if err != nil {
		t.Fatalf("second attach: %v", err)
	}
	s.release = true // the test's process is killed by its cleanup
	_ = s.Close()
}
