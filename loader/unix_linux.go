// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/sluice-dev/sluice/allowlist"
)

// ErrUnixUnsupported says the kernel has no cgroup hooks for unix sockets.
var ErrUnixUnsupported = errors.New("unix sockets are not judged on this kernel (cgroup connect_unix/sendmsg_unix need Linux 6.7)")

// prepareUnix checks that the kernel has the cgroup connect_unix and
// sendmsg_unix hooks and, where it has not, replaces sluice's programs for
// them in spec by stand-ins that load anywhere and are never attached, so
// that the rest of the datapath still loads. It returns why unix sockets
// are not judged, or nil.
func prepareUnix(spec *ebpf.CollectionSpec) error {
	err := unixSupported()
	if err == nil {
		return nil
	}
	for _, name := range []string{sluiceProgSluiceConnectUnix, sluiceProgSluiceSendmsgUnix} {
		spec.Programs[name] = &ebpf.ProgramSpec{
			Name: name, Type: ebpf.CGroupSockAddr, AttachType: ebpf.AttachCGroupInet4Connect, License: "Dual BSD/GPL",
			Instructions: asm.Instructions{asm.LoadImm(asm.R0, 1, asm.DWord), asm.Return()},
		}
	}
	return err
}

var unixProbe struct {
	once sync.Once
	err  error
}

// unixSupported loads a two-instruction connect_unix program once per
// process: the kernel refuses the attach type where the hook is missing.
func unixSupported() error {
	if os.Getenv("SLUICE_TEST_NO_UNIX_HOOKS") == "1" {
		return fmt.Errorf("%w: disabled by SLUICE_TEST_NO_UNIX_HOOKS", ErrUnixUnsupported)
	}
	unixProbe.once.Do(func() {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.CGroupSockAddr, AttachType: ebpf.AttachCgroupUnixConnect, License: "Dual BSD/GPL",
			Instructions: asm.Instructions{asm.LoadImm(asm.R0, 1, asm.DWord), asm.Return()},
		})
		if err != nil {
			unixProbe.err = fmt.Errorf("%w: %w", ErrUnixUnsupported, err)
			return
		}
		p.Close()
	})
	return unixProbe.err
}

// UnixJudging reports whether this datapath judges the unix sockets of its
// sessions, and if not, why.
func (d *Datapath) UnixJudging() error { return d.unixErr }

// ProbeUnix says whether the kernel can judge unix sockets, for `sluice
// check`.
func ProbeUnix() error { return unixSupported() }

// unixKey builds the datapath's key of a unix socket name as the allowlist
// writes it: "/path" or "@abstract".
func unixKey(cgid uint64, name string) (sluiceUnixKey, error) {
	k := sluiceUnixKey{Session: cgid}
	b := []byte(name)
	if len(b) > 0 && b[0] == '@' {
		k.Abstract = 1
		b = b[1:]
	}
	if len(b) == 0 || len(b) > allowlist.MaxUnixPath-int(k.Abstract) {
		return k, fmt.Errorf("unix socket %q: empty or longer than sun_path", name)
	}
	if k.Abstract == 0 {
		for i, c := range b {
			if c == 0 {
				b = b[:i]
				break
			}
		}
	}
	k.Len = uint32(len(b))
	for i, c := range b {
		k.Path[i] = int8(c)
	}
	return k, nil
}

// AllowUnix lets the session reach the unix sockets bound to names
// ("/path", or "@name" for an abstract socket). Names are exact: globs are
// expanded by the caller.
func (d *Datapath) AllowUnix(cgid uint64, names []string) error {
	return d.setUnix(cgid, names, uint8(sluiceSluiceUnixVerdictUNIX_ALLOWED))
}

// QuietUnix makes the session's connects and sends to names fail without
// an event: for name-service sockets that glibc tries on every lookup and
// does without. RevokeUnix removes them.
func (d *Datapath) QuietUnix(cgid uint64, names []string) error {
	return d.setUnix(cgid, names, uint8(sluiceSluiceUnixVerdictUNIX_QUIET))
}

func (d *Datapath) setUnix(cgid uint64, names []string, v uint8) error {
	for _, n := range names {
		k, err := unixKey(cgid, n)
		if err != nil {
			return err
		}
		if err := d.objs.UnixAllowed.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("add unix socket %s for session %d: %w", n, cgid, err)
		}
	}
	return nil
}

// RevokeUnix removes names given to AllowUnix; absent ones are ignored.
func (d *Datapath) RevokeUnix(cgid uint64, names []string) error {
	var errs []error
	for _, n := range names {
		k, err := unixKey(cgid, n)
		if err != nil {
			continue
		}
		if err := d.objs.UnixAllowed.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("revoke unix socket %s of session %d: %w", n, cgid, err))
		}
	}
	return errors.Join(errs...)
}

// UnixAllowed lists the unix socket names the session may reach, as
// "/path" or "@name" (for tests and status).
func (d *Datapath) UnixAllowed(cgid uint64) ([]string, error) {
	var out []string
	var k sluiceUnixKey
	var v uint8
	it := d.objs.UnixAllowed.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid {
			out = append(out, unixName(k.Abstract != 0, k.Path[:min(int(k.Len), len(k.Path))]))
		}
	}
	return out, it.Err()
}

// removeUnix deletes every unix entry of the session.
func (d *Datapath) removeUnix(cgid uint64) error {
	var keys []sluiceUnixKey
	var k sluiceUnixKey
	var v uint8
	it := d.objs.UnixAllowed.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid {
			keys = append(keys, k)
		}
	}
	errs := []error{it.Err()}
	for i := range keys {
		if err := d.objs.UnixAllowed.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete unix socket entry of session %d: %w", cgid, err))
		}
	}
	return errors.Join(errs...)
}

// FlagLoopbackSession limits the session's loopback destinations to its own
// listeners, the ports given to SetLoopbackPorts and its sluice listeners.
const FlagLoopbackSession = SessionFlags(sluiceSluiceSessionFlagSESSION_LOOPBACK_SESSION)

// MarkLoopbackStrict tells the datapath that a session in loopback
// "session" mode exists, before that session's flags are set. Until the
// first one, sessions in the default mode pay one array lookup per
// loopback connect and nothing else; the mark stays until `sluice
// cleanup` (clearing it when the last such session ends would race with
// other processes registering new ones).
func (d *Datapath) MarkLoopbackStrict() error {
	if err := d.objs.LoopbackStrict.Update(uint32(0), uint32(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("enable loopback session mode: %w", err)
	}
	return nil
}

// SetLoopbackPorts sets the loopback ports the session may reach in
// loopback "session" mode besides the ports its own processes bind.
func (d *Datapath) SetLoopbackPorts(cgid uint64, ports []uint16) error {
	v := uint8(sluiceSluicePortKindPORT_LISTED)
	for _, p := range ports {
		k := sluicePortKey{Session: cgid, Port: uint32(p)}
		if err := d.objs.LoopbackPorts.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("allow loopback port %d for session %d: %w", p, cgid, err)
		}
	}
	return nil
}

// LoopbackPorts lists the session's loopback ports: listed (loopback_ports)
// and bound by its processes.
func (d *Datapath) LoopbackPorts(cgid uint64) (listed, bound []uint16, err error) {
	var k sluicePortKey
	var v uint8
	it := d.objs.LoopbackPorts.Iterate()
	for it.Next(&k, &v) {
		if k.Session != cgid {
			continue
		}
		if v == uint8(sluiceSluicePortKindPORT_BOUND) {
			bound = append(bound, uint16(k.Port))
		} else {
			listed = append(listed, uint16(k.Port))
		}
	}
	return listed, bound, it.Err()
}

// removeLoopbackPorts deletes every loopback port entry of the session.
func (d *Datapath) removeLoopbackPorts(cgid uint64) error {
	var keys []sluicePortKey
	var k sluicePortKey
	var v uint8
	it := d.objs.LoopbackPorts.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid {
			keys = append(keys, k)
		}
	}
	errs := []error{it.Err()}
	for i := range keys {
		if err := d.objs.LoopbackPorts.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete loopback port of session %d: %w", cgid, err))
		}
	}
	return errors.Join(errs...)
}

// MaxUnixGlobs is how many glob entries one session can have: the
// datapath tries them one after another when a name is not listed exactly.
const MaxUnixGlobs = 16

// SetUnixGlobs replaces the session's glob entries ('*' within one path
// component; see allowlist.MatchUnixSocket, which the datapath's matcher
// follows).
func (d *Datapath) SetUnixGlobs(cgid uint64, globs []string) error {
	return d.SetUnixMatches(cgid, globs, nil)
}

// SetUnixMatches replaces the session's glob entries and its directory
// prefixes: a prefix ("/dir/", absolute, clean, ending in '/') allows
// every name below it at any depth that has no "", "." or ".." component
// (the datapath refuses those before trying any entry). It is for the
// session's own socket directory, which only the session can populate
// (sandbox.Spec.OwnDir); globs and prefixes share the MaxUnixGlobs slots.
func (d *Datapath) SetUnixMatches(cgid uint64, globs, prefixes []string) error {
	if len(globs)+len(prefixes) > MaxUnixGlobs {
		return fmt.Errorf("session %d: %d unix socket globs; the datapath holds at most %d (list exact paths instead)", cgid, len(globs)+len(prefixes), MaxUnixGlobs)
	}
	type entry struct {
		pat   string
		flags uint32
	}
	var entries []entry
	for _, p := range prefixes {
		if !cleanPrefix(p) || len(p) > allowlist.MaxUnixPath-1 {
			return fmt.Errorf("unix socket prefix %q: not a clean absolute directory path ending in '/' of at most %d bytes", p, allowlist.MaxUnixPath-1)
		}
		entries = append(entries, entry{p, globPrefix})
	}
	for _, g := range globs {
		entries = append(entries, entry{g, 0})
	}
	for i, e := range entries {
		g := e.pat
		if len(g) == 0 || len(g) > allowlist.MaxUnixPath || g[0] != '/' {
			return fmt.Errorf("unix socket glob %q: not an absolute path of at most %d bytes", g, allowlist.MaxUnixPath)
		}
		v := sluiceUnixGlob{Len: uint32(len(g)), Flags: e.flags}
		for j := range len(g) {
			v.Pat[j] = int8(g[j])
		}
		k := sluiceUnixGlobKey{Session: cgid, Index: uint32(i)}
		if err := d.objs.UnixGlobs.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set unix socket glob %q of session %d: %w", g, cgid, err)
		}
	}
	return d.deleteUnixGlobs(cgid, len(entries))
}

// globPrefix is bpf/unix.c's GLOB_PREFIX.
const globPrefix = 1

// cleanPrefix reports whether p is an absolute directory path
// ending in '/' with no "", "." or ".." component: what a prefix entry
// must be for the datapath's clean-name check to keep names below it.
func cleanPrefix(p string) bool {
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] != '/' {
		return false
	}
	for _, c := range strings.Split(p[1:len(p)-1], "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// deleteUnixGlobs removes the session's globs from index from on: the
// datapath stops at the first missing index.
func (d *Datapath) deleteUnixGlobs(cgid uint64, from int) error {
	var errs []error
	for i := from; i < MaxUnixGlobs; i++ {
		k := sluiceUnixGlobKey{Session: cgid, Index: uint32(i)}
		if err := d.objs.UnixGlobs.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete unix socket glob %d of session %d: %w", i, cgid, err))
		}
	}
	return errors.Join(errs...)
}

// FlagOwnAbstract tells the datapath that the session's Landlock domain
// has the abstract unix socket scope (Linux 6.12), which lets it reach only
// the abstract sockets made inside the domain: the datapath then allows
// abstract names it does not list and leaves them to that scope.
const FlagOwnAbstract = SessionFlags(sluiceSluiceSessionFlagSESSION_OWN_ABSTRACT)

// SessionFlagsOf is the flags the datapath holds for the session (for a
// session adopted from another process).
func (d *Datapath) SessionFlagsOf(cgid uint64) (SessionFlags, error) {
	var v sluiceSession
	if err := d.objs.Sessions.Lookup(cgid, &v); err != nil {
		return 0, fmt.Errorf("session %d: %w", cgid, err)
	}
	return SessionFlags(v.Flags), nil
}
