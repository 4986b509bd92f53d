// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Protocol numbers of the transports a port rule governs (IPPROTO_*).
const (
	ProtoTCP = 6
	ProtoUDP = 17
)

// PortRange is the ports Lo through Hi, both included, 1 <= Lo <= Hi.
type PortRange struct{ Lo, Hi uint16 }

// Ports is the set of TCP and UDP ports an entry allows (its "ports"). A
// nil *Ports means every port of every protocol, what an entry without
// "ports" allows; an empty, non-nil Ports allows none and only arises from
// Intersect. Both lists are sorted and merged (no two ranges touch), so
// equal sets have equal values.
type Ports struct {
	TCP, UDP []PortRange
}

// MaxPortRanges bounds the ranges of one entry's "ports", so that a policy
// file cannot make a rule that costs user space unbounded work.
const MaxPortRanges = 256

// ParsePorts reads an entry's "ports" value: a list whose elements are
// port numbers (5432), or strings "N", "N/tcp", "N/udp", "A-B", "A-B/tcp",
// "A-B/udp". A port without a protocol is both TCP and UDP. The list may
// not be empty (leave "ports" out for every port).
func ParsePorts(raw json.RawMessage) (*Ports, error) {
	var list []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, fmt.Errorf(`"ports" must be a list of ports such as [443, "22/tcp", "8000-8100"], not %s`, jsonKind(raw))
	}
	if len(list) == 0 {
		return nil, errors.New(`"ports" is empty: list the ports, or leave "ports" out to allow every port`)
	}
	if len(list) > MaxPortRanges {
		return nil, fmt.Errorf(`"ports" has %d elements; at most %d`, len(list), MaxPortRanges)
	}
	p := &Ports{}
	for _, el := range list {
		var text string
		switch el[0] {
		case '"':
			if err := json.Unmarshal(el, &text); err != nil {
				return nil, fmt.Errorf("ports: %w", err)
			}
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			text = string(el)
		default:
			return nil, fmt.Errorf("ports: %s is not a port: give a number or a string such as \"22/tcp\" or \"8000-8100\"", jsonKind(el))
		}
		if err := p.add(text); err != nil {
			return nil, fmt.Errorf("ports: %q: %w", text, err)
		}
	}
	p.TCP, p.UDP = mergeRanges(p.TCP), mergeRanges(p.UDP)
	return p, nil
}

// ParsePortList reads ports written as text, comma-separated ("22/tcp,
// 8000-8100"), as String writes them.
func ParsePortList(s string) (*Ports, error) {
	p := &Ports{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if err := p.add(f); err != nil {
			return nil, fmt.Errorf("ports: %q: %w", f, err)
		}
	}
	p.TCP, p.UDP = mergeRanges(p.TCP), mergeRanges(p.UDP)
	return p, nil
}

// add parses one element and appends it, unmerged.
func (p *Ports) add(s string) error {
	spec, proto, hasProto := strings.Cut(s, "/")
	tcp, udp := true, true
	if hasProto {
		switch proto {
		case "tcp":
			udp = false
		case "udp":
			tcp = false
		default:
			return fmt.Errorf("unknown protocol %q: write /tcp, /udp, or nothing for both", proto)
		}
	}
	loS, hiS, isRange := strings.Cut(spec, "-")
	lo, err := parsePort(loS)
	if err != nil {
		return err
	}
	hi := lo
	if isRange {
		if hi, err = parsePort(hiS); err != nil {
			return err
		}
		if hi < lo {
			return fmt.Errorf("the range %d-%d is reversed: write %d-%d", lo, hi, hi, lo)
		}
	}
	r := PortRange{Lo: lo, Hi: hi}
	if tcp {
		p.TCP = append(p.TCP, r)
	}
	if udp {
		p.UDP = append(p.UDP, r)
	}
	return nil
}

func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("a port number is missing")
	}
	n, err := strconv.Atoi(s)
	if err != nil || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("%d is not a port (1-65535)", n)
	}
	return uint16(n), nil
}

// mergeRanges sorts rs and joins the ranges that overlap or touch.
func mergeRanges(rs []PortRange) []PortRange {
	if len(rs) == 0 {
		return nil
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b PortRange) int { return int(a.Lo) - int(b.Lo) })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if uint32(r.Lo) <= uint32(last.Hi)+1 {
			last.Hi = max(last.Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// intersectRanges is the ports in both merged lists.
func intersectRanges(a, b []PortRange) []PortRange {
	var out []PortRange
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].Lo, b[j].Lo), min(a[i].Hi, b[j].Hi)
		if lo <= hi {
			out = append(out, PortRange{lo, hi})
		}
		if a[i].Hi < b[j].Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtractRanges is the ports of merged a not in merged b.
func subtractRanges(a, b []PortRange) []PortRange {
	var out []PortRange
	for _, r := range a {
		lo := uint32(r.Lo)
		for _, s := range b {
			if uint32(s.Hi) < lo || s.Lo > r.Hi {
				continue
			}
			if uint32(s.Lo) > lo {
				out = append(out, PortRange{uint16(lo), s.Lo - 1})
			}
			lo = uint32(s.Hi) + 1
		}
		if lo <= uint32(r.Hi) {
			out = append(out, PortRange{uint16(lo), r.Hi})
		}
	}
	return out
}

// All reports whether p allows every port (nil).
func (p *Ports) All() bool { return p == nil }

// Empty reports whether p allows no port at all.
func (p *Ports) Empty() bool { return p != nil && len(p.TCP) == 0 && len(p.UDP) == 0 }

// Allows reports whether p allows port of proto (ProtoTCP or ProtoUDP).
// Every other protocol is allowed only by a nil p.
func (p *Ports) Allows(proto uint8, port uint16) bool {
	if p == nil {
		return true
	}
	var rs []PortRange
	switch proto {
	case ProtoTCP:
		rs = p.TCP
	case ProtoUDP:
		rs = p.UDP
	default:
		return false
	}
	for _, r := range rs {
		if port >= r.Lo && port <= r.Hi {
			return true
		}
	}
	return false
}

// Equal reports whether p and o allow the same ports.
func (p *Ports) Equal(o *Ports) bool {
	if p == nil || o == nil {
		return p == nil && o == nil
	}
	return slices.Equal(p.TCP, o.TCP) && slices.Equal(p.UDP, o.UDP)
}

// UnionPorts is the ports either allows: nil (every port) if either is.
func UnionPorts(a, b *Ports) *Ports {
	if a == nil || b == nil {
		return nil
	}
	return &Ports{
		TCP: mergeRanges(append(slices.Clone(a.TCP), b.TCP...)),
		UDP: mergeRanges(append(slices.Clone(a.UDP), b.UDP...)),
	}
}

// IntersectPorts is the ports both allow; nil only if both are nil.
func IntersectPorts(a, b *Ports) *Ports {
	switch {
	case a == nil:
		return b.clone()
	case b == nil:
		return a.clone()
	}
	return &Ports{TCP: intersectRanges(a.TCP, b.TCP), UDP: intersectRanges(a.UDP, b.UDP)}
}

func (p *Ports) clone() *Ports {
	if p == nil {
		return nil
	}
	return &Ports{TCP: slices.Clone(p.TCP), UDP: slices.Clone(p.UDP)}
}

// Elements returns the ports in the file's notation, sorted by port:
// ranges both protocols share without a protocol ("8000-8100"), the others
// with theirs ("22/tcp"). Nil for every port.
func (p *Ports) Elements() []string {
	if p == nil {
		return nil
	}
	both := intersectRanges(p.TCP, p.UDP)
	type el struct {
		r     PortRange
		proto string
	}
	var els []el
	for _, r := range both {
		els = append(els, el{r, ""})
	}
	for _, r := range subtractRanges(p.TCP, both) {
		els = append(els, el{r, "/tcp"})
	}
	for _, r := range subtractRanges(p.UDP, both) {
		els = append(els, el{r, "/udp"})
	}
	slices.SortStableFunc(els, func(a, b el) int { return int(a.r.Lo) - int(b.r.Lo) })
	out := make([]string, len(els))
	for i, e := range els {
		s := strconv.Itoa(int(e.r.Lo))
		if e.r.Hi != e.r.Lo {
			s += "-" + strconv.Itoa(int(e.r.Hi))
		}
		out[i] = s + e.proto
	}
	return out
}

// String is the ports comma-separated ("22/tcp,8000-8100"), "all" for
// every port and "none" for the empty set.
func (p *Ports) String() string {
	switch {
	case p == nil:
		return "all"
	case p.Empty():
		return "none"
	}
	return strings.Join(p.Elements(), ",")
}

// PortRule is the port rule that governs a destination: the ports and the
// entries they come from, for the kernel's tables and for refusal lines.
type PortRule struct {
	Ports *Ports
	// Rule describes the entries, as a refusal names them: `the rule
	// "203.0.113.0/24" ports 22/tcp,8000-8100`.
	Rule  string
	parts []string // the entries of Rule, each `"name" ports list`
}

// UnionRules is the rule of an address that two rules allow (one learned
// for two names): the union of the ports, naming both rules' entries. The
// zero PortRule (every port) absorbs the other.
func UnionRules(a, b PortRule) PortRule {
	u := UnionPorts(a.Ports, b.Ports)
	if u == nil {
		return PortRule{}
	}
	parts := slices.Clone(a.parts)
	for _, p := range b.parts {
		if !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	return PortRule{Ports: u, Rule: ruleText(parts), parts: parts}
}

func ruleText(parts []string) string {
	if len(parts) == 1 {
		return "the rule " + parts[0]
	}
	return "the rules " + strings.Join(parts, ", ")
}

// Explain is the reason of a refusal of port/proto by r: `port 23 is not
// in the rule "203.0.113.0/24" ports 22/tcp,8000-8100`.
func (r PortRule) Explain(proto uint8, port uint16) string {
	if proto != ProtoTCP && proto != ProtoUDP {
		return fmt.Sprintf("protocol %d is not allowed by %s (it lists TCP and UDP ports only)", proto, r.Rule)
	}
	return fmt.Sprintf("port %d is not in %s", port, r.Rule)
}

// describe names entries with port rules for Explain.
func describe(ts []target, ps []*Ports) []string {
	var parts []string
	for i, t := range ts {
		if ps[i] == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%q ports %s", t.String(), ps[i]))
	}
	return parts
}

// ports of an item: the union of its grants' ports.
func (it item) ports() *Ports {
	p := it.grants[0].ports
	for _, g := range it.grants[1:] {
		p = UnionPorts(p, g.ports)
	}
	return p
}

// HasPorts reports whether any entry of p has a port rule.
func (p *Policy) HasPorts() bool {
	if p == nil {
		return false
	}
	for _, it := range p.items {
		if it.ports() != nil {
			return true
		}
	}
	return false
}

// NamePorts is the port rule for the addresses learned for name: the
// union of the ports of every entry that allows it (the exact host and
// every wildcard above it), because each entry allows what it lists. ok is
// false when no entry allows the name.
func (p *Policy) NamePorts(name string) (rule PortRule, ok bool) {
	if p == nil {
		return PortRule{}, false
	}
	n, err := NormalizeName(name)
	if err != nil {
		return PortRule{}, false
	}
	var ts []target
	var ps []*Ports
	if i, found := p.exact[n]; found {
		ts, ps = append(ts, p.items[i].t), append(ps, p.items[i].ports())
	}
	for s := n; ; {
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			break
		}
		s = s[dot+1:]
		if i, found := p.wild[s]; found {
			ts, ps = append(ts, p.items[i].t), append(ps, p.items[i].ports())
		}
	}
	return union(ts, ps)
}

func union(ts []target, ps []*Ports) (PortRule, bool) {
	if len(ts) == 0 {
		return PortRule{}, false
	}
	u := ps[0]
	for _, x := range ps[1:] {
		u = UnionPorts(u, x)
	}
	if u == nil {
		return PortRule{}, true
	}
	parts := describe(ts, ps)
	return PortRule{Ports: u, Rule: ruleText(parts), parts: parts}, true
}

// AddrPorts is the port rule for a, an address inside the policy's
// prefixes: the union of the ports of every prefix that contains it. ok is
// false when no prefix contains a.
func (p *Policy) AddrPorts(a netip.Addr) (PortRule, bool) {
	if p == nil || !a.IsValid() {
		return PortRule{}, false
	}
	a = a.Unmap().WithZone("")
	var ts []target
	var ps []*Ports
	for _, it := range p.items {
		if it.t.kind == KindPrefix && it.t.prefix.Contains(a) {
			ts, ps = append(ts, it.t), append(ps, it.ports())
		}
	}
	return union(ts, ps)
}

// PrefixRule is one prefix of a policy with the port rule of its
// addresses.
type PrefixRule struct {
	Prefix netip.Prefix
	PortRule
}

// PrefixRules returns every prefix with the port rule of its own
// addresses: the union of its ports and those of every prefix containing
// it, so that a longest-prefix match (the datapath's) finds the union of
// all the entries that allow an address.
func (p *Policy) PrefixRules() []PrefixRule {
	if p == nil {
		return nil
	}
	var out []PrefixRule
	for _, it := range p.items {
		if it.t.kind != KindPrefix {
			continue
		}
		var ts []target
		var ps []*Ports
		for _, o := range p.items {
			if o.t.kind == KindPrefix && o.t.prefix.Bits() <= it.t.prefix.Bits() && o.t.prefix.Contains(it.t.prefix.Addr()) {
				ts, ps = append(ts, o.t), append(ps, o.ports())
			}
		}
		r, _ := union(ts, ps)
		out = append(out, PrefixRule{Prefix: it.t.prefix, PortRule: r})
	}
	return out
}

// checkPorts validates a caller-built Ports: every range 1 <= Lo <= Hi,
// and not the empty set (which would allow nothing and is no entry).
func checkPorts(p *Ports) error {
	if p == nil {
		return nil
	}
	if p.Empty() {
		return errors.New(`"ports" is empty: list the ports, or leave "ports" out to allow every port`)
	}
	for _, rs := range [][]PortRange{p.TCP, p.UDP} {
		for _, r := range rs {
			if r.Lo == 0 || r.Hi < r.Lo {
				return fmt.Errorf("invalid port range %d-%d", r.Lo, r.Hi)
			}
		}
	}
	return nil
}

// normal is a copy of p with its ranges sorted and merged.
func (p *Ports) normal() *Ports {
	if p == nil {
		return nil
	}
	return &Ports{TCP: mergeRanges(p.TCP), UDP: mergeRanges(p.UDP)}
}
