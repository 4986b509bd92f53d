// SPDX-License-Identifier: Apache-2.0

package netns

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/needs"
)

// netnsIno is the inode of the calling thread's network namespace.
func netnsIno(t *testing.T) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestDoRunsInTheNamespace creates a namespace and checks that fn runs in
// it, that the caller's thread stays where it was, and that a nil
// namespace runs fn in the caller's.
func TestDoRunsInTheNamespace(t *testing.T) {
	needs.Have(t, needs.Root, needs.Caps)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	outside := netnsIno(t)

	// A new namespace, held open by a descriptor, on a thread that is
	// thrown away.
	nsc := make(chan *os.File, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			nsc <- nil
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			t.Errorf("open: %v", err)
		}
		nsc <- f
	}()
	ns := <-nsc
	if ns == nil {
		t.FailNow()
	}
	defer ns.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
		t.Fatal(err)
	}

	var inside uint64
	if err := Do(ns, func() error { inside = netnsIno(t); return nil }); err != nil {
		t.Fatal(err)
	}
	if inside != st.Ino || inside == outside {
		t.Errorf("fn ran in namespace %d, want %d (the caller's is %d)", inside, st.Ino, outside)
	}
	if got := netnsIno(t); got != outside {
		t.Errorf("the caller's thread moved to namespace %d", got)
	}
	if err := Do(nil, func() error { inside = netnsIno(t); return nil }); err != nil || inside != outside {
		t.Errorf("Do(nil): namespace %d, %v; want the caller's %d", inside, err, outside)
	}
	if err := DoPath("/nonexistent/ns", func() error { t.Error("fn ran"); return nil }); err == nil {
		t.Error("DoPath of a missing file: no error")
	}
}
