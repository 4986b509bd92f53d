// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// SessionFlags are the per-session switches of the datapath.
type SessionFlags uint32

// FlagAudit allows everything and reports what would have been denied.
const FlagAudit = SessionFlags(sluiceSluiceSessionFlagSESSION_AUDIT)

// Counters are a session's decision counts, summed over CPUs.
type Counters struct {
	Allowed    uint64 // non-loopback egress allowed (loopback is not counted: it costs no lookup)
	Denied     uint64
	Audited    uint64 // would have been denied, allowed by audit mode
	EventsLost uint64 // denials whose event did not fit in the ring buffer
	// Quiet are refusals of the name-service sockets glibc tries on every
	// lookup (enforcer.QuietUnixSockets), not in Denied: expected, and
	// the caller falls back to files and DNS.
	Quiet uint64
	// NameChecked and NameRefused count the first flights the kernel's
	// TLS check judged (bpf/sni.h), and those it refused (in audit mode:
	// would have); apart from Denied, as the session verifier's are.
	NameChecked, NameRefused uint64
}

// SessionConfig is a session's entry in the datapath.
type SessionConfig struct {
	Flags SessionFlags
	// DNSPort4 and DNSPort6 are the ports of the session's resolver on
	// 127.0.0.1 and ::1. When DNSPort4 is set, the datapath redirects the
	// session's port-53 traffic there (IPv6 to ::ffff:127.0.0.1 when
	// DNSPort6 is 0); otherwise port 53 is judged like any other port.
	DNSPort4, DNSPort6 uint16
}

func (c SessionConfig) value() sluiceSession {
	return sluiceSession{Flags: uint32(c.Flags), DnsPort4: htons(c.DNSPort4), DnsPort6: htons(c.DNSPort6)}
}

// htons stores a port the way the datapath compares it with user_port.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// AddSession registers a session's cgroup: its counters, its event ring
// buffer and its configuration. The returned reader delivers the session's
// events. Until AddSession, tasks of that cgroup are confined to loopback.
func (d *Datapath) AddSession(cgid uint64, cfg SessionConfig) (*ringbuf.Reader, error) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	if err := d.objs.SessionCounters.Update(cgid, make([]sluiceCounters, ncpu), ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("add counters of session %d: %w", cgid, err)
	}
	rb, err := ebpf.NewMap(d.innerSpec)
	if err != nil {
		return nil, fmt.Errorf("create event ring buffer of session %d: %w", cgid, err)
	}
	defer rb.Close()
	if err := d.objs.SessionEvents.Update(cgid, rb, ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("register event ring buffer of session %d: %w", cgid, err)
	}
	r, err := ringbuf.NewReader(rb)
	if err != nil {
		return nil, fmt.Errorf("read events of session %d: %w", cgid, err)
	}
	if err := d.SetSession(cgid, cfg); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// AddSessionShared registers a session whose events go to the global ring
// buffer (GlobalEvents) instead of a ring buffer of its own: for a daemon,
// which reads every session's events anyway. Registering a private ring
// buffer is an update of a map of maps, which waits for an RCU grace period.
func (d *Datapath) AddSessionShared(cgid uint64, cfg SessionConfig) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("count CPUs: %w", err)
	}
	if err := d.objs.SessionCounters.Update(cgid, make([]sluiceCounters, ncpu), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("add counters of session %d: %w", cgid, err)
	}
	return d.SetSession(cgid, cfg)
}

// SetSession changes a session's configuration atomically.
func (d *Datapath) SetSession(cgid uint64, cfg SessionConfig) error {
	v := cfg.value()
	if err := d.objs.Sessions.Update(cgid, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("set policy of session %d: %w", cgid, err)
	}
	return nil
}

// Sessions lists the cgroup ids that have a policy in the datapath.
func (d *Datapath) Sessions() ([]uint64, error) {
	var ids []uint64
	var k uint64
	var v sluiceSession
	it := d.objs.Sessions.Iterate()
	for it.Next(&k, &v) {
		ids = append(ids, k)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return ids, nil
}

func cidrKey(cgid uint64, p netip.Prefix) sluiceCidrKey {
	p = p.Masked()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	return sluiceCidrKey{
		Prefixlen: uint32(64 + bits),
		SessionLo: uint32(cgid),
		SessionHi: uint32(cgid >> 32),
		Addr:      p.Addr().As16(),
	}
}

// AddCIDRs lets the session reach every address in prefixes.
func (d *Datapath) AddCIDRs(cgid uint64, prefixes []netip.Prefix) error {
	one := uint8(1)
	for _, p := range prefixes {
		if !p.IsValid() {
			return fmt.Errorf("add CIDR to session %d: invalid prefix %v", cgid, p)
		}
		k := cidrKey(cgid, p)
		if err := d.objs.Cidrs.Update(&k, &one, ebpf.UpdateAny); err != nil {
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.E2BIG) {
				return fmt.Errorf("add %s to session %d: the CIDR map is full (%d entries): %w", p, cgid, d.objs.Cidrs.MaxEntries(), err)
			}
			return fmt.Errorf("add %s to session %d: %w", p, cgid, err)
		}
	}
	return nil
}

// DeleteCIDRs removes prefixes from the session's policy; absent ones are
// ignored.
func (d *Datapath) DeleteCIDRs(cgid uint64, prefixes []netip.Prefix) error {
	var errs []error
	for _, p := range prefixes {
		k := cidrKey(cgid, p)
		if err := d.objs.Cidrs.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete %s of session %d: %w", p, cgid, err))
		}
	}
	return errors.Join(errs...)
}

// Learn lets the session reach addr until expires (CLOCK_BOOTTIME, see
// BootTime). The DNS resolver calls it before it answers.
func (d *Datapath) Learn(cgid uint64, addr netip.Addr, expires time.Duration) error {
	// As16 maps IPv4 to ::ffff:a.b.c.d, the datapath's key space.
	k := sluiceLearnedKey{Session: cgid, Addr: addr.Unmap().As16()}
	v := sluiceLearnedValue{Expires: uint64(expires)}
	if err := d.objs.Learned.Update(&k, &v, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
			return fmt.Errorf("learn %s for session %d: %w: %w", addr, cgid, ErrMapFull, err)
		}
		return fmt.Errorf("learn %s for session %d: %w", addr, cgid, err)
	}
	return nil
}

// Forget removes a learned IP of the session (garbage collection of
// expired answers; the kernel already refuses them after their expiry).
func (d *Datapath) Forget(cgid uint64, addr netip.Addr) error {
	k := sluiceLearnedKey{Session: cgid, Addr: addr.Unmap().As16()}
	if err := d.objs.Learned.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("forget %s for session %d: %w", addr, cgid, err)
	}
	// After the address: a live entry without its rule would allow every port.
	if err := d.objs.LearnedPorts.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("forget the port rule of %s for session %d: %w", addr, cgid, err)
	}
	return nil
}

// LearnedOf returns the session's learned IPs with their expiries
// (CLOCK_BOOTTIME): what a restarted daemon's resolver must know to
// forget them when they expire.
func (d *Datapath) LearnedOf(cgid uint64) (map[netip.Addr]time.Duration, error) {
	out := map[netip.Addr]time.Duration{}
	var k sluiceLearnedKey
	var v sluiceLearnedValue
	it := d.objs.Learned.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid {
			out[netip.AddrFrom16(k.Addr).Unmap()] = time.Duration(v.Expires)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list learned IPs of session %d: %w", cgid, err)
	}
	return out, nil
}

// ErrMapFull says a bounded map has no room: callers fail closed.
var ErrMapFull = errors.New("map full")

// BootTime is the kernel clock the datapath compares expiries with.
func BootTime() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return time.Duration(ts.Nano())
}

// Counters returns the session's counters summed over CPUs.
func (d *Datapath) Counters(cgid uint64) (Counters, error) {
	var per []sluiceCounters
	if err := d.objs.SessionCounters.Lookup(cgid, &per); err != nil {
		return Counters{}, fmt.Errorf("read counters of session %d: %w", cgid, err)
	}
	var c Counters
	for _, p := range per {
		c.Allowed += p.N[sluiceSluiceCounterCOUNTER_ALLOWED]
		c.Denied += p.N[sluiceSluiceCounterCOUNTER_DENIED]
		c.Audited += p.N[sluiceSluiceCounterCOUNTER_AUDITED]
		c.EventsLost += p.N[sluiceSluiceCounterCOUNTER_EVENTS_LOST]
		c.Quiet += p.N[sluiceSluiceCounterCOUNTER_QUIET]
		c.NameChecked += p.N[sluiceSluiceCounterCOUNTER_NAME_CHECKED]
		c.NameRefused += p.N[sluiceSluiceCounterCOUNTER_NAME_REFUSED]
	}
	return c, nil
}

// Known is what a session's owner knows it put into the datapath, so that
// removal touches just that: scanning the shared maps costs a syscall per
// entry of every session (100k CIDRs: ~0.4 s), and reading the 64k-entry
// listener array ~17 ms.
type Known struct {
	Prefixes []netip.Prefix // the session's CIDRs
	Ports    []uint16       // its listener ports (resolver, proxy)
	Ring     bool           // it has its own event ring buffer
	// Unix are the unix socket names given to AllowUnix.
	Unix []string
	// LoopbackSession says the session was in loopback "session" mode, so
	// its loopback port entries (listed and bound) must be scanned for.
	LoopbackSession bool
}

// RemoveSession deletes everything the datapath holds for the session: its
// policy, counters, ring buffer, CIDRs, listener ports, learned IPs, the
// aliases to it and its own (an alias cgroup's removal).
// Tasks still in the cgroup fall back to loopback only. k nil (a session
// left by another process) scans the shared maps.
func (d *Datapath) RemoveSession(cgid uint64, k *Known) error {
	var errs []error
	del := func(m *ebpf.Map, key any, what string) {
		if err := m.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete %s of session %d: %w", what, cgid, err))
		}
	}
	del(d.objs.Sessions, cgid, "policy")
	d.removeVerify(cgid, &errs)
	if err := d.SetNames(cgid, nil, nil); err != nil {
		errs = append(errs, err)
	}
	if err := d.ClearKDNS(cgid); err != nil {
		errs = append(errs, err)
	}
	if k == nil {
		d.clearListeners(cgid, &errs)
	} else {
		for _, p := range k.Ports {
			if err := d.ClearListener(p, cgid); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Every change to a map of maps waits for an RCU grace period
	// (~10 ms here): skip it when the session never had a ring buffer.
	if k == nil || k.Ring {
		del(d.objs.SessionEvents, cgid, "ring buffer")
	}
	del(d.objs.SessionCounters, cgid, "counters")

	if k != nil {
		if err := d.DeleteCIDRs(cgid, k.Prefixes); err != nil {
			errs = append(errs, err)
		}
	} else {
		var ck sluiceCidrKey
		var cv uint8
		var cidrs []sluiceCidrKey
		it := d.objs.Cidrs.Iterate()
		for it.Next(&ck, &cv) {
			if uint64(ck.SessionHi)<<32|uint64(ck.SessionLo) == cgid {
				cidrs = append(cidrs, ck)
			}
		}
		if err := it.Err(); err != nil {
			errs = append(errs, fmt.Errorf("list CIDRs of session %d: %w", cgid, err))
		}
		for i := range cidrs {
			del(d.objs.Cidrs, &cidrs[i], "CIDR")
		}
	}

	if k == nil {
		if err := d.removeUnix(cgid); err != nil {
			errs = append(errs, err)
		}
	} else if err := d.RevokeUnix(cgid, k.Unix); err != nil {
		errs = append(errs, err)
	}
	if err := d.deleteUnixGlobs(cgid, 0); err != nil {
		errs = append(errs, err)
	}
	if k == nil || k.LoopbackSession {
		if err := d.removeLoopbackPorts(cgid); err != nil {
			errs = append(errs, err)
		}
	}

	var lk sluiceLearnedKey
	var lv sluiceLearnedValue
	var learned []sluiceLearnedKey
	lit := d.objs.Learned.Iterate()
	for lit.Next(&lk, &lv) {
		if lk.Session == cgid {
			learned = append(learned, lk)
		}
	}
	if err := lit.Err(); err != nil {
		errs = append(errs, fmt.Errorf("list learned IPs of session %d: %w", cgid, err))
	}
	for i := range learned {
		del(d.objs.Learned, &learned[i], "learned IP")
	}
	d.removePortRules(cgid, &errs)
	d.removeAliasesTo(cgid, &errs)
	if err := d.RemoveAlias(cgid); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Entries counts what the datapath holds for the session (CIDRs, learned
// IPs), so tests and `sluice status` can show that cleanup left nothing.
func (d *Datapath) Entries(cgid uint64) (cidrs, learned int, err error) {
	var ck sluiceCidrKey
	var cv uint8
	it := d.objs.Cidrs.Iterate()
	for it.Next(&ck, &cv) {
		if uint64(ck.SessionHi)<<32|uint64(ck.SessionLo) == cgid {
			cidrs++
		}
	}
	var lk sluiceLearnedKey
	var lv sluiceLearnedValue
	lit := d.objs.Learned.Iterate()
	for lit.Next(&lk, &lv) {
		if lk.Session == cgid {
			learned++
		}
	}
	return cidrs, learned, errors.Join(it.Err(), lit.Err())
}

// GlobalEvents reads the ring buffer of events whose session had none.
func (d *Datapath) GlobalEvents() (*ringbuf.Reader, error) {
	r, err := ringbuf.NewReader(d.objs.Events)
	if err != nil {
		return nil, fmt.Errorf("read global events: %w", err)
	}
	return r, nil
}

// PinnedCounters reads a session's counters from the pinned map, without
// loading or attaching anything (for `sluice status`).
func PinnedCounters(pinDir string, cgid uint64) (Counters, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, sluiceMapSessionCounters), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return Counters{}, fmt.Errorf("open pinned counters: %w", err)
	}
	defer m.Close()
	d := Datapath{objs: sluiceObjects{sluiceMaps: sluiceMaps{SessionCounters: m}}}
	return d.Counters(cgid)
}

// SessionEvents re-opens the event ring buffer of a session registered by
// another (possibly dead) process, for a daemon that re-adopts it.
func (d *Datapath) SessionEvents(cgid uint64) (*ringbuf.Reader, error) {
	var id uint32
	if err := d.objs.SessionEvents.Lookup(cgid, &id); err != nil {
		return nil, fmt.Errorf("find event ring buffer of session %d: %w", cgid, err)
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return nil, fmt.Errorf("open event ring buffer of session %d: %w", cgid, err)
	}
	defer m.Close()
	r, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, fmt.Errorf("read events of session %d: %w", cgid, err)
	}
	return r, nil
}

// LearnedCapacity is the size bound of the learned-IP map shared by all
// sessions, for the map-fill metric.
func (d *Datapath) LearnedCapacity() uint32 { return d.objs.Learned.MaxEntries() }

// SetListener marks a loopback port as served by sluice for the session
// cgid (its proxy, its resolver): other sessions' connects and datagrams to
// it are refused.
func (d *Datapath) SetListener(port uint16, cgid uint64) error {
	if err := d.objs.Listeners.Update(uint32(port), cgid, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("register listener port %d of session %d: %w", port, cgid, err)
	}
	return nil
}

// ClearListener releases a port registered with SetListener, if cgid still
// owns it.
func (d *Datapath) ClearListener(port uint16, cgid uint64) error {
	var owner uint64
	if err := d.objs.Listeners.Lookup(uint32(port), &owner); err != nil || owner != cgid {
		return nil
	}
	if err := d.objs.Listeners.Update(uint32(port), uint64(0), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("release listener port %d: %w", port, err)
	}
	return nil
}

// clearListeners releases every port the session still owns. One batch
// lookup reads the whole 64k-entry array (a syscall per entry would cost a
// noticeable part of a run).
func (d *Datapath) clearListeners(cgid uint64, errs *[]error) {
	n := int(d.objs.Listeners.MaxEntries())
	keys := make([]uint32, n)
	owners := make([]uint64, n)
	var cursor ebpf.MapBatchCursor
	got, err := d.objs.Listeners.BatchLookup(&cursor, keys, owners, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		*errs = append(*errs, fmt.Errorf("list listener ports of session %d: %w", cgid, err))
		return
	}
	for i := range got {
		if owners[i] != cgid {
			continue
		}
		if err := d.objs.Listeners.Update(keys[i], uint64(0), ebpf.UpdateAny); err != nil {
			*errs = append(*errs, fmt.Errorf("release listener port %d: %w", keys[i], err))
		}
	}
}
