// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/netns"
)

// DNSPath says which path a session's UDP DNS takes.
type DNSPath string

const (
	// DNSPathResolver sends all of a session's DNS to its local resolver
	// (user space forwards, filters and learns).
	DNSPathResolver DNSPath = "resolver"
	// DNSPathKernel sends UDP DNS straight to the upstream and lets the
	// datapath judge queries and learn answers (bpf/kdns.h); the resolver
	// answers what the kernel hands over, and TCP.
	DNSPathKernel DNSPath = "kernel"
	// DNSPathAuto is the resolver path with the kernel path as its
	// automatic failover: UDP DNS goes to the session's resolver (and its
	// cache) while the resolver holds its socket, and takes the kernel
	// path while it does not (its owner is dead or restarting), so no
	// lookup waits for a daemon. The kernel path's ingress program stays
	// attached to the session for that (its egress judge is a tail call of
	// the datapath's egress program): sessions pay one program run per
	// received packet.
	DNSPathAuto DNSPath = "auto"
)

// ParseDNSPath reads --dns-path.
func ParseDNSPath(s string) (DNSPath, error) {
	switch DNSPath(s) {
	case DNSPathKernel, DNSPathResolver, DNSPathAuto:
		return DNSPath(s), nil
	case "":
		return DNSPathResolver, nil
	}
	return "", fmt.Errorf("DNS path %q: want auto, kernel or resolver", s)
}

// kdnsNames turns the policy's name entries into the kernel's table.
func kdnsNames(p *allowlist.Policy) []loader.KDNSName {
	if p == nil {
		return nil
	}
	byName := map[string]*loader.KDNSName{}
	var order []string
	for _, e := range p.Names() {
		// The kernel path learns every port: names with a port rule are
		// left to the resolver, which learns their rule (a name allowed on
		// every port by some entry needs none).
		if r, _ := p.NamePorts(e.Name); e.Kind == allowlist.KindHost && r.Ports != nil {
			continue
		}
		if e.Kind == allowlist.KindWildcard && e.Ports != nil {
			continue
		}
		n := byName[e.Name]
		if n == nil {
			n = &loader.KDNSName{Name: e.Name}
			byName[e.Name] = n
			order = append(order, e.Name)
		}
		switch e.Kind {
		case allowlist.KindHost:
			n.Exact = true
			n.ExactPrivate = n.ExactPrivate || e.AllowPrivate
		case allowlist.KindWildcard:
			n.Wildcard = true
			n.WildcardPrivate = n.WildcardPrivate || e.AllowPrivate
		}
	}
	out := make([]loader.KDNSName, 0, len(order))
	for _, k := range order {
		out = append(out, *byName[k])
	}
	return out
}

// kdnsConfig picks the session's first IPv4 and first IPv6 upstream.
func kdnsConfig(r *dnsresolver.Resolver, ups []string, d *DNSOptions) (loader.KDNSConfig, bool) {
	c := loader.KDNSConfig{MinTTL: d.MinTTL, MaxTTL: d.MaxTTL, Grace: d.Grace, MaxIPs: d.MaxIPsPerName}
	if c.MinTTL <= 0 {
		c.MinTTL = dnsresolver.DefaultMinTTL
	}
	if c.MaxTTL <= 0 {
		c.MaxTTL = dnsresolver.DefaultMaxTTL
	}
	if c.MaxIPs == 0 {
		c.MaxIPs = dnsresolver.DefaultMaxIPsPerName
	}
	for _, u := range ups {
		s, err := dnsresolver.UpstreamAddr(u)
		if err != nil {
			continue
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			continue
		}
		// A loopback upstream (127.0.0.53) works too: sessions share the
		// network namespace of their owner (the daemon refuses callers in
		// another), so the upstream the owner can reach, they can.
		a := ap.Addr().Unmap()
		if a.Is4() && !c.Upstream4.IsValid() {
			c.Upstream4 = netip.AddrPortFrom(a, ap.Port())
		} else if a.Is6() && !c.Upstream6.IsValid() {
			c.Upstream6 = ap
		}
	}
	return c, c.Upstream4.IsValid() || c.Upstream6.IsValid()
}

// startKDNS puts the session on the kernel DNS path. On any reason not to
// (no usable upstream, a hash collision between names), the session stays
// on the resolver path and the reason is returned for the caller to say.
func (s *Session) startKDNS(opts Options, ups []string) error {
	if err := s.e.dp.KDNSSupported(); err != nil {
		return err
	}
	if hasVerify(opts.Policy) {
		return errVerifyKDNS
	}
	cfg, ok := kdnsConfig(s.resolver, ups, opts.DNS)
	cfg.Failover = opts.DNS.Path == DNSPathAuto
	if !ok {
		return errors.New("no IP upstream: the session's DNS stays on the resolver path")
	}
	id := s.cg.ID()
	if !opts.SharedEvents {
		r, err := s.e.dp.KDNSEvents(id)
		if err != nil {
			return err
		}
		s.kdnsEvents = r
		go s.e.kdns.serve(r)
	} else {
		if err := s.e.kdns.startGlobal(s.e.dp); err != nil {
			return err
		}
	}
	s.e.kdns.add(id, s)
	// The kernel path's programs run on this session's cgroup only
	// (loader.AttachKDNS): sessions on the resolver path never pay for them.
	err := s.e.dp.AttachKDNS(id, s.cg.Path())
	if err == nil {
		err = s.e.dp.SetKDNS(id, cfg, kdnsNames(opts.Policy))
	}
	if err != nil {
		s.e.kdns.remove(id)
		_ = s.e.dp.ClearKDNS(id)
		return err
	}
	s.kdnsCfg = &cfg
	return nil
}

// The failover's beat (see bpf/dns_redirect.h): every beatEvery the
// session's resolver is probed through its own serving loops; an echo
// within beatProbe keeps its DNS on the resolver until beatValid after
// the probe was sent. A resolver that stops answering (its process
// stopped, a loop stuck) loses its session's DNS to the kernel path within
// beatValid, and gets it back at its first echo.
const (
	beatEvery = 500 * time.Millisecond
	beatProbe = time.Second
	beatValid = 2 * time.Second
)

// beat probes the session's resolver until stop is closed, then closes
// done.
func (s *Session) beat(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(beatEvery)
	defer t.Stop()
	id := s.cg.ID()
	for {
		sent := loader.MonotonicNow()
		if s.resolver.Probe(beatProbe) == nil && !closed(stop) {
			_ = s.e.dp.SetResolverBeat(id, sent, beatValid)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// KernelDNS reports whether the session's UDP DNS takes the kernel path,
// always or (DNSFailover) while its resolver is down.
func (s *Session) KernelDNS() bool { return s.kdnsCfg != nil }

// DNSFailover reports whether the session's UDP DNS takes the kernel path
// only while its resolver is down (DNSPathAuto).
func (s *Session) DNSFailover() bool { return s.kdnsCfg != nil && s.kdnsCfg.Failover }

// kdnsServer answers what the kernel DNS path hands to user space, for
// every session of this process.
type kdnsServer struct {
	mu       sync.Mutex
	sessions map[uint64]*Session
	global   bool
	inj      injectors
	sem      chan struct{}
}

func (k *kdnsServer) add(id uint64, s *Session) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sessions == nil {
		k.sessions = map[uint64]*Session{}
	}
	k.sessions[id] = s
}

func (k *kdnsServer) remove(id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.sessions, id)
}

func (k *kdnsServer) session(id uint64) *Session {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sessions[id]
}

func (k *kdnsServer) startGlobal(dp *loader.Datapath) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.global {
		return nil
	}
	r, err := dp.KDNSGlobalEvents()
	if err != nil {
		return err
	}
	k.global = true
	go k.serve(r)
	return nil
}

// serve reads r until it is closed; each record is answered on a goroutine
// of its own (an answer may wait for the upstream), at most 256 at once.
func (k *kdnsServer) serve(r *ringbuf.Reader) {
	k.mu.Lock()
	if k.sem == nil {
		k.sem = make(chan struct{}, 256)
	}
	sem := k.sem
	k.mu.Unlock()
	for {
		rec, err := r.Read()
		if err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			continue
		}
		ev, err := loader.ParseKDNSEvent(rec.RawSample)
		if err != nil {
			continue
		}
		s := k.session(ev.Session)
		if s == nil || s.resolver == nil {
			continue // another process's session, or one ending: its client retries
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // overloaded: the client retries
		}
		go func() {
			defer func() { <-sem }()
			k.answer(s, ev)
		}()
	}
}

// answer resolves what the kernel handed over through the session's
// resolver (which refuses, filters, learns and raises events as on the
// resolver path) and injects the reply as if the upstream sent it.
func (k *kdnsServer) answer(s *Session, ev loader.KDNSEvent) {
	var req *dns.Msg
	if ev.Kind == loader.KDNSQuery && ev.Why == loader.KDNSWhySegmented {
		s.resolver.Report(dnsresolver.Event{Kind: dnsresolver.EventRefused, Client: ev.Client, Reason: dnsresolver.ReasonSegmented})
		return
	}
	switch ev.Kind {
	case loader.KDNSQuery:
		req = new(dns.Msg)
		if err := req.Unpack(ev.Msg); err != nil {
			return // not a DNS message: nothing to answer
		}
	case loader.KDNSAnswer:
		var err error
		if req, err = questionOf(ev.Msg); err != nil {
			return
		}
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := s.resolver.Resolve(ctx, req, ev.Client)
	size := dns.MinMsgSize
	if opt := req.IsEdns0(); opt != nil && int(opt.UDPSize()) > size {
		size = int(opt.UDPSize())
	}
	resp.Truncate(size)
	b, err := resp.Pack()
	if err != nil {
		return
	}
	_ = k.inj.inject(s, ev, b)
}

// questionOf rebuilds the query an answer answers from its header and
// question (all the kernel hands over of an answer it could not judge).
func questionOf(b []byte) (*dns.Msg, error) {
	if len(b) < 12 || binary.BigEndian.Uint16(b[4:]) != 1 {
		return nil, errors.New("no question")
	}
	name, off, err := dns.UnpackDomainName(b, 12)
	if err != nil || off+4 > len(b) {
		return nil, errors.New("bad question")
	}
	m := new(dns.Msg)
	m.Id = binary.BigEndian.Uint16(b)
	m.RecursionDesired = b[2]&1 != 0
	m.CheckingDisabled = b[3]&0x10 != 0
	m.Question = []dns.Question{{Name: name, Qtype: binary.BigEndian.Uint16(b[off:]), Qclass: binary.BigEndian.Uint16(b[off+2:])}}
	return m, nil
}

// injectors hold raw sockets, one per network namespace and family, that
// send an answer to a session's socket with the upstream as its source.
type injectors struct {
	mu    sync.Mutex
	socks map[injKey]int
}

type injKey struct {
	netns uint64
	v6    bool
}

func (in *injectors) inject(s *Session, ev loader.KDNSEvent, payload []byte) error {
	ns, nsPath, err := s.clientNetns(ev.Client)
	if err != nil {
		return err
	}
	fd, err := in.socket(injKey{ns, ev.IPv6}, nsPath)
	if err != nil {
		return err
	}
	pkt := udpPacket(ev.Upstream, ev.Client, ev.IPv6, payload)
	if ev.IPv6 {
		sa := &unix.SockaddrInet6{Addr: ev.Client.Addr().As16()}
		return unix.Sendto(fd, pkt, 0, sa)
	}
	sa := &unix.SockaddrInet4{Addr: ev.Client.Addr().Unmap().As4()}
	return unix.Sendto(fd, pkt, 0, sa)
}

// socket returns the raw socket for k, creating it inside the namespace
// at nsPath ("" for this process's own).
func (in *injectors) socket(k injKey, nsPath string) (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if fd, ok := in.socks[k]; ok {
		return fd, nil
	}
	fam := unix.AF_INET
	if k.v6 {
		fam = unix.AF_INET6
	}
	open := func() (int, error) {
		fd, err := unix.Socket(fam, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return -1, err
		}
		// The mark is how the ingress program tells this socket's
		// answers from anything else with the upstream's address.
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, loader.KDNSInjectMark); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("mark the raw socket: %w", err)
		}
		return fd, nil
	}
	var fd int
	var err error
	if nsPath == "" {
		fd, err = open()
	} else {
		err = netns.DoPath(nsPath, func() (err error) {
			fd, err = open()
			return err
		})
	}
	if err != nil {
		return -1, fmt.Errorf("raw socket for DNS answers: %w", err)
	}
	if in.socks == nil {
		in.socks = map[injKey]int{}
	}
	in.socks[k] = fd
	return fd, nil
}

// clientNetns finds the network namespace of the session socket bound to
// client: this process's own when one of the session's processes shares
// it and has the socket, else the first process that has it.
func (s *Session) clientNetns(client netip.AddrPort) (uint64, string, error) {
	var self unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		return 0, "", err
	}
	pids, err := s.cg.Procs()
	if err != nil {
		return 0, "", err
	}
	var fallback uint64
	var fallbackPath string
	for _, pid := range pids {
		path := fmt.Sprintf("/proc/%d/ns/net", pid)
		var st unix.Stat_t
		if unix.Stat(path, &st) != nil {
			continue
		}
		if st.Ino == self.Ino {
			return self.Ino, "", nil
		}
		if fallbackPath == "" && socketInode(pid, client) != "" {
			fallback, fallbackPath = st.Ino, path
		}
	}
	if fallbackPath == "" {
		return self.Ino, "", nil
	}
	return fallback, fallbackPath, nil
}

// udpPacket builds an IP header, a UDP header and payload from src to dst
// (raw IPPROTO_RAW sockets include the IP header).
func udpPacket(src, dst netip.AddrPort, v6 bool, payload []byte) []byte {
	ulen := 8 + len(payload)
	if !v6 {
		b := make([]byte, 20+ulen)
		b[0] = 0x45
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		binary.BigEndian.PutUint16(b[6:], 0x4000) // DF
		b[8] = 64
		b[9] = unix.IPPROTO_UDP
		s4, d4 := src.Addr().Unmap().As4(), dst.Addr().Unmap().As4()
		copy(b[12:], s4[:])
		copy(b[16:], d4[:])
		binary.BigEndian.PutUint16(b[10:], ipChecksum(b[:20]))
		u := b[20:]
		binary.BigEndian.PutUint16(u[0:], src.Port())
		binary.BigEndian.PutUint16(u[2:], dst.Port())
		binary.BigEndian.PutUint16(u[4:], uint16(ulen))
		copy(u[8:], payload)
		// UDP over IPv4 may go without a checksum (0).
		return b
	}
	b := make([]byte, 40+ulen)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(ulen))
	b[6] = unix.IPPROTO_UDP
	b[7] = 64
	s16, d16 := src.Addr().As16(), dst.Addr().As16()
	copy(b[8:], s16[:])
	copy(b[24:], d16[:])
	u := b[40:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ulen))
	copy(u[8:], payload)
	// The pseudo-header checksum is mandatory over IPv6.
	var sum uint32
	add := func(p []byte) {
		for i := 0; i+1 < len(p); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(p[i:]))
		}
		if len(p)%2 == 1 {
			sum += uint32(p[len(p)-1]) << 8
		}
	}
	add(s16[:])
	add(d16[:])
	sum += uint32(ulen) + unix.IPPROTO_UDP
	add(u)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return b
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
