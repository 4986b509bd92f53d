// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// RouteToClient makes the client namespace a router for p, a prefix of
// addresses behind it (the pods of a node whose containerd runs there):
// it turns on forwarding in the client namespace only and routes p in the
// world via the client's end of the veth. Replies from the world's
// servers then go back to those addresses themselves, with no NAT, so the
// servers record the real sources. p must be Safe throughout; the routes
// and the setting go with the namespaces at cleanup.
func (w *World) RouteToClient(p netip.Prefix) error {
	if !SafePrefix(p) {
		return fmt.Errorf("world: %v is not a test prefix", p)
	}
	p = p.Masked()
	gw, setting := ClientV4, sysctl{"net.ipv4.ip_forward", "1"}
	if p.Addr().Is6() {
		gw, setting = ClientV6, sysctl{"net.ipv6.conf.all.forwarding", "1"}
	}
	// /proc/sys/net resolves against the writing thread's namespace: this
	// never touches the host's forwarding.
	if err := w.InClient(func() error { return writeSysctls([]sysctl{setting}) }); err != nil {
		return fmt.Errorf("world: forwarding in the client: %w", err)
	}
	h, err := w.handle(w.InWorld)
	if err != nil {
		return fmt.Errorf("world: netlink in world: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(WorldIface)
	if err != nil {
		return fmt.Errorf("world: %w", err)
	}
	r := &netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		Gw:        net.IP(gw.AsSlice()),
	}
	// Replace: a second call for the same prefix is not an error.
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("world: route %v via %v: %w", p, gw, err)
	}
	return nil
}
