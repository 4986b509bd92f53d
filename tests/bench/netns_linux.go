// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// cycleAddr is where the cycle benchmark's listener lives: a documentation
// address (TEST-NET-3) on the loopback interface of the worker's own
// network namespace, which has no other interface. To sluice it is a
// remote address like any other, judged through the CIDR map; to the
// kernel it is local, so every packet stays in the namespace.
var cycleAddr = netip.MustParseAddr("203.0.113.77")

// prepareCycleNetns brings up loopback in the network namespace of process
// pid (the worker, started in a fresh one) and puts cycleAddr on it. The
// worker waits for the address before it binds.
func prepareCycleNetns(pid int) error {
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the worker's network namespace: %w", err)
	}
	defer unix.Close(ns)
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends in the worker's namespace, and
		// a goroutine that exits while locked takes its thread with it.
		runtime.LockOSThread()
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("join the worker's network namespace: %w", err)
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err == nil {
			err = netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: cycleAddr.AsSlice(), Mask: net.CIDRMask(32, 32)}})
		}
		if err != nil {
			err = fmt.Errorf("put %s on lo of the worker's namespace: %w", cycleAddr, err)
		}
		errc <- err
	}()
	return <-errc
}
