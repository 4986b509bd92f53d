// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
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
