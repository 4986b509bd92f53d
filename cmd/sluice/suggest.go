package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/allowlist"
)

// maxSuggested bounds what a suggestion remembers: a program making up
// names (DNS tunnelling, a typo in a loop) must not grow sluice's memory
// without end. What is beyond it is counted and reported.
const maxSuggested = 10000

// suggestion collects what a session was refused (or, with --audit, would
// have been) so that `sluice run --suggest-allowlist FILE` can write the
// allowlist that would have let the command do what it did: the session's
// own entries plus the names it asked for and the addresses it dialled
// without a name. It is a starting point to review, never applied by
// itself: an agent that was refused something is exactly the case where a
// person should look before allowing it.
type suggestion struct {
	mu      sync.Mutex
	names   map[string]bool
	addrs   map[netip.Addr]bool
	private map[string]bool // names whose answers held addresses refused as rebinding
	beyond  int             // refusals not remembered (maxSuggested)
}

func newSuggestion() *suggestion {
	return &suggestion{names: map[string]bool{}, addrs: map[netip.Addr]bool{}, private: map[string]bool{}}
}

// addName remembers a refused host name. Reverse lookups (.arpa) and
// anything that is not a valid host name are not allowlist material.
func (s *suggestion) addName(name string) {
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
func (s *suggestion) addAddr(a netip.Addr) {
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

// addPrivate remembers a name whose answer held loopback, private or
// metadata addresses. Those need allow_private, which the suggestion never
// adds on its own: it is what DNS rebinding looks like.
func (s *suggestion) addPrivate(name string) {
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

// additions is what base does not already allow, names then addresses,
// each sorted.
func (s *suggestion) additions(base *allowlist.Policy) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names, addrs []string
	for n := range s.names {
		if _, ok := base.MatchName(n); !ok {
			names = append(names, n)
		}
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

// write writes base plus the additions to path as a network_allowlist.json
// (replacing it atomically), and tells w what was added.
func (s *suggestion) write(path string, base *allowlist.Policy, w io.Writer) error {
	add := s.additions(base)
	extra, err := allowlist.FromStrings(add)
	if err != nil {
		// Every addition was normalised on the way in; this is a bug.
		return fmt.Errorf("--suggest-allowlist: %w", err)
	}
	merged := base.Merge(extra)
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--suggest-allowlist: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(merged.Format()); err != nil {
		tmp.Close()
		return fmt.Errorf("--suggest-allowlist: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("--suggest-allowlist: %w", err)
	}
	// Under sudo the file is the invoking user's to review and edit.
	if uid, gid, ok := sudoIDs(); ok {
		_ = tmp.Chown(uid, gid)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--suggest-allowlist: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--suggest-allowlist: %w", err)
	}
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
	if s.beyond > 0 {
		fmt.Fprintf(w, "sluice: %d more refused destinations were not remembered (over %d)\n", s.beyond, maxSuggested)
	}
	return nil
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
