// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Port rules (the allowlist's "ports"): bpf/sluice.h, struct
// port_rule_key. A rule is an id of the session's choosing (0 means every
// port and is never stored) with a bitmap of ports per protocol; a prefix
// or a learned address carries the id of its rule in cidr_ports or
// learned_ports, maps of their own beside cidrs and learned (whose layouts,
// and so older pins, are unchanged). The kernel consults them only for a
// session with FlagPortRules, so a session without any "ports" pays
// nothing.

// FlagPortRules makes the datapath check the port rules of the session's
// prefixes and learned addresses.
const FlagPortRules = SessionFlags(sluiceSluiceSessionFlagSESSION_PORT_RULES)

// PortSet is a set of ports of one protocol, as the datapath's bitmap.
type PortSet [1024]uint64

// Add puts the ports lo through hi into s.
func (s *PortSet) Add(lo, hi uint16) {
	for p := uint32(lo); p <= uint32(hi); p++ {
		s[p>>6] |= 1 << (p & 63)
	}
}

// Has reports whether port p is in s.
func (s *PortSet) Has(p uint16) bool { return s[p>>6]>>(p&63)&1 != 0 }

// IP protocol numbers of the rules' two bitmaps.
const (
	protoTCP = 6
	protoUDP = 17
)

// SetPortRule stores rule id of the session: tcp and udp are its ports.
func (d *Datapath) SetPortRule(cgid uint64, id uint32, tcp, udp *PortSet) error {
	if id == 0 {
		return fmt.Errorf("set port rule of session %d: rule 0 is every port and is not stored", cgid)
	}
	for _, x := range []struct {
		proto uint32
		set   *PortSet
	}{{protoTCP, tcp}, {protoUDP, udp}} {
		k := sluicePortRuleKey{Session: cgid, Rule: id, Proto: x.proto}
		v := sluicePortBitmap{Bits: *x.set}
		if err := d.objs.PortRules.Update(&k, &v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set port rule %d of session %d: %w", id, cgid, err)
		}
	}
	return nil
}

// SetCIDRPorts gives the session's prefix p the port rule id (0: every
// port). Call it before AddCIDRs for the prefix, so that the prefix is
// never open on more ports than its rule.
func (d *Datapath) SetCIDRPorts(cgid uint64, p netip.Prefix, id uint32) error {
	k := cidrKey(cgid, p)
	if err := d.objs.CidrPorts.Update(&k, &id, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("set the port rule of %s of session %d: %w", p, cgid, err)
	}
	return nil
}

// DeleteCIDRPorts removes the port rules of prefixes; absent ones are
// ignored.
func (d *Datapath) DeleteCIDRPorts(cgid uint64, prefixes []netip.Prefix) error {
	var errs []error
	for _, p := range prefixes {
		k := cidrKey(cgid, p)
		if err := d.objs.CidrPorts.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("delete the port rule of %s of session %d: %w", p, cgid, err))
		}
	}
	return errors.Join(errs...)
}

// LearnedPorts returns the port rule of a learned address of the session
// and whether the learned entry is live at now (CLOCK_BOOTTIME); rule 0
// with live set means every port.
func (d *Datapath) LearnedPorts(cgid uint64, addr netip.Addr, now uint64) (rule uint32, live bool) {
	k := sluiceLearnedKey{Session: cgid, Addr: addr.Unmap().As16()}
	var v sluiceLearnedValue
	if err := d.objs.Learned.Lookup(&k, &v); err != nil || v.Expires <= now {
		return 0, false
	}
	if err := d.objs.LearnedPorts.Lookup(&k, &rule); err != nil {
		return 0, true
	}
	return rule, true
}

// SetLearnedPorts gives a learned address of the session the port rule id;
// 0 removes its rule (every port). Call it before Learn, so that a newly
// learned address is never open on more ports than its rule.
func (d *Datapath) SetLearnedPorts(cgid uint64, addr netip.Addr, id uint32) error {
	k := sluiceLearnedKey{Session: cgid, Addr: addr.Unmap().As16()}
	if id == 0 {
		if err := d.objs.LearnedPorts.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clear the port rule of %s for session %d: %w", addr, cgid, err)
		}
		return nil
	}
	if err := d.objs.LearnedPorts.Update(&k, &id, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("set the port rule of %s for session %d: %w: %w", addr, cgid, ErrMapFull, err)
	}
	return nil
}

// removePortRules deletes every port rule, prefix rule and learned rule of
// the session.
func (d *Datapath) removePortRules(cgid uint64, errs *[]error) {
	var rk sluicePortRuleKey
	var rv sluicePortBitmap
	var rules []sluicePortRuleKey
	it := d.objs.PortRules.Iterate()
	for it.Next(&rk, &rv) {
		if rk.Session == cgid {
			rules = append(rules, rk)
		}
	}
	for i := range rules {
		if err := d.objs.PortRules.Delete(&rules[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			*errs = append(*errs, fmt.Errorf("delete port rule of session %d: %w", cgid, err))
		}
	}
	var ck sluiceCidrKey
	var id uint32
	var cidrs []sluiceCidrKey
	cit := d.objs.CidrPorts.Iterate()
	for cit.Next(&ck, &id) {
		if uint64(ck.SessionHi)<<32|uint64(ck.SessionLo) == cgid {
			cidrs = append(cidrs, ck)
		}
	}
	for i := range cidrs {
		if err := d.objs.CidrPorts.Delete(&cidrs[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			*errs = append(*errs, fmt.Errorf("delete prefix port rule of session %d: %w", cgid, err))
		}
	}
	var lk sluiceLearnedKey
	var learned []sluiceLearnedKey
	lit := d.objs.LearnedPorts.Iterate()
	for lit.Next(&lk, &id) {
		if lk.Session == cgid {
			learned = append(learned, lk)
		}
	}
	for i := range learned {
		if err := d.objs.LearnedPorts.Delete(&learned[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			*errs = append(*errs, fmt.Errorf("delete learned port rule of session %d: %w", cgid, err))
		}
	}
	for _, err := range []error{it.Err(), cit.Err(), lit.Err()} {
		if err != nil {
			*errs = append(*errs, fmt.Errorf("list port rules of session %d: %w", cgid, err))
		}
	}
}

// MaxPortRule is the highest rule id stored for the session (0: none).
func (d *Datapath) MaxPortRule(cgid uint64) uint32 {
	var k sluicePortRuleKey
	var v sluicePortBitmap
	var hi uint32
	it := d.objs.PortRules.Iterate()
	for it.Next(&k, &v) {
		if k.Session == cgid && k.Rule > hi {
			hi = k.Rule
		}
	}
	return hi
}
