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
	for _, it := range p.items {
		e := it.entry()
		if reason := uncovered(machine, e, ms); reason != "" {
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
	return p, nil
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
