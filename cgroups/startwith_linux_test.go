// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStartWithPrepareReachesOnlyTheChild: what prepare sets up on the
// spawning thread (here a mount namespace with a tmpfs over a directory)
// is what the child is born in, and this process never sees it.
func TestStartWithPrepareReachesOnlyTheChild(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "prepare")
	// Not t.TempDir: its parent is private to root, and the child runs as
	// nobody.
	dir, err := os.MkdirTemp("", "cgroups-prepare-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	if err := os.WriteFile(dir+"/under", []byte("under"), 0o644); err != nil {
		t.Fatal(err)
	}
	var prepTid int
	prepare := func() error {
		prepTid = unix.Gettid()
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			return err
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return err
		}
		return unix.Mount("cgroups-test", dir, "tmpfs", 0, "mode=0755")
	}
	cmd := exec.Command("/bin/ls", "-A", dir)
	var out strings.Builder
	cmd.Stdout = &out
	if err := s.StartWith(cmd, SpawnOptions{UID: nobody, GID: nobody}, prepare); err != nil {
		t.Fatal(err)
	}
	if err := waitCmd(t, cmd, 5*time.Second); err != nil {
		t.Fatalf("ls in the child: %v", err)
	}
	if strings.TrimSpace(out.String()) != "" {
		t.Errorf("the child sees %q in %s, want the empty tmpfs prepare mounted", out.String(), dir)
	}
	if b, err := os.ReadFile(dir + "/under"); err != nil || string(b) != "under" {
		t.Errorf("this process sees the child's mount: %q %v", b, err)
	}
	if prepTid == unix.Getpid() || prepTid == 0 {
		t.Errorf("prepare ran on thread %d: not a throwaway thread", prepTid)
	}
	// The runtime ends a thread locked to a goroutine that exits, just
	// after the goroutine delivered its result.
	eventually(t, 5*time.Second, "the thread prepare ran on to end", func() bool {
		_, err := os.Stat("/proc/self/task/" + strconv.Itoa(prepTid))
		return errors.Is(err, os.ErrNotExist)
	})
}

// TestStartWithPrepareErrorStartsNothing: a failing prepare means no
// process, and its error is returned.
func TestStartWithPrepareErrorStartsNothing(t *testing.T) {
	r := newTestRoot(t)
	s := newTestSession(t, r, "prepare-fails")
	boom := errors.New("boom")
	cmd := exec.Command("/bin/true")
	if err := s.StartWith(cmd, SpawnOptions{UID: nobody, GID: nobody}, func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("StartWith = %v, want the prepare error", err)
	}
	if cmd.Process != nil {
		t.Fatal("a process started although prepare failed")
	}
	if pop, err := s.Populated(); err != nil || pop {
		t.Errorf("the session is populated (%v, %v)", pop, err)
	}
}
