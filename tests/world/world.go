// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/needs"
)

// readyTimeout bounds the wait for the link and its addresses.
const readyTimeout = 5 * time.Second

// World is a client namespace and a world namespace joined by a veth pair,
// with a sniffer recording what reaches the world from the client. Create it
// with New; it is torn down by the test's cleanup.
type World struct {
	clientPath, worldPath string
	clientNS, worldNS     *os.File // held open for setns

	sniffer *sniffer

	mu       sync.Mutex
	contacts []Contact
}

// New creates two fresh named network namespaces joined by a veth pair,
// addresses and routes them (see the package documentation), starts the
// sniffer, and returns once the link is usable. Everything is removed by
// t.Cleanup, also when the test fails. New skips the test when the machine
// lacks what a world needs (root, the capabilities, IPv6, a writable
// /proc/sys, nsenter), naming each with its fix; under SLUICE_REQUIRE_KERNEL=1
// that is a failure (package needs).
func New(t testing.TB) *World {
	t.Helper()
	needs.Have(t, needs.World...)
	w := &World{}
	t.Cleanup(func() {
		if err := w.close(); err != nil {
			t.Errorf("world: cleanup: %v", err)
		}
	})
	if err := w.setup(); err != nil {
		t.Fatalf("world: %v", err)
	}
	return w
}

// ClientPath is the client namespace's file, for `nsenter --net=`.
func (w *World) ClientPath() string { return w.clientPath }

// WorldPath is the world namespace's file, for `nsenter --net=`.
func (w *World) WorldPath() string { return w.worldPath }

// ClientCmd returns a command that runs name with args in the client
// namespace through `nsenter --net=`. (Not `ip netns exec`, which remounts
// /sys and so hides the cgroup and bpffs mounts.) Credentials or a cgroup set
// in its SysProcAttr would apply to nsenter, not to name: for those, build
// the command with exec.Command and start it with StartInClient.
func (w *World) ClientCmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + w.clientPath, "--", name}, args...)...)
}

// WorldCmd is ClientCmd for the world namespace.
func (w *World) WorldCmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + w.worldPath, "--", name}, args...)...)
}

// StartInClient starts cmd from a thread inside the client namespace, so the
// process is born there and cmd.SysProcAttr (Credential, UseCgroupFD,
// Setsid...) applies to the program itself. Wait for it as usual.
func (w *World) StartInClient(cmd *exec.Cmd) error {
	return w.InClient(cmd.Start)
}

// InClient runs fn on a dedicated OS thread inside the client namespace and
// returns its error. The thread is discarded afterwards. Sockets fn creates
// stay in the namespace; goroutines fn starts do not run in it.
func (w *World) InClient(fn func() error) error {
	return inNetns(w.clientNS, fn)
}

// InWorld is InClient for the world namespace.
func (w *World) InWorld(fn func() error) error {
	return inNetns(w.worldNS, fn)
}

// setup builds the world; w.close undoes whatever part of it was built.
func (w *World) setup() error {
	suffix, err := randomSuffix()
	if err != nil {
		return err
	}
	if w.clientPath, err = createNamedNetns("sluice-c-" + suffix); err != nil {
		return err
	}
	if w.worldPath, err = createNamedNetns("sluice-w-" + suffix); err != nil {
		return err
	}
	if w.clientNS, err = os.Open(w.clientPath); err != nil {
		return fmt.Errorf("opening client namespace: %w", err)
	}
	if w.worldNS, err = os.Open(w.worldPath); err != nil {
		return fmt.Errorf("opening world namespace: %w", err)
	}

	// Sysctls first: the "default" ones apply to devices created afterwards.
	noDAD := []sysctl{
		{"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.default.dad_transmits", "0"},
		// Nothing to solicit: no routers, and it is only noise on the wire.
		{"net.ipv6.conf.default.router_solicitations", "0"},
		{"net.ipv6.conf.default.accept_ra", "0"},
	}
	if err := w.InClient(func() error {
		return writeSysctls(append(noDAD,
			// Unprivileged ICMP ping sockets, so that a ping from the agent
			// works unless sluice stops it.
			sysctl{"net.ipv4.ping_group_range", "0 2147483647"}))
	}); err != nil {
		return fmt.Errorf("client sysctls: %w", err)
	}
	if err := w.InWorld(func() error {
		return writeSysctls(append(noDAD,
			sysctl{"net.ipv6.conf.all.seg6_enabled", "0"},
			// Server and client TFO, so repeated TFO attempts carry data.
			sysctl{"net.ipv4.tcp_fastopen", "3"}))
	}); err != nil {
		return fmt.Errorf("world sysctls: %w", err)
	}

	client, err := w.handle(w.InClient)
	if err != nil {
		return fmt.Errorf("netlink in client: %w", err)
	}
	defer client.Close()
	world, err := w.handle(w.InWorld)
	if err != nil {
		return fmt.Errorf("netlink in world: %w", err)
	}
	defer world.Close()

	// Create the pair from the client with the peer born in the world, so
	// no device ever appears in the host's namespace.
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: ClientIface},
		PeerName:      WorldIface,
		PeerNamespace: netlink.NsFd(int(w.worldNS.Fd())),
	}
	if err := client.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s/%s: %w", ClientIface, WorldIface, err)
	}
	cLink, err := client.LinkByName(ClientIface)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	wLink, err := world.LinkByName(WorldIface)
	if err != nil {
		return fmt.Errorf("world: %w", err)
	}

	if err := configure(world, wLink, "lo", []netip.Prefix{
		netip.PrefixFrom(AllowedV4, 32), netip.PrefixFrom(DeniedV4, 32),
		netip.PrefixFrom(AllowedV6, 128), netip.PrefixFrom(DeniedV6, 128),
	}, []netip.Prefix{
		netip.PrefixFrom(WorldV4, LinkV4Prefix.Bits()), netip.PrefixFrom(WorldV6, LinkV6Prefix.Bits()),
	}); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	// The sniffer is bound once the world's end is up (binding to a down
	// interface only reports ENETDOWN) and before the client's end is, so
	// it misses nothing the client sends.
	if err := w.InWorld(func() (err error) {
		w.sniffer, err = startSniffer(wLink.Attrs().Index)
		return err
	}); err != nil {
		return fmt.Errorf("starting sniffer: %w", err)
	}
	if err := configure(client, cLink, "lo", nil, []netip.Prefix{
		netip.PrefixFrom(ClientV4, LinkV4Prefix.Bits()), netip.PrefixFrom(ClientV6, LinkV6Prefix.Bits()),
	}); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, gw := range []netip.Addr{WorldV4, WorldV6} {
		r := &netlink.Route{LinkIndex: cLink.Attrs().Index, Gw: net.IP(gw.AsSlice())}
		if err := client.RouteAdd(r); err != nil {
			return fmt.Errorf("client: default route via %v: %w", gw, err)
		}
	}

	if err := waitReady(client, cLink); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := waitReady(world, wLink); err != nil {
		return fmt.Errorf("world: %w", err)
	}
	return nil
}

// handle opens a netlink handle whose sockets live in a namespace (they
// keep operating there whichever thread uses them).
func (w *World) handle(in func(func() error) error) (*netlink.Handle, error) {
	var h *netlink.Handle
	err := in(func() (err error) {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	})
	return h, err
}

// configure brings lo and link up with the given addresses, all without
// duplicate address detection.
func configure(h *netlink.Handle, link netlink.Link, lo string, loAddrs, linkAddrs []netip.Prefix) error {
	loLink, err := h.LinkByName(lo)
	if err != nil {
		return err
	}
	for _, l := range []struct {
		link  netlink.Link
		addrs []netip.Prefix
	}{{loLink, loAddrs}, {link, linkAddrs}} {
		for _, p := range l.addrs {
			a := &netlink.Addr{
				IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
				Flags: unix.IFA_F_NODAD,
			}
			if err := h.AddrAdd(l.link, a); err != nil {
				return fmt.Errorf("adding %v to %s: %w", p, l.link.Attrs().Name, err)
			}
		}
		if err := h.LinkSetUp(l.link); err != nil {
			return fmt.Errorf("bringing %s up: %w", l.link.Attrs().Name, err)
		}
	}
	return nil
}

// waitReady waits, bounded, until link is operationally up and none of its
// addresses is tentative.
func waitReady(h *netlink.Handle, link netlink.Link) error {
	name := link.Attrs().Name
	var why string
	for end := time.Now().Add(readyTimeout); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if l.Attrs().OperState != netlink.OperUp {
			why = fmt.Sprintf("%s is %v", name, l.Attrs().OperState)
			continue
		}
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("listing addresses of %s: %w", name, err)
		}
		why = ""
		for _, a := range addrs {
			if a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) != 0 {
				why = fmt.Sprintf("%v on %s is tentative (flags %#x)", a.IPNet, name, a.Flags)
			}
		}
		if why == "" {
			return nil
		}
	}
	return fmt.Errorf("not ready after %v: %s", readyTimeout, why)
}

// close stops the sniffer and removes the namespaces; safe on a partly
// built World.
func (w *World) close() error {
	var errs []error
	if w.sniffer != nil {
		w.sniffer.stop()
	}
	for _, f := range []*os.File{w.clientNS, w.worldNS} {
		if f != nil {
			f.Close()
		}
	}
	for _, p := range []string{w.clientPath, w.worldPath} {
		if p != "" {
			if err := deleteNamedNetns(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sysctl is one setting, by its dotted name.
type sysctl struct{ name, value string }

// writeSysctls writes settings through /proc/sys, which resolves net.*
// against the calling thread's network namespace: call it inside one.
func writeSysctls(settings []sysctl) error {
	for _, s := range settings {
		path := filepath.Join("/proc/sys", strings.ReplaceAll(s.name, ".", "/"))
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("sysctl %s: %w", s.name, err)
		}
		_, err = f.WriteString(s.value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sysctl %s=%q: %w", s.name, s.value, err)
		}
	}
	return nil
}
