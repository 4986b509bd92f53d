// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Policy is a set of allowlist entries. It is immutable once built, so it is
// safe for concurrent use and can be shared between sessions; methods that
// change a policy return a new one. A nil *Policy is a valid empty policy.
//
// Each entry remembers every request for it (a grant: an owner, possibly
// none, and whether that owner allows private addresses), so that removing
// one owner with Without takes away exactly what that owner added.
type Policy struct {
	items    []item
	exact    map[string]int // host name -> index in items
	wild     map[string]int // wildcard domain -> index in items
	prefixes []netip.Prefix // every KindPrefix target, in entry order
	hidden   []string       // "hidden_paths", in file order
	local    Local          // unix sockets and loopback (local.go), normalized
	docker   bool           // "docker": true (docker.go)
}

// grant is one request for an entry. owner "" means written without owner.
type grant struct {
	owner   string
	private bool
	ports   *Ports // nil: every port
	verify  Verify
}

type item struct {
	t      target
	grants []grant // never empty, first request first
}

// verify is the strongest rule any grant asked for: "name" over "address"
// over the default, so that merging never loosens a check someone wrote.
func (it item) verify() Verify {
	v := VerifyDefault
	for _, g := range it.grants {
		if g.verify == VerifyName {
			return VerifyName
		}
		if g.verify == VerifyAddress {
			v = VerifyAddress
		}
	}
	return v
}

func (it item) allowPrivate() bool {
	for _, g := range it.grants {
		if g.private {
			return true
		}
	}
	return false
}

// entry builds the exported view; it copies, so callers cannot reach into
// the policy.
func (it item) entry() Entry {
	e := Entry{Kind: it.t.kind, Name: it.t.name, Prefix: it.t.prefix, AllowPrivate: it.allowPrivate(), Ports: it.ports().clone(), Verify: it.verify()}
	if len(it.grants) == 1 && it.grants[0].owner == "" {
		return e
	}
	e.Owners = make([]string, len(it.grants))
	for i, g := range it.grants {
		e.Owners[i] = g.owner
	}
	return e
}

// builder collects grants, merging duplicates: an entry keeps the position of
// its first occurrence, and one owner's repeated requests merge into one
// grant that allows private addresses if any of them did.
type builder struct {
	items  []item
	index  map[target]int
	hidden []string
	local  Local
	docker bool
}

func newBuilder() *builder { return &builder{index: make(map[target]int)} }

func (b *builder) add(t target, g grant) {
	i, ok := b.index[t]
	if !ok {
		b.index[t] = len(b.items)
		b.items = append(b.items, item{t: t, grants: []grant{g}})
		return
	}
	gs := b.items[i].grants
	for j := range gs {
		if gs[j].owner == g.owner {
			gs[j].private = gs[j].private || g.private
			gs[j].ports = UnionPorts(gs[j].ports, g.ports)
			if g.verify == VerifyName || gs[j].verify == VerifyDefault {
				gs[j].verify = g.verify
			}
			return
		}
	}
	b.items[i].grants = append(gs, g)
}

// addPolicy copies every grant of p; the builder never shares slices with p,
// which keeps p immutable.
func (b *builder) addPolicy(p *Policy) {
	if p == nil {
		return
	}
	for _, it := range p.items {
		for _, g := range it.grants {
			b.add(it.t, g)
		}
	}
	b.addHidden(p.hidden)
	b.local = b.local.merge(p.local)
	b.docker = b.docker || p.docker
}

func (b *builder) policy() *Policy {
	p := &Policy{
		items:  b.items,
		exact:  make(map[string]int),
		wild:   make(map[string]int),
		hidden: b.hidden,
		local:  b.local.normalize(),
		docker: b.docker,
	}
	for i, it := range b.items {
		switch it.t.kind {
		case KindHost:
			p.exact[it.t.name] = i
		case KindWildcard:
			p.wild[it.t.name] = i
		case KindPrefix:
			p.prefixes = append(p.prefixes, it.t.prefix)
		}
	}
	return p
}

// New builds a policy from entries, such as those returned by ParseEntry or
// by another policy's Entries. Names are normalized and prefixes masked, so a
// hand-built Entry need not be canonical. Each owner in Owners (or, for nil
// Owners, the entry without owner) receives the entry's AllowPrivate; to keep
// per-owner differences across policies, combine them with Merge and Without
// rather than rebuilding from Entries. On any invalid entry New returns a nil
// policy and an *Error naming every invalid entry by index.
func New(entries []Entry) (*Policy, error) {
	b := newBuilder()
	var errs []error
	for i, e := range entries {
		t, err := entryTarget(e)
		if err == nil {
			err = checkGrantOptions(t, e.AllowPrivate)
		}
		if err == nil {
			err = checkPorts(e.Ports)
		}
		for _, o := range e.Owners {
			if err == nil && o != "" {
				err = checkOwner(o)
			}
		}
		if err != nil {
			errs = append(errs, &EntryError{Index: i, Entry: e.String(), Err: err})
			continue
		}
		if err := checkVerify(t, e.Verify); err != nil {
			errs = append(errs, &EntryError{Index: i, Entry: e.String(), Err: err})
			continue
		}
		if len(e.Owners) == 0 {
			b.add(t, grant{private: e.AllowPrivate, ports: e.Ports.normal(), verify: e.Verify})
		}
		for _, o := range e.Owners {
			b.add(t, grant{owner: o, private: e.AllowPrivate, ports: e.Ports.normal(), verify: e.Verify})
		}
	}
	if err := problems(errs); err != nil {
		return nil, err
	}
	return b.policy(), nil
}

// entryTarget validates and canonicalises a caller-built entry by reading
// its text form back, so that New accepts exactly what ParseEntry accepts.
func entryTarget(e Entry) (target, error) {
	var t target
	var err error
	switch e.Kind {
	case KindHost, KindWildcard:
		t, err = parseTarget(e.String())
	case KindPrefix:
		t, err = normalizePrefix(e.Prefix)
	default:
		return target{}, fmt.Errorf("invalid kind %v", e.Kind)
	}
	if err != nil {
		return target{}, err
	}
	if t.kind != e.Kind {
		return target{}, fmt.Errorf("%q is a %v entry, not a %v entry", e.String(), t.kind, e.Kind)
	}
	return t, nil
}

// checkGrantOptions rejects allow_private on addresses: it governs which DNS
// answers may be learned, and an IP or CIDR entry is not learned from DNS.
func checkGrantOptions(t target, private bool) error {
	if private && t.kind == KindPrefix {
		return errors.New("allow_private applies to host names only: an IP or CIDR entry already allows exactly its addresses")
	}
	return nil
}

const maxOwnerLen = 256

// checkOwner keeps owners printable, because they appear in messages, the
// audit log and the file.
func checkOwner(o string) error {
	switch {
	case o == "":
		return errors.New("empty owner: leave out \"owner\" for an entry without one")
	case len(o) > maxOwnerLen:
		return fmt.Errorf("owner is %d bytes long; at most %d", len(o), maxOwnerLen)
	case !utf8.ValidString(o):
		return errors.New("owner is not valid UTF-8")
	case strings.TrimSpace(o) != o:
		return fmt.Errorf("owner %q has leading or trailing white space", o)
	}
	for _, r := range o {
		if unicode.IsControl(r) {
			return fmt.Errorf("owner %q contains the control character %U", o, r)
		}
	}
	return nil
}

// FromStrings builds a policy from entries given on the command line
// (--allow), without owner or options. On any invalid entry it returns a nil
// policy and an *Error whose *EntryError values give each bad entry and its
// 0-based position in entries.
func FromStrings(entries []string) (*Policy, error) {
	b := newBuilder()
	var errs []error
	for i, s := range entries {
		t, err := parseTarget(s)
		if err != nil {
			errs = append(errs, &EntryError{Index: i, Entry: s, Err: err})
			continue
		}
		b.add(t, grant{})
	}
	if err := problems(errs); err != nil {
		return nil, err
	}
	return b.policy(), nil
}

// Len returns the number of entries after de-duplication.
func (p *Policy) Len() int {
	if p == nil {
		return 0
	}
	return len(p.items)
}

// Entries returns every entry in a stable order: the order in which each
// entry first appeared. Loopback, which is always allowed, is not among them.
func (p *Policy) Entries() []Entry {
	return p.filter(func(Kind) bool { return true })
}

// Names returns the host and wildcard entries, in entry order.
func (p *Policy) Names() []Entry {
	return p.filter(func(k Kind) bool { return k != KindPrefix })
}

func (p *Policy) filter(keep func(Kind) bool) []Entry {
	if p == nil {
		return nil
	}
	var out []Entry
	for _, it := range p.items {
		if keep(it.t.kind) {
			out = append(out, it.entry())
		}
	}
	return out
}

// Prefixes returns the prefixes of all KindPrefix entries (IP literals as
// /32 or /128), in entry order, for loading into the datapath.
func (p *Policy) Prefixes() []netip.Prefix {
	if p == nil {
		return nil
	}
	return append([]netip.Prefix(nil), p.prefixes...)
}

// MatchName returns the entry that allows name, if any. name is normalized
// first (case, trailing dot, Unicode), and an invalid name matches nothing.
// An exact host entry wins over wildcards, and among wildcards the one with
// the longest domain wins, so its AllowPrivate is the one that applies.
// A wildcard never matches its own domain: *.example.com does not allow
// example.com. IP literals are not names: use AllowsAddr for them.
func (p *Policy) MatchName(name string) (Entry, bool) {
	if p == nil || len(p.items) == 0 {
		return Entry{}, false
	}
	n, err := NormalizeName(name)
	if err != nil {
		return Entry{}, false
	}
	if i, ok := p.exact[n]; ok {
		return p.items[i].entry(), true
	}
	if i, ok := p.wildcardOver(n, false); ok {
		return p.items[i].entry(), true
	}
	return Entry{}, false
}

// wildcardOver finds the most specific wildcard whose domain is a proper
// suffix of name, or equal to name when orEqual is set.
func (p *Policy) wildcardOver(name string, orEqual bool) (int, bool) {
	if orEqual {
		if i, ok := p.wild[name]; ok {
			return i, true
		}
	}
	for s := name; ; {
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			return 0, false
		}
		s = s[dot+1:]
		if i, ok := p.wild[s]; ok {
			return i, true
		}
	}
}

// AllowsAddr reports whether a is inside one of the policy's prefixes. An
// IPv4-mapped IPv6 address is checked as IPv4, like the datapath does, and an
// IPv6 prefix never matches an IPv4 address. Loopback is not special here: the
// datapath always allows loopback before consulting the policy, so callers
// that decide connections must do the same (see IsLoopback).
func (p *Policy) AllowsAddr(a netip.Addr) bool {
	if p == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Merge returns the union of p and o, as when --allow entries are added to an
// allowlist file: p's entries come first, and an entry in both keeps p's
// position and the owners and options of both.
func (p *Policy) Merge(o *Policy) *Policy {
	b := newBuilder()
	b.addPolicy(p)
	b.addPolicy(o)
	return b.policy()
}

// Without returns p without what owner asked for. An entry that only owner
// asked for is dropped; an entry that others asked for too (including a
// request without owner) is kept with owner removed, and is reported in kept
// (as it is in the returned policy), so a caller can tell the user why it
// is still allowed. AllowPrivate is recomputed from the remaining requests.
// Without("") removes the requests made without an owner.
func (p *Policy) Without(owner string) (_ *Policy, kept []Entry) {
	b := newBuilder()
	if p == nil {
		return b.policy(), nil
	}
	b.addHidden(p.hidden)
	var keptTargets []target
	for _, it := range p.items {
		removed := false
		for _, g := range it.grants {
			if g.owner == owner {
				removed = true
				continue
			}
			b.add(it.t, g)
		}
		if removed && len(it.grants) > 1 {
			keptTargets = append(keptTargets, it.t)
		}
	}
	np := b.policy()
	np.local = p.local
	np.docker = p.docker
	for _, t := range keptTargets {
		kept = append(kept, np.items[b.index[t]].entry())
	}
	return np, kept
}
