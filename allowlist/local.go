// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Local is the part of a policy that governs what a session reaches on its
// own machine rather than on the network: unix sockets and loopback ports.
// The zero value is the default: no unix socket beyond the built-in list
// (see the datapath) and every loopback port open.
//
//	{"allowed_hosts": [...],
//	 "unix_sockets": ["/run/user/*/pulse/native", "@/tmp/.X11-unix/X0"],
//	 "loopback": "session", "loopback_ports": [11434]}
type Local struct {
	// UnixSockets are socket paths a session may connect or send to, sorted
	// and without duplicates. A path is absolute; '*' matches any run of
	// characters within one path component (never '/', and never all of
	// "." or ".."). A leading '@' names an abstract socket ("@name" is the
	// address "\0name"), matched exactly.
	UnixSockets []string
	// Loopback is LoopbackAll, LoopbackSession, or "" when the policy does
	// not say (the default, which means all; under a machine policy in
	// "session" mode an unset session policy takes the machine's mode,
	// while an explicit "all" goes beyond it).
	Loopback LoopbackMode
	// LoopbackPorts are loopback ports a session in LoopbackSession mode
	// may reach besides its own listeners, sorted and without duplicates.
	LoopbackPorts []uint16
}

// LoopbackMode says which loopback destinations a session may reach.
type LoopbackMode string

// The loopback modes.
const (
	// LoopbackAll allows every loopback port (the default: local model
	// servers work unconfigured).
	LoopbackAll LoopbackMode = "all"
	// LoopbackSession allows only listeners created inside the session,
	// the listed loopback_ports, and the session's own resolver and proxy.
	LoopbackSession LoopbackMode = "session"
)

// Strict reports whether m is LoopbackSession.
func (m LoopbackMode) Strict() bool { return m == LoopbackSession }

// MaxUnixPath is the longest socket address sluice can judge: sun_path holds
// 108 bytes (107 of name for an abstract socket after its leading NUL).
const MaxUnixPath = 108

// MaxUnixSockets bounds the unix_sockets list of one policy.
const MaxUnixSockets = 256

// ParseUnixSocket checks one unix_sockets entry and returns it in its
// canonical form (trailing '/' removed). Paths must be absolute and clean:
// the datapath compares the address a program passes to connect() with the
// entry as bytes, so "/run/../run/x" or "/run//x" in an entry would never
// match and are rejected rather than silently useless.
func ParseUnixSocket(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty unix socket path")
	}
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("unix socket %q: not valid UTF-8 or contains NUL", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("unix socket %q: contains the control character %U", s, r)
		}
	}
	if name, ok := strings.CutPrefix(s, "@"); ok {
		if name == "" {
			return "", errors.New(`unix socket "@": an abstract socket needs a name after '@'`)
		}
		if len(name) > MaxUnixPath-1 {
			return "", fmt.Errorf("unix socket %q: an abstract name holds at most %d bytes", s, MaxUnixPath-1)
		}
		if strings.Contains(name, "*") {
			return "", fmt.Errorf("unix socket %q: abstract names are matched exactly; '*' is not a wildcard there", s)
		}
		return s, nil
	}
	if !strings.HasPrefix(s, "/") {
		return "", fmt.Errorf("unix socket %q: must be an absolute path, or @name for an abstract socket", s)
	}
	if len(s) > 1 {
		s = strings.TrimSuffix(s, "/")
	}
	if len(s) > MaxUnixPath-1 {
		return "", fmt.Errorf("unix socket %q: a socket path holds at most %d bytes", s, MaxUnixPath-1)
	}
	for _, c := range strings.Split(s[1:], "/") {
		switch c {
		case "":
			return "", fmt.Errorf("unix socket %q: empty path component ('//')", s)
		case ".", "..":
			return "", fmt.Errorf("unix socket %q: %q components are not allowed; write the path without them", s, c)
		}
		if strings.Contains(c, "**") {
			return "", fmt.Errorf("unix socket %q: '**' is not supported; '*' matches within one path component", s)
		}
	}
	return s, nil
}

// UnixGlob reports whether s contains a wildcard.
func UnixGlob(s string) bool { return !strings.HasPrefix(s, "@") && strings.Contains(s, "*") }

// MatchUnixSocket reports whether path, an address as a program passed it
// (an abstract one as "@name"), is matched by pattern, a canonical entry.
func MatchUnixSocket(pattern, path string) bool {
	if strings.HasPrefix(pattern, "@") || !strings.Contains(pattern, "*") {
		return pattern == path
	}
	pc := strings.Split(pattern, "/")
	tc := strings.Split(path, "/")
	if len(pc) != len(tc) {
		return false
	}
	for i := range pc {
		if !matchComponent(pc[i], tc[i]) {
			return false
		}
	}
	return true
}

// matchComponent matches one path component against a pattern whose only
// wildcard is '*' (any run of characters). A wildcard never matches "." or
// "..", which would step out of the directory the pattern names.
func matchComponent(p, t string) bool {
	if p == t {
		return true
	}
	if t == "." || t == ".." || t == "" {
		return false
	}
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return false
	}
	if !strings.HasPrefix(t, parts[0]) {
		return false
	}
	t = t[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(t, mid)
		if i < 0 {
			return false
		}
		t = t[i+len(mid):]
	}
	return strings.HasSuffix(t, last)
}

// ParseLoopbackMode reads the "loopback" value.
func ParseLoopbackMode(s string) (LoopbackMode, error) {
	switch LoopbackMode(s) {
	case LoopbackAll:
		return LoopbackAll, nil
	case LoopbackSession:
		return LoopbackSession, nil
	}
	return "", fmt.Errorf(`"loopback" must be "all" or "session", not %q`, s)
}

// normalize sorts and de-duplicates; it returns a copy.
func (l Local) normalize() Local {
	out := Local{Loopback: l.Loopback}
	out.UnixSockets = slices.Compact(slices.Sorted(slices.Values(l.UnixSockets)))
	out.LoopbackPorts = slices.Compact(slices.Sorted(slices.Values(l.LoopbackPorts)))
	if len(out.UnixSockets) == 0 {
		out.UnixSockets = nil
	}
	if len(out.LoopbackPorts) == 0 {
		out.LoopbackPorts = nil
	}
	return out
}

// IsDefault reports whether l changes nothing from the default.
func (l Local) IsDefault() bool {
	return len(l.UnixSockets) == 0 && !l.Loopback.Strict() && len(l.LoopbackPorts) == 0
}

// Validate checks every field; entries of UnixSockets are canonicalised.
func (l Local) Validate() (Local, error) {
	var errs []error
	out := l
	out.UnixSockets = nil
	for _, s := range l.UnixSockets {
		c, err := ParseUnixSocket(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out.UnixSockets = append(out.UnixSockets, c)
	}
	if len(l.UnixSockets) > MaxUnixSockets {
		errs = append(errs, fmt.Errorf("unix_sockets: %d entries; at most %d", len(l.UnixSockets), MaxUnixSockets))
	}
	if l.Loopback != "" {
		if _, err := ParseLoopbackMode(string(l.Loopback)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range l.LoopbackPorts {
		if p == 0 {
			errs = append(errs, errors.New("loopback_ports: port 0 is not a port"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Local{}, err
	}
	return out.normalize(), nil
}

// merge is the union of two Locals, as when --allow entries join a file:
// both lists joined, and the stricter loopback mode.
func (l Local) merge(o Local) Local {
	m := Local{Loopback: l.Loopback}
	if o.Loopback.Strict() || m.Loopback == "" {
		m.Loopback = o.Loopback
	}
	m.UnixSockets = append(slices.Clone(l.UnixSockets), o.UnixSockets...)
	m.LoopbackPorts = append(slices.Clone(l.LoopbackPorts), o.LoopbackPorts...)
	return m.normalize()
}

// uncoveredLocal lists why a session's Local s goes beyond the machine's m.
func uncoveredLocal(s, m Local) []string {
	var out []string
	for _, u := range s.UnixSockets {
		if !unixCovered(u, m.UnixSockets) {
			out = append(out, fmt.Sprintf("unix_sockets %q: the machine policy does not list it", u))
		}
	}
	if m.Loopback.Strict() {
		if s.Loopback == LoopbackAll {
			out = append(out, `loopback "all": the machine policy says "session"`)
		}
		for _, p := range s.LoopbackPorts {
			if !slices.Contains(m.LoopbackPorts, p) {
				out = append(out, fmt.Sprintf("loopback_ports %d: the machine policy does not list it", p))
			}
		}
	}
	return out
}

// unixCovered: an entry is covered by an identical machine entry or a
// machine glob that matches it. A session glob is read literally (its '*'
// as a character): a machine glob that matches that text matches every
// expansion of it too, since '*' never stands for '/'.
func unixCovered(u string, machine []string) bool {
	for _, m := range machine {
		if m == u || MatchUnixSocket(m, u) {
			return true
		}
	}
	return false
}

// Within returns l limited to what m allows: the unix sockets m covers,
// the stricter loopback mode, and in "session" mode under a strict machine
// only the ports both list. The daemon uses it to give a session the part
// of its request that the machine policy allows.
func (l Local) Within(m Local) Local {
	out := Local{Loopback: l.Loopback}
	for _, u := range l.UnixSockets {
		if unixCovered(u, m.UnixSockets) {
			out.UnixSockets = append(out.UnixSockets, u)
		}
	}
	out.LoopbackPorts = l.LoopbackPorts
	if m.Loopback.Strict() {
		out.Loopback = LoopbackSession
		out.LoopbackPorts = nil
		ports := l.LoopbackPorts
		if !l.Loopback.Strict() {
			ports = m.LoopbackPorts
		}
		for _, p := range ports {
			if slices.Contains(m.LoopbackPorts, p) {
				out.LoopbackPorts = append(out.LoopbackPorts, p)
			}
		}
	}
	return out.normalize()
}

// Local returns the policy's local part (a copy).
func (p *Policy) Local() Local {
	if p == nil {
		return Local{}
	}
	return p.local.normalize()
}

// WithLocal returns a copy of p whose local part is l. l must be valid
// (see Validate); an invalid l is an error and p is unchanged.
func (p *Policy) WithLocal(l Local) (*Policy, error) {
	v, err := l.Validate()
	if err != nil {
		return nil, err
	}
	b := newBuilder()
	b.addPolicy(p)
	np := b.policy()
	np.local = v
	return np, nil
}
