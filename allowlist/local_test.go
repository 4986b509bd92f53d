// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"slices"
	"strings"
	"testing"
)

func TestParseUnixSocket(t *testing.T) {
	good := map[string]string{
		"/var/run/docker.sock":     "/var/run/docker.sock",
		"/run/user/*/pulse/native": "/run/user/*/pulse/native",
		"/tmp/dir/":                "/tmp/dir",
		"@/tmp/.X11-unix/X0":       "@/tmp/.X11-unix/X0",
	}
	for in, want := range good {
		got, err := ParseUnixSocket(in)
		if err != nil || got != want {
			t.Errorf("ParseUnixSocket(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "docker.sock", "/run/../x", "/run/./x", "/run//x", "@", "@a*", "/a/**/b",
		"/" + strings.Repeat("a", 108), "/a\x00b", "/a\nb"} {
		if _, err := ParseUnixSocket(bad); err == nil {
			t.Errorf("ParseUnixSocket(%q) accepted", bad)
		}
	}
}

func TestMatchUnixSocket(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"/var/run/docker.sock", "/var/run/docker.sock", true},
		{"/var/run/docker.sock", "/run/docker.sock", false},
		{"/run/user/*/pulse/native", "/run/user/1000/pulse/native", true},
		{"/run/user/*/pulse/native", "/run/user/1000/x/pulse/native", false},
		{"/run/user/*/pulse/native", "/run/user/../pulse/native", false},
		{"/run/user/*/pulse/native", "/run/user//pulse/native", false},
		{"/tmp/*.sock", "/tmp/a.sock", true},
		{"/tmp/*.sock", "/tmp/a.socket", false},
		{"/tmp/a*b*c", "/tmp/abc", true},
		{"/tmp/a*b*c", "/tmp/axxbyyc", true},
		{"/tmp/a*b*c", "/tmp/axxcyyb", false},
		{"@name", "@name", true},
		{"@name", "@nam", false},
	}
	for _, c := range cases {
		if got := MatchUnixSocket(c.pattern, c.path); got != c.want {
			t.Errorf("MatchUnixSocket(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

func TestParseLocal(t *testing.T) {
	p, err := Parse([]byte(`{"allowed_hosts": ["example.com"], "unix_sockets": ["/run/user/*/pulse/native", "/a.sock", "/a.sock"],
		"loopback": "session", "loopback_ports": [11434, 8080, 11434]}`))
	if err != nil {
		t.Fatal(err)
	}
	l := p.Local()
	if !slices.Equal(l.UnixSockets, []string{"/a.sock", "/run/user/*/pulse/native"}) || l.Loopback != LoopbackSession ||
		!slices.Equal(l.LoopbackPorts, []uint16{8080, 11434}) {
		t.Fatalf("Local() = %+v", l)
	}
	for _, pretty := range []bool{false, true} {
		text := p.encode(pretty)
		back, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(encode(%v)) = %v\n%s", pretty, err, text)
		}
		if bl := back.Local(); !slices.Equal(bl.UnixSockets, l.UnixSockets) || bl.Loopback != l.Loopback || !slices.Equal(bl.LoopbackPorts, l.LoopbackPorts) {
			t.Errorf("round trip (pretty %v) lost the local part: %+v\n%s", pretty, bl, text)
		}
	}
	if def, _ := Parse([]byte(`{"allowed_hosts": []}`)); def.Local().Loopback.Strict() || !def.Local().IsDefault() {
		t.Errorf("default Local() = %+v", def.Local())
	}
	for _, bad := range []string{
		`{"unix_sockets": "/a"}`, `{"unix_sockets": ["rel"]}`, `{"loopback": "none"}`, `{"loopback": true}`,
		`{"loopback_ports": [0]}`, `{"loopback_ports": [70000]}`, `{"loopback": "all", "loopback": "all"}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}

func TestNarrowLocal(t *testing.T) {
	machine, err := Parse([]byte(`{"allowed_hosts": [], "unix_sockets": ["/run/user/*/pulse/native", "/a.sock"], "loopback": "session", "loopback_ports": [11434]}`))
	if err != nil {
		t.Fatal(err)
	}
	ok := []string{
		`{"unix_sockets": ["/run/user/1000/pulse/native"], "loopback": "session"}`,
		`{"unix_sockets": ["/run/user/*/pulse/native", "/a.sock"], "loopback": "session", "loopback_ports": [11434]}`,
	}
	for _, s := range ok {
		p, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Narrow(machine); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []string{
		`{"unix_sockets": ["/var/run/docker.sock"], "loopback": "session"}`,
		`{"unix_sockets": ["/run/user/*/*/native"], "loopback": "session"}`,
		`{"loopback": "all"}`,
		`{"loopback": "session", "loopback_ports": [22]}`,
	}
	for _, s := range bad {
		p, err := Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Narrow(machine); err == nil {
			t.Errorf("%s narrows %s", s, machine.Format())
		}
	}
	// A session that does not say takes the machine's mode.
	if p, _ := Parse([]byte(`{"allowed_hosts": []}`)); p != nil {
		if _, err := p.Narrow(machine); err != nil {
			t.Errorf("a session without a loopback setting under a strict machine: %v", err)
		}
	}
	// Under a machine in the default mode, any loopback setting narrows.
	open, _ := Parse([]byte(`{"allowed_hosts": []}`))
	p, _ := Parse([]byte(`{"loopback": "session", "loopback_ports": [22]}`))
	if _, err := p.Narrow(open); err != nil {
		t.Errorf("session mode under a default machine: %v", err)
	}
}

func TestLocalWithinAndMerge(t *testing.T) {
	m := Local{UnixSockets: []string{"/run/user/*/pulse/native"}, Loopback: LoopbackSession, LoopbackPorts: []uint16{11434}}
	s := Local{UnixSockets: []string{"/run/user/1/pulse/native", "/var/run/docker.sock"}, Loopback: LoopbackAll, LoopbackPorts: []uint16{22}}
	w := s.Within(m)
	if !slices.Equal(w.UnixSockets, []string{"/run/user/1/pulse/native"}) || !w.Loopback.Strict() || !slices.Equal(w.LoopbackPorts, []uint16{11434}) {
		t.Errorf("Within = %+v", w)
	}
	a, _ := FromStrings([]string{"example.com"})
	b, _ := a.WithLocal(Local{Loopback: LoopbackSession, LoopbackPorts: []uint16{1}})
	merged := a.Merge(b)
	if !merged.Local().Loopback.Strict() || !slices.Equal(merged.Local().LoopbackPorts, []uint16{1}) || merged.Len() != 1 {
		t.Errorf("Merge lost the local part: %+v", merged.Local())
	}
	if kept, _ := b.Without("nobody"); !kept.Local().Loopback.Strict() {
		t.Errorf("Without lost the local part")
	}
	if _, err := a.WithLocal(Local{UnixSockets: []string{"relative"}}); err == nil {
		t.Errorf("WithLocal accepted a relative path")
	}
}
