// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"fmt"
	"net/netip"
	"strings"
)

// Exceeding is a session entry that the machine policy does not cover.
type Exceeding struct {
	Entry Entry
	// Local, when set, names an exceeding unix_sockets, loopback or
	// loopback_ports setting instead of Entry.
	Local  string
	Reason string
}

// NarrowError lists every session entry that exceeds the machine policy.
type NarrowError struct {
	Exceeding []Exceeding
}

// Error names every exceeding entry with its reason, one per line.
func (e *NarrowError) Error() string {
	var b strings.Builder
	b.WriteString("the session policy goes beyond the machine policy:")
	for _, x := range e.Exceeding {
		what := x.Local
		if what == "" {
			what = x.Entry.String()
		}
		fmt.Fprintf(&b, "\n\t%s: %s", what, x.Reason)
	}
	return b.String()
}

// Narrow checks that p, a session policy, only narrows machine, the policy
// of the host, and returns p if so. A session entry is covered when:
//
//   - a host name is allowed by machine.MatchName, and if it sets
//     AllowPrivate, the machine entry that governs the name allows private
//     addresses too;
//   - a wildcard *.d has a machine wildcard *.d or *.parent-of-d, and if it
//     sets AllowPrivate, that wildcard and every machine entry below d allow
//     private addresses too (otherwise the session would get private answers
//     for a name where the machine gives none);
//   - a prefix lies inside the union of the machine prefixes and loopback
//     (loopback is always allowed). Name entries never cover prefixes, nor
//     prefixes names.
//
// The returned policy is p with each entry's ports intersected with the
// ports the machine allows it (session ports ∩ machine ports; see
// machinePieces): a session may narrow a machine entry's ports, never
// widen them. An entry none of whose ports the machine allows exceeds it.
//
// Otherwise Narrow returns a nil policy and a *NarrowError naming every
// entry that exceeds the machine policy. A nil machine is the empty policy.
func (p *Policy) Narrow(machine *Policy) (*Policy, error) {
	if p == nil {
		p = newBuilder().policy()
	}
	if machine == nil {
		machine = newBuilder().policy()
	}
	ms := append(machine.Prefixes(), loopback4, loopback6)
	var ex []Exceeding
	b := newBuilder()
	b.addHidden(p.hidden)
	for _, it := range p.items {
		e := it.entry()
		if reason := uncovered(machine, e, ms); reason != "" {
			ex = append(ex, Exceeding{Entry: e, Reason: reason})
			continue
		}
		if reason := narrowPorts(b, machine, it); reason != "" {
			ex = append(ex, Exceeding{Entry: e, Reason: reason})
		}
	}
	for _, r := range uncoveredLocal(p.local, machine.local) {
		what, why, _ := strings.Cut(r, ": ")
		ex = append(ex, Exceeding{Local: what, Reason: why})
	}
	if len(ex) > 0 {
		return nil, &NarrowError{Exceeding: ex}
	}
	if !machine.HasPorts() {
		// Every machine entry allows every port: p is its own intersection.
		return p, nil
	}
	np := b.policy()
	np.local = p.local
	return np, nil
}

// piece is a part of a session entry's target with the ports the machine
// allows there.
type piece struct {
	t     target
	ports *Ports
}

// machinePieces splits a covered session target into the parts on which
// the machine policy m has one port rule each, with that rule: a name gets
// the union of the machine entries that allow it (for a wildcard, of the
// machine wildcards at or above its domain, which cover every name under
// it); a prefix gets the union of the machine prefixes that contain it,
// and, for every machine prefix inside it, that prefix with its own union
// (the datapath's longest match then finds, for each address, the session
// ports within the union of the machine prefixes containing it). Loopback
// is a machine prefix with every port.
func machinePieces(m *Policy, t target) []piece {
	switch t.kind {
	case KindHost:
		r, _ := m.NamePorts(t.name)
		return []piece{{t, r.Ports}}
	case KindWildcard:
		var ps *Ports
		first := true
		for s := t.name; ; {
			if i, ok := m.wild[s]; ok {
				if first {
					ps, first = m.items[i].ports(), false
				} else {
					ps = UnionPorts(ps, m.items[i].ports())
				}
			}
			dot := strings.IndexByte(s, '.')
			if dot < 0 {
				break
			}
			s = s[dot+1:]
		}
		return []piece{{t, ps}}
	}
	type mp struct {
		p     netip.Prefix
		ports *Ports
	}
	var all []mp
	for _, it := range m.items {
		if it.t.kind == KindPrefix {
			all = append(all, mp{it.t.prefix, it.ports()})
		}
	}
	all = append(all, mp{loopback4, nil}, mp{loopback6, nil})
	restricted := false
	for _, x := range all {
		if x.ports != nil && x.p.Overlaps(t.prefix) {
			restricted = true
		}
	}
	if !restricted {
		return []piece{{t, nil}}
	}
	// within is the union of the machine prefixes containing q (ok false: none).
	within := func(q netip.Prefix) (u *Ports, ok bool) {
		for _, x := range all {
			if x.p.Bits() <= q.Bits() && x.p.Contains(q.Addr()) {
				if !ok {
					u, ok = x.ports, true
				} else {
					u = UnionPorts(u, x.ports)
				}
			}
		}
		return u, ok
	}
	var out []piece
	if u, ok := within(t.prefix); ok {
		out = append(out, piece{t, u})
	}
	for _, x := range all {
		if x.p.Bits() > t.prefix.Bits() && t.prefix.Contains(x.p.Addr()) {
			u, _ := within(x.p)
			out = append(out, piece{target{kind: KindPrefix, prefix: x.p}, u})
		}
	}
	return out
}

// narrowPorts adds it to b with each grant's ports intersected with the
// machine's, or says why none of its ports is left.
func narrowPorts(b *builder, m *Policy, it item) string {
	pieces := machinePieces(m, it.t)
	for _, g := range it.grants {
		added := false
		for _, pc := range pieces {
			ng := g
			ng.ports = IntersectPorts(g.ports, pc.ports)
			if ng.ports.Empty() {
				continue
			}
			b.add(pc.t, ng)
			added = true
		}
		if !added {
			var mps []string
			for _, pc := range pieces {
				mps = append(mps, pc.ports.String())
			}
			return fmt.Sprintf("none of its ports (%s) is allowed by the machine policy, which allows ports %s there", g.ports, strings.Join(mps, "; "))
		}
	}
	return ""
}

// uncovered says why the machine policy m does not cover e, or "" if it does.
func uncovered(m *Policy, e Entry, prefixes []netip.Prefix) string {
	switch e.Kind {
	case KindHost:
		me, ok := m.MatchName(e.Name)
		if !ok {
			return "the machine policy does not allow this host"
		}
		if e.AllowPrivate && !me.AllowPrivate {
			return fmt.Sprintf("allow_private is set, but the machine entry %s does not allow private addresses", me)
		}
		if r := widerVerify(e.Verify, me.Verify, me.String()); r != "" {
			return r
		}
	case KindWildcard:
		i, ok := m.wildcardOver(e.Name, true)
		if !ok {
			return fmt.Sprintf("no machine wildcard covers it (it needs *.%s or a broader wildcard)", e.Name)
		}
		if r := widerVerify(e.Verify, m.items[i].verify(), m.items[i].t.String()); r != "" {
			return r
		}
		if !e.AllowPrivate {
			return ""
		}
		if !m.items[i].allowPrivate() {
			return fmt.Sprintf("allow_private is set, but the machine entry %s does not allow private addresses", m.items[i].t)
		}
		for _, it := range m.items {
			if it.t.kind != KindPrefix && under(it.t.name, e.Name) && !it.allowPrivate() {
				return fmt.Sprintf("allow_private is set, but the machine entry %s below it does not allow private addresses", it.t)
			}
		}
	case KindPrefix:
		if !coveredBy(e.Prefix, prefixes) {
			return "no machine prefix contains it"
		}
	}
	return ""
}

// widerVerify says why a session entry's "verify" loosens the machine
// entry's, or "": "address" judges more connections by address alone than
// the default does, and the default more than "name".
func widerVerify(session, machine Verify, me string) string {
	rank := func(v Verify) int {
		switch v {
		case VerifyName:
			return 2
		case VerifyAddress:
			return 0
		}
		return 1
	}
	if rank(session) < rank(machine) {
		m := string(machine)
		if m == "" {
			m = "the default rule"
		}
		return fmt.Sprintf("\"verify\": %q checks fewer connections than the machine entry %s (%s)", string(session), me, m)
	}
	return ""
}
