// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestIntersectPorts: a session narrows a machine entry's ports, never
// widens them; Request refuses a session entry none of whose ports the
// machine allows.
func TestIntersectPorts(t *testing.T) {
	machine, err := allowlist.Parse([]byte(`{"allowed_hosts": [{"host": "db.example.test", "ports": [5432, 6432]},
		{"host": "198.51.100.0/24", "ports": ["22/tcp"]}, "free.example.test"]}`))
	if err != nil {
		t.Fatal(err)
	}
	requested, err := allowlist.Parse([]byte(`{"allowed_hosts": [{"host": "db.example.test", "ports": ["5432/tcp", "7000"]},
		"198.51.100.7", {"host": "free.example.test", "ports": [443]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := Intersect(requested, machine)
	for _, c := range []struct{ name, want string }{{"db.example.test", "5432/tcp"}, {"free.example.test", "443"}} {
		if r, ok := got.NamePorts(c.name); !ok || r.Ports.String() != c.want {
			t.Errorf("%s: ports %s, want %s", c.name, r.Ports, c.want)
		}
	}
	if r, ok := got.AddrPorts(netip.MustParseAddr("198.51.100.7")); !ok || r.Ports.String() != "22/tcp" {
		t.Errorf("198.51.100.7: ports %s, want 22/tcp (the machine's)", r.Ports)
	}
	if _, err := Request(Caller{UID: 1000}, requested, machine); err != nil {
		t.Errorf("a narrowing request refused: %v", err)
	}
	wider, _ := allowlist.Parse([]byte(`{"allowed_hosts": [{"host": "db.example.test", "ports": [80]}]}`))
	if _, err := Request(Caller{UID: 1000}, wider, machine); err == nil || !strings.Contains(err.Error(), "none of its ports") {
		t.Errorf("a request outside the machine's ports: %v", err)
	}
	if r, ok := Intersect(wider, machine).NamePorts("db.example.test"); ok {
		t.Errorf("Intersect kept db.example.test with ports %s", r.Ports)
	}
}
