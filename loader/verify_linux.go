// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// VerifyMode is how a learned address is judged beyond its address when
// an entry with "verify" taught it (bpf/verify.h).
type VerifyMode uint8

// The modes of verify_addrs. Without one, the datapath's default rule
// holds: TCP ports 80 and 443 are checked by name, other ports by address,
// and UDP 443 (QUIC) is refused.
const (
	VerifyName    = VerifyMode(sluiceSluiceVerifyModeVERIFY_NAME)
	VerifyAddress = VerifyMode(sluiceSluiceVerifyModeVERIFY_ADDRESS)
)

// Origin is where a connection handed to a session's verifier meant to go,
// and who made it.
type Origin struct {
	Dst  netip.AddrPort
	PID  uint32
	Comm string
}

// SetVerifier sends the session's name-checked connections to its verifier
// on 127.0.0.1:port4 and [::1]:port6 (port6 0: IPv6 goes to
// ::ffff:127.0.0.1). port4 0 removes the session's verifier: its learned
// addresses are then judged by address alone, as before issue 18.
func (d *Datapath) SetVerifier(cgid uint64, port4, port6 uint16) error {
	if port4 == 0 {
		if err := d.objs.VerifySessions.Delete(cgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove the verifier of session %d: %w", cgid, err)
		}
		return nil
	}
	v := sluiceVerifySession{Port4: htons(port4), Port6: htons(port6)}
	if err := d.objs.VerifySessions.Update(cgid, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("set the verifier of session %d: %w", cgid, err)
	}
	return nil
}

// SetVerifyMode records how the session's learned address a is judged;
// mode 0 removes the record (the default rule).
func (d *Datapath) SetVerifyMode(cgid uint64, a netip.Addr, mode VerifyMode) error {
	k := sluiceLearnedKey{Session: cgid, Addr: a.Unmap().As16()}
	if mode == 0 {
		if err := d.objs.VerifyAddrs.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("forget the verify mode of %s for session %d: %w", a, cgid, err)
		}
		return nil
	}
	// "address" wins over "name" for an address both taught: the user
	// said that entry's address is to be reached by address.
	flags := ebpf.UpdateAny
	if mode == VerifyName {
		flags = ebpf.UpdateNoExist
	}
	if err := d.objs.VerifyAddrs.Update(&k, uint8(mode), flags); err != nil {
		if errors.Is(err, ebpf.ErrKeyExist) {
			return nil
		}
		return fmt.Errorf("set the verify mode of %s for session %d: %w", a, cgid, err)
	}
	return nil
}

// ForgetVerifyMode removes the verify mode of a once the session's learned
// entry for it is gone (ForgetExpired keeps a live one).
func (d *Datapath) ForgetVerifyMode(cgid uint64, a netip.Addr) error {
	k := sluiceLearnedKey{Session: cgid, Addr: a.Unmap().As16()}
	var v sluiceLearnedValue
	if d.objs.Learned.Lookup(&k, &v) == nil {
		return nil
	}
	return d.SetVerifyMode(cgid, a, 0)
}

// TakeOrigin returns and removes the original destination of the
// connection the session's verifier accepted from peer (its client end on
// loopback). ok is false when the datapath holds none: the connection was
// not redirected (a process of the session dialled the verifier itself).
func (d *Datapath) TakeOrigin(cgid uint64, peer netip.AddrPort) (o Origin, ok bool) {
	k := sluiceVerifyKey{Session: cgid, Addr: peer.Addr().As16(), Port: uint32(peer.Port())}
	var v sluiceVerifyOrig
	if err := d.objs.VerifyPending.LookupAndDelete(&k, &v); err != nil {
		return o, false
	}
	var ip [16]byte
	for i, w := range v.Ip {
		// The words hold network-order bytes as the kernel stored them.
		binary.NativeEndian.PutUint32(ip[4*i:], w)
	}
	a := netip.AddrFrom16(ip).Unmap()
	o.Dst = netip.AddrPortFrom(a, ntohs(v.Port))
	o.PID = v.Pid
	n := 0
	for n < len(v.Comm) && v.Comm[n] != 0 {
		n++
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(v.Comm[i])
	}
	o.Comm = string(b)
	return o, true
}

// ntohs reads a port stored by the datapath in network order.
func ntohs(v uint16) uint16 { return htons(v) }

// removeVerify deletes the session's verifier and verify modes.
func (d *Datapath) removeVerify(cgid uint64, errs *[]error) {
	if err := d.SetVerifier(cgid, 0, 0); err != nil {
		*errs = append(*errs, err)
	}
	var k sluiceLearnedKey
	var v uint8
	var keys []sluiceLearnedKey
	it := d.objs.VerifyAddrs.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		*errs = append(*errs, fmt.Errorf("list verify modes of session %d: %w", cgid, err))
	}
	for i := range keys {
		if err := d.objs.VerifyAddrs.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			*errs = append(*errs, fmt.Errorf("delete a verify mode of session %d: %w", cgid, err))
		}
	}
}

// spliceBuf is the send buffer of a spliced socket, half its receive
// buffer (see Splice).
const spliceBuf = 8 << 20

// PrepareSplice makes the in-kernel splice of judged connections ready
// (bpf/verify.h, verify_socks): a datapath this process loaded attaches
// its sk_skb verdict program to the splice map (again: the program of a
// new build replaces the old one), one that was re-opened finds the
// program the load attached. An error says why the verifier copies through
// user space instead.
func (d *Datapath) PrepareSplice() error {
	if d.objs.VerifySocks == nil {
		return errors.New("in-kernel splice: the datapath has no splice map")
	}
	if p := d.objs.SluiceVerifySplice; p != nil {
		err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: d.objs.VerifySocks.FD(), Program: p, Attach: ebpf.AttachSkSKBVerdict})
		if err != nil {
			return fmt.Errorf("in-kernel splice: attach the verdict program: %w", err)
		}
		return nil
	}
	r, err := link.QueryPrograms(link.QueryOptions{Target: d.objs.VerifySocks.FD(), Attach: ebpf.AttachSkSKBVerdict})
	if err != nil {
		return fmt.Errorf("in-kernel splice: %w", err)
	}
	if len(r.Programs) == 0 {
		return errors.New("in-kernel splice: no verdict program is attached to the splice map")
	}
	return nil
}

// Splice puts two connected TCP sockets (descriptors) in the splice map,
// each sending what it receives out of the other, and returns their
// socket cookies. Bytes either one received before are run through the
// verdict at once: the kernel otherwise leaves them queued until the next
// packet comes. b goes in first: with the client's first flight still
// queued in a, nothing reaches b before a is in the map too.
func (d *Datapath) Splice(a, b int) (ca, cb uint64, err error) {
	if ca, err = unix.GetsockoptUint64(a, unix.SOL_SOCKET, unix.SO_COOKIE); err != nil {
		return 0, 0, fmt.Errorf("in-kernel splice: socket cookie: %w", err)
	}
	if cb, err = unix.GetsockoptUint64(b, unix.SOL_SOCKET, unix.SO_COOKIE); err != nil {
		return 0, 0, fmt.Errorf("in-kernel splice: socket cookie: %w", err)
	}
	// The kernel's sending of redirected bytes waits a whole clock tick
	// when the destination's send buffer is full, and bytes queued for
	// it stay charged to the receiving socket, whose window then closes:
	// buffers beyond TCP's autotuning ceiling make both rarer (one process, loopback:
	// 0.9-1.1x of splice(2)'s throughput with them, 0.4-1.0x without).
	for _, fd := range []int{a, b} {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, spliceBuf)
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 2*spliceBuf)
	}
	// The peers first: a socket in the map without one keeps its bytes.
	if err := d.objs.VerifyPeers.Update(ca, sluiceVerifyPeer{Peer: cb}, ebpf.UpdateAny); err != nil {
		return 0, 0, fmt.Errorf("in-kernel splice: %w", err)
	}
	if err := d.objs.VerifyPeers.Update(cb, sluiceVerifyPeer{Peer: ca}, ebpf.UpdateAny); err != nil {
		d.Unsplice(ca, cb)
		return 0, 0, fmt.Errorf("in-kernel splice: %w", err)
	}
	for _, s := range []struct {
		c  uint64
		fd int
	}{{cb, b}, {ca, a}} {
		if err := d.objs.VerifySocks.Update(s.c, uint64(s.fd), ebpf.UpdateAny); err != nil {
			d.Unsplice(ca, cb)
			return 0, 0, fmt.Errorf("in-kernel splice: add a socket: %w", err)
		}
	}
	// SO_RCVLOWAT signals data ready when bytes are queued, which runs
	// the verdict over them.
	for _, fd := range []int{b, a} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, 1); err != nil {
			d.Unsplice(ca, cb)
			return 0, 0, fmt.Errorf("in-kernel splice: flush queued bytes: %w", err)
		}
	}
	return ca, cb, nil
}

// SplicedBytes returns how many bytes the socket with cookie c received
// and the kernel sent out of its peer.
func (d *Datapath) SplicedBytes(c uint64) (uint64, error) {
	var v sluiceVerifyPeer
	if err := d.objs.VerifyPeers.Lookup(c, &v); err != nil {
		return 0, fmt.Errorf("in-kernel splice: bytes of socket %d: %w", c, err)
	}
	return v.Bytes, nil
}

// Unsplice forgets a pair Splice made (its sockets leave the splice map
// when they close).
func (d *Datapath) Unsplice(ca, cb uint64) {
	for _, c := range []uint64{ca, cb} {
		_ = d.objs.VerifySocks.Delete(c)
		_ = d.objs.VerifyPeers.Delete(c)
	}
}
