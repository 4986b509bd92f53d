// SPDX-License-Identifier: Apache-2.0

package suggest

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/internal/atomicfile"
	"github.com/sluice-dev/sluice/loader"
)

// maxSuggested bounds what a Suggestion remembers: a program making up
// names (DNS tunnelling, a typo in a loop) must not grow sluice's memory
// without end. What is beyond it is counted and reported.
const maxSuggested = 10000

// Suggestion collects what a session was refused (or, with --audit, would
// have been) so that `sluice run --suggest-allowlist FILE` can write the
// allowlist that would have let the command do what it did: the session's
// own entries plus the names it asked for and the addresses it dialled
// without a name. It is a starting point to review, never applied by
// itself: an agent that was refused something is exactly the case where a
// person should look before allowing it.
type Suggestion struct {
	mu      sync.Mutex
	names   map[string]bool
	addrs   map[netip.Addr]bool
	private map[string]bool // names whose answers held addresses refused as rebinding
	unix    map[string]bool // unix sockets refused ("/path", "@name")
	beyond  int             // refusals not remembered (maxSuggested)
	// search is the resolv.conf search list. A stub resolver tries a
	// name under each search domain (with Kubernetes' ndots:5, before the
	// name itself), so a policy that allows api.example.com sees refused
	// queries for api.example.com.svc.cluster.local: noise, not needs.
	search   []string
	expanded int // names left out as search-list expansions
	// withPorts (SetPorts): write the ports each addition was used on;
	// used holds them by the addition's text.
	withPorts bool
	used      map[string]*allowlist.Ports
}

// SetPorts makes the suggestion give each added entry the TCP and UDP
// ports it was refused on (--ports), instead of every port. An addition
// seen without a port (a refused DNS query whose addresses were then never
// dialled where sluice could see the port) keeps every port, and Explain
// says which.
func (s *Suggestion) SetPorts(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.withPorts = on
}

// usePort records that the addition key was used on port of proto
// ("tcp" or "udp"; anything else is not a port rule's).
func (s *Suggestion) usePort(key, proto string, port uint16) {
	if port == 0 || (proto != "tcp" && proto != "udp") {
		return
	}
	p, err := allowlist.ParsePortList(strconv.Itoa(int(port)) + "/" + proto)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == nil {
		s.used = map[string]*allowlist.Ports{}
	}
	if old, ok := s.used[key]; ok {
		p = allowlist.UnionPorts(old, p)
	}
	s.used[key] = p
}

// New is an empty suggestion; search is the resolv.conf search list whose
// expansions of a name are left out (ForHost: this host's).
func New(search []string) *Suggestion {
	return &Suggestion{names: map[string]bool{}, addrs: map[netip.Addr]bool{}, private: map[string]bool{}, unix: map[string]bool{},
		search: search}
}

// ForHost is an empty suggestion with this host's search list.
func ForHost() *Suggestion { return New(dnsresolver.SearchDomains("/etc/resolv.conf")) }

// addName remembers a refused host name. Reverse lookups (.arpa) and
// anything that is not a valid host name are not allowlist material.
func (s *Suggestion) addName(name string) {
	n, err := allowlist.NormalizeName(name)
	if err != nil || n == "arpa" || strings.HasSuffix(n, ".arpa") || allowlist.IsLoopbackName(n) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.names[n] && len(s.names)+len(s.addrs) >= maxSuggested {
		s.beyond++
		return
	}
	s.names[n] = true
}

// addAddr remembers an address dialled without a name the policy allows.
func (s *Suggestion) addAddr(a netip.Addr) {
	a = a.Unmap().WithZone("")
	if !a.IsValid() || allowlist.IsLoopback(a) || a.IsUnspecified() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.addrs[a] && len(s.names)+len(s.addrs) >= maxSuggested {
		s.beyond++
		return
	}
	s.addrs[a] = true
}

// addUnix remembers a refused unix socket. Names that are not valid
// unix_sockets entries (relative paths, unprintable abstract names) are
// left out: an allowlist cannot name them.
func (s *Suggestion) addUnix(name string) {
	n, err := allowlist.ParseUnixSocket(name)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.unix[n] && len(s.unix) >= maxSuggested {
		s.beyond++
		return
	}
	s.unix[n] = true
}

// addPrivate remembers a name whose answer held loopback, private or
// metadata addresses. Those need allow_private, which the Suggestion never
// adds on its own: it is what DNS rebinding looks like.
func (s *Suggestion) addPrivate(name string) {
	n, err := allowlist.NormalizeName(name)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.private) < maxSuggested {
		s.private[n] = true
	}
}

// addProxy remembers a proxy refusal: the requested host, a name or an
// IP literal. A name the policy has, refused for its private addresses,
// is noted instead.
func (s *Suggestion) addProxy(host, reason string) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		s.addAddr(a)
		return
	}
	if strings.Contains(reason, "DNS rebinding") {
		s.addPrivate(host)
		return
	}
	s.addName(host)
}

// AddEvent remembers what an audit event (docs/audit.md) was refused: the
// same events `sluice run` streams from the daemon and `sluice suggest`
// reads from an audit log.
func (s *Suggestion) AddEvent(e audit.Event) {
	switch e.Type {
	case audit.EgressDenied, audit.EgressAudit:
		if name, ok := strings.CutPrefix(e.Dst, "unix:"); ok && e.Proto == "unix" {
			s.addUnix(name)
			return
		}
		// Only "not in the allowlist": an expired learned address belongs
		// to a name the policy already has; sockets have no address.
		if a, err := netip.ParseAddr(e.Dst); err == nil && e.Reason == loader.ReasonNotAllowed.String() {
			s.addAddr(a)
			s.usePort(a.Unmap().String(), e.Proto, e.Port)
		}
	case audit.DNSRefused, audit.DNSAudit:
		if e.Reason == dnsresolver.ReasonNotAllowed {
			s.addName(e.Host)
		}
	case audit.Rebinding, audit.RebindingAudit:
		s.addPrivate(e.Host)
	case audit.ProxyRefused:
		s.addProxy(e.Host, e.Reason)
		// The proxy carries TCP only.
		if a, err := netip.ParseAddr(strings.Trim(e.Host, "[]")); err == nil {
			s.usePort(a.Unmap().String(), "tcp", e.Port)
		} else if n, err := allowlist.NormalizeName(e.Host); err == nil {
			s.usePort(n, "tcp", e.Port)
		}
	}
}

// Additions is what base does not already allow, names then addresses,
// each sorted.
func (s *Suggestion) Additions(base *allowlist.Policy) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names, addrs []string
	s.expanded = 0
	for n := range s.names {
		if _, ok := base.MatchName(n); ok {
			continue
		}
		if s.searchExpansion(n, base) {
			s.expanded++
			continue
		}
		names = append(names, n)
	}
	var as []netip.Addr
	for a := range s.addrs {
		if !base.AllowsAddr(a) {
			as = append(as, a)
		}
	}
	slices.Sort(names)
	slices.SortFunc(as, netip.Addr.Compare)
	for _, a := range as {
		addrs = append(addrs, a.String())
	}
	return append(names, addrs...)
}

// searchExpansion reports whether n is another name with a search domain
// appended, that other name being allowed or suggested itself. The other
// name must have a dot of its own: "db" expanded to db.corp.example is
// the name the program meant, and stays. s.mu is held.
func (s *Suggestion) searchExpansion(n string, base *allowlist.Policy) bool {
	for _, d := range s.search {
		rest, ok := strings.CutSuffix(n, "."+d)
		if !ok || !strings.Contains(rest, ".") {
			continue
		}
		if s.names[rest] {
			return true
		}
		if _, ok := base.MatchName(rest); ok {
			return true
		}
	}
	return false
}

// unixAdditions are the refused unix sockets that base does not list,
// sorted.
func (s *Suggestion) unixAdditions(base *allowlist.Policy) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	listed := base.Local().UnixSockets
	var out []string
	for n := range s.unix {
		if !slices.ContainsFunc(listed, func(p string) bool { return allowlist.MatchUnixSocket(p, n) }) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Render is base plus the additions, as a network_allowlist.json, and
// what was added (unix sockets as "unix:NAME").
func (s *Suggestion) Render(base *allowlist.Policy) (*allowlist.Policy, []string, error) {
	add := s.Additions(base)
	extra, err := s.additionsPolicy(add)
	if err != nil {
		// Every addition was normalised on the way in; this is a bug.
		return nil, nil, err
	}
	merged := base.Merge(extra)
	if us := s.unixAdditions(base); len(us) > 0 {
		l := merged.Local()
		l.UnixSockets = append(l.UnixSockets, us...)
		if merged, err = merged.WithLocal(l); err != nil {
			return nil, nil, err
		}
		for _, u := range us {
			add = append(add, "unix:"+u)
		}
	}
	return merged, add, nil
}

// Write writes base plus the additions to path as a network_allowlist.json
// (replacing it atomically), and tells w what was added.
func (s *Suggestion) Write(path string, base *allowlist.Policy, w io.Writer) error {
	merged, add, err := s.Render(base)
	if err != nil {
		return fmt.Errorf("suggested allowlist: %w", err)
	}
	if err := WriteFile(path, merged.Format()); err != nil {
		return fmt.Errorf("write the suggested allowlist: %w", err)
	}
	s.Explain(w, path, merged, add)
	return nil
}

// Explain tells w what the Suggestion at path holds and what it left out.
func (s *Suggestion) Explain(w io.Writer, path string, merged *allowlist.Policy, add []string) {
	switch len(add) {
	case 0:
		fmt.Fprintf(w, "sluice: suggested allowlist %s: %d entries, nothing added (nothing was refused)\n", path, merged.Len())
	default:
		fmt.Fprintf(w, "sluice: suggested allowlist %s: %d entries, added %s; review it before use\n", path, merged.Len(), strings.Join(add, " "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.private) > 0 {
		var ps []string
		for n := range s.private {
			ps = append(ps, n)
		}
		slices.Sort(ps)
		fmt.Fprintf(w, "sluice: not added: answers for %s held loopback, private or metadata addresses; if that is intended, give the entry \"allow_private\": true\n", strings.Join(ps, " "))
	}
	if s.withPorts {
		if np := s.noPorts(add); len(np) > 0 {
			fmt.Fprintf(w, "sluice: --ports: no port was seen for %s (every port is allowed for it; list its \"ports\" by hand)\n", strings.Join(np, " "))
		}
	}
	if s.expanded > 0 {
		fmt.Fprintf(w, "sluice: left out %d names that are other names with a resolv.conf search domain appended (%s)\n", s.expanded, strings.Join(s.search, " "))
	}
	if s.beyond > 0 {
		fmt.Fprintf(w, "sluice: %d more refused destinations were not remembered (over %d)\n", s.beyond, maxSuggested)
	}
}

// WriteFile replaces path with data (mode 0644; under sudo, owned by
// the invoking user, who is to review and edit it).
func WriteFile(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o644, func(f *os.File) error {
		if uid, gid, ok := sudoIDs(); ok {
			_ = f.Chown(uid, gid)
		}
		return nil
	})
}

// sudoIDs are SUDO_UID and SUDO_GID when sluice runs as root under sudo.
func sudoIDs() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	u, uerr := strconv.Atoi(os.Getenv("SUDO_UID"))
	g, gerr := strconv.Atoi(os.Getenv("SUDO_GID"))
	return u, g, uerr == nil && gerr == nil && u > 0
}

// additionsPolicy is the added entries, with the ports they were used on
// when SetPorts asked for them.
func (s *Suggestion) additionsPolicy(add []string) (*allowlist.Policy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.withPorts {
		return allowlist.FromStrings(add)
	}
	entries := make([]allowlist.Entry, 0, len(add))
	for _, a := range add {
		e, err := allowlist.ParseEntry(a)
		if err != nil {
			return nil, err
		}
		e.Ports = s.used[a]
		entries = append(entries, e)
	}
	return allowlist.New(entries)
}

// noPorts lists the additions that were seen on no port (every port is
// written for them), for Explain; s.mu is held.
func (s *Suggestion) noPorts(add []string) []string {
	var out []string
	for _, a := range add {
		if s.used[a] == nil && !strings.HasPrefix(a, "unix:") {
			out = append(out, a)
		}
	}
	return out
}
