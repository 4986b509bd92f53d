// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// ErrKDNSUnsupported says the kernel DNS path's programs did not load on
// this kernel: the rest of the datapath works, and sessions keep the
// resolver path.
var ErrKDNSUnsupported = errors.New("the kernel DNS path does not load on this kernel")

// kdnsAttachment is one program of the kernel DNS path, in the kernel DNS
// object (bpf/kdns.c): optional, so that a kernel whose verifier refuses it
// keeps the rest of the datapath.
type kdnsAttachment struct {
	name   string // pin name of its links (legacy: see unpinLegacyKDNS)
	attach ebpf.AttachType
	prog   func(*kdnsPrograms) *ebpf.Program
}

// kdnsAttachments are the kernel DNS path's cgroup_skb programs. Neither
// is attached to the parent cgroup, where it would run on every packet of
// every session (measured: +6% on a TCP connect+close cycle). The egress
// program is not attached at all: the parent's egress program, which runs
// on every packet anyway, tail-calls it for UDP packets (the kdns_tail
// program array, filled by installKDNS). The ingress program is attached
// to the cgroup of each session on the kernel path (AttachKDNS): cgroup
// links are multi-attach, so it runs in addition to the parent's programs,
// and the links are pinned per session (kdnsLinkPin) so that the path
// keeps working when the process that started the session dies.
var kdnsAttachments = []kdnsAttachment{
	{"link_kdns_egress", ebpf.AttachCGroupInetEgress, func(o *kdnsPrograms) *ebpf.Program { return o.SluiceKdnsEgress }},
	{"link_kdns_ingress", ebpf.AttachCGroupInetIngress, func(o *kdnsPrograms) *ebpf.Program { return o.SluiceKdnsIngress }},
}

// kdnsProgPins pin the programs (in the order of kdnsAttachments) so that a
// process that re-opens the datapath without loading it (reuse) can attach
// them to new sessions.
var kdnsProgPins = []string{"prog_kdns_egress", "prog_kdns_ingress"}

// kdnsLinkPrefix starts the pin names of sessions' kernel DNS links:
// kdns_egress_<cgroup id>, kdns_ingress_<cgroup id>.
var kdnsLinkPrefix = []string{"kdns_egress_", "kdns_ingress_"}

// kdnsLinked reports whether kdnsAttachments[i] is attached to sessions'
// cgroups (the ingress program); the egress one is a tail call.
func kdnsLinked(i int) bool { return kdnsAttachments[i].attach == ebpf.AttachCGroupInetIngress }

func (d *Datapath) kdnsLinkPin(i int, cgid uint64) string {
	return filepath.Join(d.pinDir, fmt.Sprintf("%s%d", kdnsLinkPrefix[i], cgid))
}

// unpinLegacyKDNS detaches the kernel DNS links that earlier builds pinned
// on the parent cgroup (link_kdns_*): they would keep running for every
// session.
func unpinLegacyKDNS(pinDir string) {
	for _, a := range kdnsAttachments {
		_ = os.Remove(filepath.Join(pinDir, a.name))
	}
}

// kdnsSpec reads the embedded kernel DNS object; a test replaces it to play
// a kernel that refuses the object's programs.
var kdnsSpec = loadKdns

// loadKDNS loads the kernel DNS path's object (bpf/kdns.c) with the
// datapath's maps in place of its own: the two objects declare their
// shared maps from the same headers, and every pinned map of the kernel
// DNS object must be one of the datapath's (the loader pins only those).
// Its own are the unpinned per-CPU scratch maps. The programs it returns
// (in the order of kdnsAttachments) are the caller's to close. An error
// for which kdnsLoadFailed holds means this kernel refuses the programs.
func loadKDNS(maps *sluiceMaps) ([]*ebpf.Program, error) {
	spec, err := kdnsSpec()
	if err != nil {
		return nil, fmt.Errorf("load kernel DNS spec: %w", err)
	}
	shared := maps.byName()
	repl := make(map[string]*ebpf.Map)
	for name, ms := range spec.Maps {
		if m, ok := shared[name]; ok && m != nil {
			repl[name] = m
			continue
		}
		if ms.Pinning != ebpf.PinNone {
			return nil, fmt.Errorf("load kernel DNS object: its pinned map %s is not the datapath's", name)
		}
	}
	var progs kdnsPrograms
	if err := spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return nil, err
	}
	out := make([]*ebpf.Program, len(kdnsAttachments))
	for i, a := range kdnsAttachments {
		out[i] = a.prog(&progs)
	}
	return out, nil
}

// byName lists the datapath's maps by their names in the object.
func (m *sluiceMaps) byName() map[string]*ebpf.Map {
	out := make(map[string]*ebpf.Map)
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Tag.Get("ebpf")
		if mp, ok := v.Field(i).Interface().(*ebpf.Map); ok && name != "" {
			out[name] = mp
		}
	}
	return out
}

// installKDNS pins the freshly loaded kernel DNS programs, puts the egress
// one into the tail call slot of the datapath's egress program and swaps
// them into the links of sessions already on the kernel path; a link whose
// cgroup is gone is unpinned.
func (d *Datapath) installKDNS() error {
	if d.kdnsErr != nil {
		// An earlier load's program would see no session on the path.
		_ = d.objs.KdnsTail.Delete(uint32(0))
		return nil
	}
	for i, p := range d.kdnsProgs {
		pin := filepath.Join(d.pinDir, kdnsProgPins[i])
		if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("unpin %s: %w", pin, err)
		}
		if err := p.Pin(pin); err != nil {
			return fmt.Errorf("pin %s: %w", pin, err)
		}
	}
	if err := d.objs.KdnsTail.Update(uint32(0), d.kdnsProgs[0], ebpf.UpdateAny); err != nil {
		return fmt.Errorf("kernel DNS egress program into its tail call slot: %w", err)
	}
	entries, err := os.ReadDir(d.pinDir)
	if err != nil {
		return fmt.Errorf("read pin directory: %w", err)
	}
	for _, e := range entries {
		for i, pre := range kdnsLinkPrefix {
			if !strings.HasPrefix(e.Name(), pre) {
				continue
			}
			pin := filepath.Join(d.pinDir, e.Name())
			if !kdnsLinked(i) {
				// Earlier builds attached the egress program to each
				// session: it would now judge every query twice.
				_ = os.Remove(pin)
				continue
			}
			l, err := link.LoadPinnedLink(pin, nil)
			if err != nil {
				_ = os.Remove(pin)
				continue
			}
			if err := l.Update(d.kdnsProgs[i]); err != nil {
				_ = l.Unpin()
			}
			l.Close()
		}
	}
	return nil
}

// pinnedKDNSPrograms opens the pinned kernel DNS programs (none when the
// path is off on this datapath).
func (d *Datapath) pinnedKDNSPrograms() ([]*ebpf.Program, error) {
	if d.kdnsErr != nil {
		return nil, nil
	}
	var progs []*ebpf.Program
	for _, name := range kdnsProgPins {
		p, err := ebpf.LoadPinnedProgram(filepath.Join(d.pinDir, name), nil)
		if err != nil {
			for _, q := range progs {
				q.Close()
			}
			return nil, fmt.Errorf("open pinned %s: %w", name, err)
		}
		progs = append(progs, p)
	}
	return progs, nil
}

// AttachKDNS attaches the kernel DNS path's programs to the session's own
// cgroup at path and pins the links; SetKDNS refuses a session without
// them. Attaching again is a no-op.
func (d *Datapath) AttachKDNS(cgid uint64, path string) error {
	if d.kdnsErr != nil {
		return d.kdnsErr
	}
	for i, a := range kdnsAttachments {
		if !kdnsLinked(i) {
			continue
		}
		pin := d.kdnsLinkPin(i, cgid)
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			l.Close()
			continue
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: path, Attach: a.attach, Program: d.kdnsProgs[i]})
		if err != nil {
			d.DetachKDNS(cgid)
			return fmt.Errorf("attach %s to %s: %w", a.name, path, err)
		}
		err = l.Pin(pin)
		l.Close()
		if err != nil {
			d.DetachKDNS(cgid)
			return fmt.Errorf("pin %s: %w", pin, err)
		}
	}
	return nil
}

// DetachKDNS unpins (and so detaches) the session's kernel DNS links.
func (d *Datapath) DetachKDNS(cgid uint64) error {
	var errs []error
	for i := range kdnsAttachments {
		if err := os.Remove(d.kdnsLinkPin(i, cgid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin kernel DNS link of session %d: %w", cgid, err))
		}
	}
	return errors.Join(errs...)
}

// kdnsAttached reports whether the kernel DNS links of the session are
// pinned.
func (d *Datapath) kdnsAttached(cgid uint64) bool {
	for i := range kdnsAttachments {
		if !kdnsLinked(i) {
			continue
		}
		if _, err := os.Stat(d.kdnsLinkPin(i, cgid)); err != nil {
			return false
		}
	}
	return true
}

// verifyKDNS requires, for a session on the kernel DNS path (or with its
// links pinned), that the programs its pinned links run are in force on
// its cgroup f.
func (d *Datapath) verifyKDNS(f *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat cgroup %s: %w", path, err)
	}
	cgid := st.Ino
	if !d.KDNSEnabled(cgid) && !d.kdnsAttached(cgid) {
		return nil
	}
	for i, a := range kdnsAttachments {
		if !kdnsLinked(i) {
			continue
		}
		l, err := link.LoadPinnedLink(d.kdnsLinkPin(i, cgid), nil)
		if err != nil {
			return fmt.Errorf("verify %s: %w", a.name, err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			return fmt.Errorf("verify %s: link info: %w", a.name, err)
		}
		res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: a.attach, QueryFlags: unix.BPF_F_QUERY_EFFECTIVE})
		if err != nil {
			return fmt.Errorf("verify %s on %s: %w", a.name, path, err)
		}
		found := false
		for _, p := range res.Programs {
			found = found || p.ID == info.Program
		}
		if !found {
			return fmt.Errorf("verify %s: program %d is not in force on %s", a.name, info.Program, path)
		}
	}
	return nil
}

// KDNSSupported says whether the kernel DNS path is attached, and if not,
// why.
func (d *Datapath) KDNSSupported() error { return d.kdnsErr }

// kdnsDisabled says why a test turned the kernel DNS path off
// (SLUICE_TEST_NO_KDNS=1, to exercise the fallback on any kernel): the
// kernel DNS object is then not loaded. Nil otherwise.
func kdnsDisabled() error {
	if os.Getenv("SLUICE_TEST_NO_KDNS") != "1" {
		return nil
	}
	return fmt.Errorf("%w: disabled by SLUICE_TEST_NO_KDNS", ErrKDNSUnsupported)
}

// kdnsLoadFailed reports whether loading the kernel DNS object failed on
// one of its programs (the kernel refuses it), not on its maps.
func kdnsLoadFailed(err error) bool {
	return strings.Contains(err.Error(), kdnsProgSluiceKdnsEgress) || strings.Contains(err.Error(), kdnsProgSluiceKdnsIngress)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ProbeKDNS loads the kernel DNS path's programs (and the maps they use)
// without pinning or attaching anything: nil when this kernel runs them.
func ProbeKDNS() error {
	if err := kdnsDisabled(); err != nil {
		return err
	}
	spec, err := loadKdns()
	if err != nil {
		return fmt.Errorf("load kernel DNS spec: %w", err)
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	var progs kdnsPrograms
	if err := spec.LoadAndAssign(&progs, nil); err != nil {
		return fmt.Errorf("%w: %s", ErrKDNSUnsupported, firstLine(err.Error()))
	}
	return progs.Close()
}

// KDNSConfig turns on a session's kernel DNS path (bpf/kdns.h): its UDP
// DNS goes straight to Upstream4/Upstream6 and the datapath learns the
// answers itself.
type KDNSConfig struct {
	Upstream4 netip.AddrPort // an IPv4 upstream, or invalid
	Upstream6 netip.AddrPort // an IPv6 upstream, or invalid
	MinTTL    time.Duration
	MaxTTL    time.Duration
	Grace     time.Duration
	MaxIPs    int // per answer; 0: no cap
	// Failover makes the kernel path the resolver path's failover
	// (--dns-path auto): UDP DNS goes to the session's resolver while it
	// holds its socket, and straight to the upstream while it does not
	// (the owner is dead or restarting). The programs check at every DNS
	// connect/sendmsg (bpf/dns_redirect.h, resolver_alive).
	Failover bool
}

// KDNSName is an allowed name as the kernel path matches it.
type KDNSName struct {
	Name     string // normalised, lower-case ASCII, no trailing dot
	Exact    bool   // the name itself
	Wildcard bool   // names strictly under it
	// ExactPrivate and WildcardPrivate carry allow_private.
	ExactPrivate, WildcardPrivate bool
}

// ErrKDNSCollision says two allowed names of a session share a hash key:
// the session must use the resolver path (the kernel confirms names byte
// by byte, but its map holds one name per key).
var ErrKDNSCollision = errors.New("two allowed names share a kernel DNS hash key")

// kdnsHash is FNV-1a over the wire form from the last byte to the first, as
// bpf/kdns.c computes it for every suffix of a query name in one pass.
func kdnsHash(wire []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := len(wire) - 1; i >= 0; i-- {
		h = (h ^ uint64(wire[i])) * 0x100000001b3
	}
	return h
}

// wireName is name in DNS wire form, lower case, root label included.
func wireName(name string) ([]byte, error) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	var b []byte
	if name != "" {
		for _, l := range strings.Split(name, ".") {
			if l == "" || len(l) > 63 {
				return nil, fmt.Errorf("bad label in %q", name)
			}
			b = append(b, byte(len(l)))
			b = append(b, l...)
		}
	}
	b = append(b, 0)
	if len(b) > 255 {
		return nil, fmt.Errorf("name too long: %q", name)
	}
	return b, nil
}

func addrPortBE(ap netip.AddrPort) (ip [4]uint32, port uint16) {
	b := ap.Addr().As16()
	for i := range ip {
		ip[i] = binary.NativeEndian.Uint32(b[i*4:])
	}
	return ip, htons(ap.Port())
}

// SetKDNS writes the session's kernel DNS configuration and its allowed
// names, replacing earlier ones; the upstream redirect switches on last,
// so that no query reaches the kernel path before its names are there.
func (d *Datapath) SetKDNS(cgid uint64, cfg KDNSConfig, names []KDNSName) error {
	if d.kdnsErr != nil {
		return d.kdnsErr
	}
	if !d.kdnsAttached(cgid) {
		// No socket may be pointed at the upstream without the programs
		// that judge its traffic.
		return fmt.Errorf("kernel DNS path of session %d: its programs are not attached (AttachKDNS)", cgid)
	}
	want := map[sluiceKdnsNameKey]sluiceKdnsName{}
	for _, n := range names {
		w, err := wireName(n.Name)
		if err != nil {
			return fmt.Errorf("kernel DNS name %q: %w", n.Name, err)
		}
		k := sluiceKdnsNameKey{Session: cgid, Hash: kdnsHash(w)}
		v := want[k]
		if v.Len != 0 && !bytes.Equal(v.Name[:v.Len], w) {
			return fmt.Errorf("%w: %q", ErrKDNSCollision, n.Name)
		}
		v.Len = uint32(len(w))
		copy(v.Name[:], w)
		if n.Exact {
			v.Flags |= 1
		}
		if n.Wildcard {
			v.Flags |= 2
		}
		if n.ExactPrivate {
			v.Flags |= 4
		}
		if n.WildcardPrivate {
			v.Flags |= 8
		}
		want[k] = v
	}
	old, err := d.kdnsNameKeys(cgid)
	if err != nil {
		return err
	}
	for k, v := range want {
		if err := d.objs.KdnsNames.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("kernel DNS names of session %d: %w", cgid, err)
		}
	}
	for _, k := range old {
		if _, ok := want[k]; !ok {
			if err := d.objs.KdnsNames.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("kernel DNS names of session %d: %w", cgid, err)
			}
		}
	}
	v := sluiceKdnsSession{
		Flags:  1,
		MinTtl: uint32(cfg.MinTTL / time.Second),
		MaxTtl: uint32(cfg.MaxTTL / time.Second),
		Grace:  uint32(cfg.Grace / time.Second),
		MaxIps: uint32(max(cfg.MaxIPs, 0)),
	}
	if cfg.Failover {
		v.Flags |= 2
	}
	if cfg.Upstream4.IsValid() {
		ip, port := addrPortBE(netip.AddrPortFrom(cfg.Upstream4.Addr().Unmap(), cfg.Upstream4.Port()))
		v.Up4, v.Port4 = ip[3], port
	}
	if cfg.Upstream6.IsValid() {
		v.Up6, v.Port6 = addrPortBE(cfg.Upstream6)
	}
	if err := d.objs.KdnsSessions.Update(cgid, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("kernel DNS path of session %d: %w", cgid, err)
	}
	return nil
}

func (d *Datapath) kdnsNameKeys(cgid uint64) ([]sluiceKdnsNameKey, error) {
	var keys []sluiceKdnsNameKey
	var k sluiceKdnsNameKey
	var v sluiceKdnsName
	it := d.objs.KdnsNames.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list kernel DNS names of session %d: %w", cgid, err)
	}
	return keys, nil
}

// KDNSEnabled reports whether the session is on the kernel DNS path.
func (d *Datapath) KDNSEnabled(cgid uint64) bool {
	var v sluiceKdnsSession
	return d.objs.KdnsSessions.Lookup(cgid, &v) == nil && v.Flags&1 != 0
}

// SetResolverBeat says the session's resolver answered a probe sent at
// monotonic time sent (CLOCK_MONOTONIC, as bpf_ktime_get_ns reads it):
// until sent+valid its DNS goes to the resolver while the resolver's socket
// is bound; after it, a failover session takes the kernel path even though
// the socket is still bound (a stopped or stuck resolver).
func (d *Datapath) SetResolverBeat(cgid uint64, sent, valid time.Duration) error {
	until := uint64(sent + valid)
	if err := d.objs.ResolverBeats.Update(cgid, until, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("resolver beat of session %d: %w", cgid, err)
	}
	return nil
}

// MonotonicNow is CLOCK_MONOTONIC, the clock of SetResolverBeat.
func MonotonicNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// ClearKDNS takes the session off the kernel DNS path: its UDP DNS goes to
// its resolver again (sockets already redirected keep their upstream).
func (d *Datapath) ClearKDNS(cgid uint64) error {
	var errs []error
	if err := d.objs.ResolverBeats.Delete(cgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, fmt.Errorf("resolver beat of session %d: %w", cgid, err))
	}
	err := d.objs.KdnsSessions.Delete(cgid)
	// The links go after the session entry: sockets are no longer pointed
	// at the upstream before the programs that judge them leave.
	if derr := d.DetachKDNS(cgid); derr != nil {
		errs = append(errs, derr)
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil // never on it: nothing else to remove
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("kernel DNS path of session %d: %w", cgid, err))
	}
	keys, err := d.kdnsNameKeys(cgid)
	errs = append(errs, err)
	for _, k := range keys {
		if err := d.objs.KdnsNames.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	if err := d.objs.KdnsSessionEvents.Delete(cgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// KDNSEvents gives the session a ring buffer of its own for the queries and
// answers the kernel path hands to user space.
func (d *Datapath) KDNSEvents(cgid uint64) (*ringbuf.Reader, error) {
	rb, err := ebpf.NewMap(d.kdnsInner)
	if err != nil {
		return nil, fmt.Errorf("create kernel DNS ring buffer of session %d: %w", cgid, err)
	}
	defer rb.Close()
	if err := d.objs.KdnsSessionEvents.Update(cgid, rb, ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("register kernel DNS ring buffer of session %d: %w", cgid, err)
	}
	r, err := ringbuf.NewReader(rb)
	if err != nil {
		return nil, fmt.Errorf("read kernel DNS events of session %d: %w", cgid, err)
	}
	return r, nil
}

// KDNSGlobalEvents reads the kernel DNS events of sessions without a ring
// buffer of their own (a daemon's).
func (d *Datapath) KDNSGlobalEvents() (*ringbuf.Reader, error) {
	r, err := ringbuf.NewReader(d.objs.KdnsEvents)
	if err != nil {
		return nil, fmt.Errorf("read kernel DNS events: %w", err)
	}
	return r, nil
}

// KDNSEventKind says what the kernel handed over.
type KDNSEventKind uint8

const (
	// KDNSQuery is a query the kernel did not pass (not listed, not
	// canonical, not A/AAAA): Msg is the query; answer it.
	KDNSQuery KDNSEventKind = 1
	// KDNSAnswer is an answer the kernel could not judge and dropped: Msg
	// starts with its header and question; resolve the question again.
	KDNSAnswer KDNSEventKind = 2
)

// KDNSInjectMark is the SO_MARK of the raw socket that injects user
// space's answers to queries the kernel DNS path handed over: while user
// space answers a query, the ingress program passes only datagrams with
// this mark (bpf/kdns.h).
const KDNSInjectMark = 0x51ce0053

// KDNSWhySegmented is the Why of a KDNSQuery event without bytes: a send
// that carried several datagrams at once (UDP GSO) to the upstream, which
// the kernel dropped unjudged; there is nothing to answer, only to report.
const KDNSWhySegmented uint8 = 11

// KDNSEvent is a datagram the kernel DNS path hands to user space.
type KDNSEvent struct {
	Session  uint64
	Kind     KDNSEventKind
	Why      uint8
	Client   netip.AddrPort // the asking socket (IPv4 unmapped when the datagram was IPv4)
	Upstream netip.AddrPort // the answer's source
	IPv6     bool           // the datagram's family
	Msg      []byte
}

// ParseKDNSEvent decodes a kernel DNS ring buffer record.
func ParseKDNSEvent(raw []byte) (KDNSEvent, error) {
	var e sluiceKdnsEvent
	if len(raw) < binary.Size(e) {
		return KDNSEvent{}, fmt.Errorf("kernel DNS event: %d bytes, want %d", len(raw), binary.Size(e))
	}
	if err := binary.Read(bytes.NewReader(raw), binary.NativeEndian, &e); err != nil {
		return KDNSEvent{}, fmt.Errorf("kernel DNS event: %w", err)
	}
	n := min(int(e.Len), len(e.Msg))
	v6 := e.Family == 10
	addr := func(b [16]byte) netip.Addr {
		a := netip.AddrFrom16(b)
		if !v6 {
			a = a.Unmap()
		}
		return a
	}
	return KDNSEvent{
		Session:  e.Session,
		Kind:     KDNSEventKind(e.Kind),
		Why:      e.Why,
		Client:   netip.AddrPortFrom(addr(e.Client), e.ClientPort),
		Upstream: netip.AddrPortFrom(addr(e.Upstream), e.UpstreamPort),
		IPv6:     v6,
		Msg:      append([]byte(nil), e.Msg[:n]...),
	}, nil
}

// ForgetExpired removes a learned IP of the session only if it has expired
// by now: the kernel DNS path may have extended it behind the resolver's
// back, and a live entry must never be cut.
func (d *Datapath) ForgetExpired(cgid uint64, addr netip.Addr, now time.Duration) error {
	k := sluiceLearnedKey{Session: cgid, Addr: addr.Unmap().As16()}
	var v sluiceLearnedValue
	if err := d.objs.Learned.Lookup(&k, &v); err != nil {
		return nil
	}
	if time.Duration(v.Expires) > now {
		return nil
	}
	return d.Forget(cgid, addr)
}

// SweepLearned removes the session's learned IPs that expired before
// now: the kernel DNS path learns without telling user space, so this is
// its garbage collector.
func (d *Datapath) SweepLearned(cgid uint64, now time.Duration) (int, error) {
	var k sluiceLearnedKey
	var v sluiceLearnedValue
	var dead []sluiceLearnedKey
	it := d.objs.Learned.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid && time.Duration(v.Expires) < now {
			dead = append(dead, k)
		}
	}
	n := 0
	for i := range dead {
		if d.ForgetExpired(cgid, netip.AddrFrom16(dead[i].Addr), now) == nil {
			n++
		}
	}
	return n, it.Err()
}

// KDNSProgramStats are the run time and run count of the kernel DNS path's
// egress and ingress programs, for benchmarks. The kernel counts only while
// statistics are on (ebpf.EnableStats, or sysctl kernel.bpf_stats_enabled).
// The egress judge runs as a tail call of the datapath's egress program,
// and the kernel counts a tail call's time in the program that made it: the
// egress figures are that program's, on every packet of every session.
func (d *Datapath) KDNSProgramStats() (egress, ingress ebpf.ProgramStats, err error) {
	j := 0
	for _, a := range attachments {
		if d.skip(a) {
			continue
		}
		if a.name == "link_egress" && j < len(d.progs) {
			s, err := d.progs[j].Stats()
			if err != nil {
				return egress, ingress, fmt.Errorf("statistics of %s: %w", a.name, err)
			}
			egress = *s
			break
		}
		j++
	}
	get := func(name string) (ebpf.ProgramStats, error) {
		for i, a := range kdnsAttachments {
			if a.name == name && i < len(d.kdnsProgs) {
				s, err := d.kdnsProgs[i].Stats()
				if err != nil {
					return ebpf.ProgramStats{}, fmt.Errorf("statistics of %s: %w", name, err)
				}
				return *s, nil
			}
		}
		return ebpf.ProgramStats{}, fmt.Errorf("statistics of %s: no such program", name)
	}
	ingress, err = get("link_kdns_ingress")
	return egress, ingress, err
}

// KDNSForwarded is how many queries the kernel DNS path judged allowed and
// sent upstream itself, summed over the CPUs, since the datapath's maps
// were created (they are pinned: the count goes on across restarts of
// their owner). Queries the kernel hands to user space are not in it: the
// resolver answers and counts those.
func (d *Datapath) KDNSForwarded() (uint64, error) {
	if d.kdnsErr != nil {
		return 0, d.kdnsErr
	}
	if d.objs.KdnsCounts == nil {
		return 0, errors.New("kernel DNS path: no query counter")
	}
	var perCPU []uint64
	if err := d.objs.KdnsCounts.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("kernel DNS path: query counter: %w", err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n, nil
}

// KDNSLearnedFrom is the name the kernel DNS path last learned addr from
// for the session cgid, "" when it learned none there (or its entry was
// evicted: kdns_learned_from explains, it decides nothing).
func (d *Datapath) KDNSLearnedFrom(cgid uint64, addr netip.Addr) string {
	k := sluiceLearnedKey{Session: cgid, Addr: addr.Unmap().As16()}
	var q sluiceKdnsQuery
	if err := d.objs.KdnsLearnedFrom.Lookup(&k, &q); err != nil {
		return ""
	}
	return textName(q.Name[:min(int(q.NameLen), len(q.Name))])
}

// textName is the dotted form of a lower-case wire-form name, "" for one
// that is not well formed.
func textName(wire []byte) string {
	var b strings.Builder
	for i := 0; i < len(wire); {
		n := int(wire[i])
		if n == 0 {
			return b.String()
		}
		if n > 63 || i+1+n > len(wire) {
			return ""
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		for _, c := range wire[i+1 : i+1+n] {
			if c <= ' ' || c >= 0x7f || c == '.' || c == '\\' {
				fmt.Fprintf(&b, "\\%03d", c)
				continue
			}
			b.WriteByte(c)
		}
		i += 1 + n
	}
	return ""
}
