// SPDX-License-Identifier: Apache-2.0

package sniprobe

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Counter indexes of sp_counters, as bpf/sniprobe.c counts them.
const (
	CounterMarked = iota
	CounterAllowed
	CounterRefused
	CounterEgressDrop
	CounterSockoptRefused
	CounterCorked
	CounterUnhashed
	CounterTFORefused
	counterMax
)

// Probe is the prototype attached to one cgroup.
type Probe struct {
	objs  sniprobeObjects
	links []link.Link
}

// Options tune the prototype.
type Options struct {
	// KeepInSockhash keeps a verified socket in the sockhash (its every
	// sendmsg then runs the sk_msg program, and its reads go through
	// tcp_bpf_recvmsg) instead of taking it out once its first flight
	// passed.
	KeepInSockhash bool
}

// Attach loads the prototype's object and attaches its programs to the
// cgroup at cgroupPath (a cgroup v2 directory).
func Attach(cgroupPath string, o Options) (*Probe, error) {
	p := &Probe{}
	spec, err := loadSniprobe()
	if err != nil {
		return nil, fmt.Errorf("load sniprobe spec: %w", err)
	}
	keep := uint32(0)
	if o.KeepInSockhash {
		keep = 1
	}
	v, ok := spec.Variables["sp_keep"]
	if !ok {
		return nil, errors.New("load sniprobe: no sp_keep in the object")
	}
	if err := v.Set(keep); err != nil {
		return nil, fmt.Errorf("set sp_keep: %w", err)
	}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load sniprobe: %+v", ve)
		}
		return nil, fmt.Errorf("load sniprobe: %w", err)
	}
	for _, a := range []struct {
		t   ebpf.AttachType
		prg *ebpf.Program
	}{
		{ebpf.AttachCGroupInet4Connect, p.objs.SpConnect4},
		{ebpf.AttachCGroupSockOps, p.objs.SpSockops},
		{ebpf.AttachCGroupInetEgress, p.objs.SpEgress},
		{ebpf.AttachCGroupSetsockopt, p.objs.SpSetsockopt},
	} {
		l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: a.t, Program: a.prg})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %v to %s: %w", a.t, cgroupPath, err)
		}
		p.links = append(p.links, l)
	}
	if err := link.RawAttachProgram(link.RawAttachProgramOptions{
		Target: p.objs.SpSocks.FD(), Program: p.objs.SpMsg, Attach: ebpf.AttachSkMsgVerdict,
	}); err != nil {
		p.Close()
		return nil, fmt.Errorf("attach sk_msg to its sockhash: %w", err)
	}
	return p, nil
}

// Check makes TCP connections to addr:443 checked by name.
func (p *Probe) Check(addr netip.Addr) error {
	if !addr.Is4() {
		return fmt.Errorf("check %s: the prototype handles IPv4 only", addr)
	}
	k := addr.As4()
	if err := p.objs.SpAddrs.Put(k, uint8(1)); err != nil {
		return fmt.Errorf("check %s: %w", addr, err)
	}
	return nil
}

// Allow lets a checked connection to addr name name in its SNI.
func (p *Probe) Allow(addr netip.Addr, name string) error {
	k, err := nameKey(addr, name)
	if err != nil {
		return err
	}
	if err := p.objs.SpNames.Put(k, uint8(1)); err != nil {
		return fmt.Errorf("allow %s for %s: %w", name, addr, err)
	}
	return nil
}

func nameKey(addr netip.Addr, name string) (sniprobeSpNameKey, error) {
	var k sniprobeSpNameKey
	name = strings.ToLower(name)
	if !addr.Is4() || len(name) == 0 || len(name) >= len(k.Name) {
		return k, fmt.Errorf("name key %s %q: IPv4 and 1-%d bytes only", addr, name, len(k.Name)-1)
	}
	a := addr.As4()
	// The kernel compares the address as the socket holds it (network
	// order), so it is stored by its bytes.
	k.Daddr = uint32(a[0]) | uint32(a[1])<<8 | uint32(a[2])<<16 | uint32(a[3])<<24
	for i := 0; i < len(name); i++ {
		k.Name[i] = int8(name[i])
	}
	return k, nil
}

// Counter reads one of the prototype's counters.
func (p *Probe) Counter(i int) (uint64, error) {
	var v uint64
	if i < 0 || i >= counterMax {
		return 0, fmt.Errorf("counter %d: out of range", i)
	}
	if err := p.objs.SpCounters.Lookup(uint32(i), &v); err != nil {
		return 0, fmt.Errorf("counter %d: %w", i, err)
	}
	return v, nil
}

// LastName is the SNI the sk_msg program found last.
func (p *Probe) LastName() (string, error) {
	var k sniprobeSpNameKey
	if err := p.objs.SpLast.Lookup(uint32(0), &k); err != nil {
		return "", fmt.Errorf("last name: %w", err)
	}
	b := make([]byte, 0, len(k.Name))
	for _, c := range k.Name {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b), nil
}

// Close detaches and unloads the prototype.
func (p *Probe) Close() {
	for _, l := range p.links {
		_ = l.Close()
	}
	_ = p.objs.Close()
}
