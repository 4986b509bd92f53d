// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"net/netip"
	"sync"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/loader"
)

// portTable is a session's port rules in the datapath (the allowlist's
// "ports"; loader/ports_linux.go). Rules are interned by their ports and
// the entries they name, so a prefix or address with the same rule shares
// an id; ids are never reused within a session, so a refusal's id always
// names the rule that refused it. Rules stay stored until the session
// ends: they are few and small, and an address learned under an old
// policy keeps a valid id.
//
// An address learned for several names gets the union of their rules
// (allowlist.UnionRules): each entry allows what it lists, and one
// address cannot tell which name a connection meant. The union lasts as
// long as the address stays learned.
type portTable struct {
	mu   sync.Mutex
	dp   *loader.Datapath
	id   uint64
	on   bool // the session's policy has ports (loader.FlagPortRules)
	pol  *allowlist.Policy
	byID map[uint32]allowlist.PortRule
	key  map[string]uint32
	next uint32
}

// newPortTable starts a session's table; its ids start after those an
// earlier owner of the session stored (Adopt), so none is overwritten.
func newPortTable(dp *loader.Datapath, id uint64) *portTable {
	return &portTable{dp: dp, id: id, byID: map[uint32]allowlist.PortRule{}, key: map[string]uint32{}, next: dp.MaxPortRule(id) + 1}
}

// intern returns r's id (0: every port), storing it the first time; mu
// is held.
func (t *portTable) intern(r allowlist.PortRule) (uint32, error) {
	if r.Ports == nil {
		return 0, nil
	}
	k := r.Ports.String() + "\x00" + r.Rule
	if id, ok := t.key[k]; ok {
		return id, nil
	}
	id := t.next
	var tcp, udp loader.PortSet
	for _, x := range r.Ports.TCP {
		tcp.Add(x.Lo, x.Hi)
	}
	for _, x := range r.Ports.UDP {
		udp.Add(x.Lo, x.Hi)
	}
	if err := t.dp.SetPortRule(t.id, id, &tcp, &udp); err != nil {
		return 0, err
	}
	t.next++
	t.key[k], t.byID[id] = id, r
	return id, nil
}

// setPolicy writes the port rules of p's prefixes, before their cidrs
// entries exist (AddCIDRs comes after), and says whether the session needs
// loader.FlagPortRules.
func (t *portTable) setPolicy(p *allowlist.Policy) (bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pol = p
	t.on = t.on || p.HasPorts() // once on, learned rules may remain: stay on
	if !t.on {
		return false, nil
	}
	for _, pr := range p.PrefixRules() {
		id, err := t.intern(pr.PortRule)
		if err != nil {
			return true, err
		}
		if err := t.dp.SetCIDRPorts(t.id, pr.Prefix, id); err != nil {
			return true, err
		}
	}
	return true, nil
}

// teach gives address a, about to be learned for name, the union of its
// current rule and name's (dnsresolver.PortLearner). Sessions without
// ports return at once.
func (t *portTable) teach(a netip.Addr, name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on {
		return nil
	}
	r, ok := t.pol.NamePorts(name)
	if !ok {
		// Learned for a reason other than an entry (an ask-mode approval):
		// every port, as the approval allows the address.
		r = allowlist.PortRule{}
	}
	cur, live := t.dp.LearnedPorts(t.id, a, uint64(loader.BootTime()))
	switch {
	case live && cur == 0:
		return nil // every port already
	case live:
		// A rule of an earlier owner of the session (Adopt) is unknown
		// here: replace it rather than guess its ports.
		if old, known := t.byID[cur]; known {
			r = allowlist.UnionRules(old, r)
		}
	}
	id, err := t.intern(r)
	if err != nil {
		return err
	}
	if live && id == cur {
		return nil
	}
	return t.dp.SetLearnedPorts(t.id, a, id)
}

// explain fills in the rule of a ReasonPort event.
func (t *portTable) explain(ev loader.Event) loader.Event {
	if ev.Reason != loader.ReasonPort {
		return ev
	}
	t.mu.Lock()
	r, ok := t.byID[uint32(ev.Args[0])]
	t.mu.Unlock()
	if ok {
		ev.PortRule = r.Explain(ev.Proto, ev.Port)
	}
	return ev
}

// ExplainPort names the port rule of an event the session's port rules
// refused (loader.ReasonPort); other events are returned as they are.
func (s *Session) ExplainPort(ev loader.Event) loader.Event {
	if s == nil || s.ports == nil {
		return ev
	}
	return s.ports.explain(ev)
}
