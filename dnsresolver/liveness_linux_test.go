// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/netns"
	"github.com/sluice-dev/sluice/tests/needs"
)

// TestListenWhileLoopbackDown: a container's network namespace can still
// have lo down when the daemon attaches it (Docker brings it up from a
// hook while runc's init waits). Listening there must succeed (a connected
// probe socket used to fail with ENETUNREACH, the attach failed, and its
// cleanup killed the starting container); the probe fails while lo is
// down, which is the truth, and succeeds once it is up.
func TestListenWhileLoopbackDown(t *testing.T) {
	needs.Have(t, needs.Root, needs.Caps)
	nsc := make(chan *os.File, 1)
	go func() {
		runtime.LockOSThread() // the thread is thrown away with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			nsc <- nil
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			t.Errorf("open namespace: %v", err)
		}
		nsc <- f
	}()
	ns := <-nsc
	if ns == nil {
		t.FailNow()
	}
	defer ns.Close()

	r, err := New(Config{Policy: testPolicy(t), Upstreams: []string{"127.0.0.1:9"}, Learner: &fakeLearner{}, Clock: newFakeClock().Now, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := netns.Do(ns, r.ListenLoopback); err != nil {
		t.Fatalf("listen in a namespace whose lo is down: %v", err)
	}
	if err := r.Probe(300 * time.Millisecond); err == nil {
		t.Fatal("probe succeeded while lo is down")
	}
	h, err := netlink.NewHandleAt(vnetns.NsHandle(int(ns.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	if err := r.Probe(time.Second); err != nil {
		t.Fatalf("probe once lo is up: %v", err)
	}
}
