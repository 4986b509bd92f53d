// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"net/netip"
	"strings"
	"testing"
)

func mustParseFile(t *testing.T, s string) *Policy {
	t.Helper()
	p, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%s): %v", s, err)
	}
	return p
}

func TestParsePortsFile(t *testing.T) {
	p := mustParseFile(t, `{"allowed_hosts": ["plain.example.com",
		{"host": "db.internal.example", "ports": [5432]},
		{"host": "203.0.113.0/24", "ports": ["22/tcp", "8000-8100"]},
		{"host": "*.example.org", "ports": ["53/udp", "443", "1000-2000/udp"]}]}`)
	cases := []struct {
		name  string
		proto uint8
		port  uint16
		want  bool
	}{
		{"plain.example.com", ProtoTCP, 1, true},
		{"plain.example.com", ProtoUDP, 65535, true},
		{"db.internal.example", ProtoTCP, 5432, true},
		{"db.internal.example", ProtoUDP, 5432, true},
		{"db.internal.example", ProtoTCP, 5433, false},
		{"a.example.org", ProtoUDP, 53, true},
		{"a.example.org", ProtoTCP, 53, false},
		{"a.example.org", ProtoTCP, 443, true},
		{"a.example.org", ProtoUDP, 1500, true},
		{"a.example.org", ProtoTCP, 1500, false},
	}
	for _, c := range cases {
		r, ok := p.NamePorts(c.name)
		if !ok {
			t.Fatalf("NamePorts(%s): not allowed", c.name)
		}
		if got := r.Ports.Allows(c.proto, c.port); got != c.want {
			t.Errorf("%s %d/%d: allowed %v, want %v (rule %s)", c.name, c.port, c.proto, got, c.want, r.Ports)
		}
	}
	r, ok := p.AddrPorts(netip.MustParseAddr("203.0.113.5"))
	if !ok || r.Ports.Allows(ProtoTCP, 23) || !r.Ports.Allows(ProtoTCP, 22) || r.Ports.Allows(ProtoUDP, 22) || !r.Ports.Allows(ProtoUDP, 8050) {
		t.Fatalf("AddrPorts(203.0.113.5) = %+v, %v", r, ok)
	}
	want := `port 23 is not in the rule "203.0.113.0/24" ports 22/tcp,8000-8100`
	if got := r.Explain(ProtoTCP, 23); got != want {
		t.Errorf("Explain = %q, want %q", got, want)
	}
	if !p.HasPorts() || mustParseFile(t, `{"allowed_hosts": ["a.example.com"]}`).HasPorts() {
		t.Error("HasPorts wrong")
	}
}

func TestParsePortsErrors(t *testing.T) {
	for _, c := range []struct{ ports, want string }{
		{`[0]`, "0 is not a port"},
		{`[65536]`, "65536 is not a port"},
		{`["100-10"]`, "reversed"},
		{`["22/sctp"]`, "unknown protocol"},
		{`[]`, "empty"},
		{`"22"`, "must be a list"},
		{`[true]`, "not a port"},
		{`["x"]`, "not a port number"},
		{`[-1]`, "a port number is missing"},
		{`[22.5]`, "not a port number"},
	} {
		_, err := Parse([]byte(`{"allowed_hosts": [{"host": "db.example.com", "ports": ` + c.ports + `}]}`))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "db.example.com") {
			t.Errorf("ports %s: error %v, want one naming the entry and %q", c.ports, err, c.want)
		}
	}
	_, err := Parse([]byte(`{"allowed_hosts": [{"host": "db.example.com", "port": [22]}]}`))
	if err == nil || !strings.Contains(err.Error(), `unknown key "port"`) {
		t.Errorf("unknown key: %v", err)
	}
}

func TestPortsSetOps(t *testing.T) {
	a, _ := ParsePortList("22/tcp,8000-8100,53/udp")
	b, _ := ParsePortList("8050-9000/tcp,22,53")
	if got := IntersectPorts(a, b).String(); got != "22/tcp,53/udp,8050-8100/tcp" {
		t.Errorf("intersect = %s", got)
	}
	if got := UnionPorts(a, b).String(); got != "22,53,8000-8100,8101-9000/tcp" {
		t.Errorf("union = %s", got)
	}
	if UnionPorts(a, nil) != nil || IntersectPorts(nil, nil) != nil || !IntersectPorts(nil, a).Equal(a) {
		t.Error("nil (every port) handling wrong")
	}
	x, _ := ParsePortList("1-10/tcp")
	y, _ := ParsePortList("11-20/udp")
	if !IntersectPorts(x, y).Empty() {
		t.Error("disjoint intersection not empty")
	}
	if got := mergeRanges([]PortRange{{5, 9}, {1, 4}, {10, 10}, {20, 30}}); len(got) != 2 || got[0] != (PortRange{1, 10}) {
		t.Errorf("merge = %v", got)
	}
}

func TestPortsRoundTrip(t *testing.T) {
	src := `{"allowed_hosts": [{"host": "db.internal.example", "ports": [5432]}, {"host": "203.0.113.0/24", "ports": ["22/tcp", "8000-8100"]}, "x.example.com"]}`
	p := mustParseFile(t, src)
	q := mustParseFile(t, string(p.Format()))
	if string(q.Format()) != string(p.Format()) {
		t.Fatalf("round trip changed:\n%s\n%s", p.Format(), q.Format())
	}
	if !strings.Contains(string(p.Format()), `"ports": ["22/tcp", "8000-8100"]`) || !strings.Contains(string(p.Format()), `"ports": [5432]`) {
		t.Errorf("Format = %s", p.Format())
	}
	// New accepts what Entries returns, ports included.
	n, err := New(p.Entries())
	if err != nil || string(n.Format()) != string(p.Format()) {
		t.Errorf("New(Entries) = %v, %s", err, n.Format())
	}
}

func TestPortsUnionOfEntries(t *testing.T) {
	p := mustParseFile(t, `{"allowed_hosts": [{"host": "db.example.com", "ports": [5432]}, {"host": "*.example.com", "ports": [443]},
		{"host": "203.0.113.0/24", "ports": [22]}, {"host": "203.0.113.5", "ports": [443]}, {"host": "203.0.113.6"}]}`)
	r, _ := p.NamePorts("db.example.com")
	if r.Ports.String() != "443,5432" || !strings.Contains(r.Rule, `"db.example.com" ports 5432`) || !strings.Contains(r.Rule, `"*.example.com" ports 443`) {
		t.Errorf("NamePorts(db) = %+v", r)
	}
	byPrefix := map[string]string{}
	for _, pr := range p.PrefixRules() {
		byPrefix[pr.Prefix.String()] = pr.Ports.String()
	}
	want := map[string]string{"203.0.113.0/24": "22", "203.0.113.5/32": "22,443", "203.0.113.6/32": "all"}
	for k, v := range want {
		if byPrefix[k] != v {
			t.Errorf("PrefixRules[%s] = %q, want %q", k, byPrefix[k], v)
		}
	}
}

func TestNarrowPorts(t *testing.T) {
	machine := mustParseFile(t, `{"allowed_hosts": [{"host": "db.example.com", "ports": [5432, "6000-6010"]}, "free.example.com",
		{"host": "203.0.113.0/24", "ports": ["22/tcp", "8000-8100"]}, {"host": "203.0.113.128/25", "ports": [443]}]}`)
	cases := []struct {
		session string
		check   func(*Policy) string
		err     string
	}{
		// No ports in the session: the machine's.
		{`"db.example.com"`, nameIs("db.example.com", "5432,6000-6010"), ""},
		// Narrower: kept.
		{`{"host": "db.example.com", "ports": ["5432/tcp"]}`, nameIs("db.example.com", "5432/tcp"), ""},
		// Wider: cut to the machine's.
		{`{"host": "db.example.com", "ports": ["5000-6005"]}`, nameIs("db.example.com", "5432,6000-6005"), ""},
		// Disjoint: refused.
		{`{"host": "db.example.com", "ports": [80]}`, nil, "none of its ports"},
		// A machine entry without ports: the session's.
		{`{"host": "free.example.com", "ports": [80]}`, nameIs("free.example.com", "80"), ""},
		{`{"host": "203.0.113.5", "ports": ["20-30"]}`, addrIs("203.0.113.5", "22/tcp"), ""},
		// The /24 in the session: the /25 inside it keeps its union.
		{`"203.0.113.0/24"`, func(p *Policy) string {
			return addrIs("203.0.113.5", "22/tcp,8000-8100")(p) + addrIs("203.0.113.200", "22/tcp,443,8000-8100")(p)
		}, ""},
		{`{"host": "203.0.113.0/24", "ports": [443]}`, func(p *Policy) string {
			if _, ok := p.AddrPorts(netip.MustParseAddr("203.0.113.5")); ok {
				return "203.0.113.5 allowed although no port is left there"
			}
			return addrIs("203.0.113.200", "443")(p)
		}, ""},
	}
	for _, c := range cases {
		s := mustParseFile(t, `{"allowed_hosts": [`+c.session+`]}`)
		n, err := s.Narrow(machine)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.session, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.session, err)
			continue
		}
		if msg := c.check(n); msg != "" {
			t.Errorf("%s: %s", c.session, msg)
		}
	}
}

func nameIs(name, ports string) func(*Policy) string {
	return func(p *Policy) string {
		r, ok := p.NamePorts(name)
		if !ok || r.Ports.String() != ports {
			return name + " has ports " + r.Ports.String() + ", want " + ports
		}
		return ""
	}
}

func addrIs(a, ports string) func(*Policy) string {
	return func(p *Policy) string {
		r, ok := p.AddrPorts(netip.MustParseAddr(a))
		if !ok || r.Ports.String() != ports {
			return a + " has ports " + r.Ports.String() + ", want " + ports
		}
		return ""
	}
}
