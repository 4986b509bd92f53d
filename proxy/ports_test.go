// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestDecidePorts: an entry's "ports" bound what the proxy dials, for
// names and addresses alike, before any resolution, with a 403 (SOCKS5
// "not allowed") that names the rule.
func TestDecidePorts(t *testing.T) {
	pol, err := allowlist.Parse([]byte(`{"allowed_hosts": [{"host": "db.test", "ports": [5432]},
		{"host": "203.0.113.0/24", "ports": ["22/tcp", "8000-8100"]}, {"host": "udp.test", "ports": ["53/udp"]}, "free.test"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resolver := newFakeResolver(map[string]string{"db.test": "198.51.100.7", "free.test": "198.51.100.8", "udp.test": "198.51.100.9"})
	p, err := New(Config{Policy: func() *allowlist.Policy { return pol }, Resolve: resolver.Resolve})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port uint16
		why  string // "" allowed
	}{
		{"db.test", 5432, ""},
		{"db.test", 443, `port 443 is not in the rule "db.test" ports 5432`},
		{"203.0.113.5", 22, ""},
		{"203.0.113.5", 8050, ""},
		{"203.0.113.5", 23, `port 23 is not in the rule "203.0.113.0/24" ports 22/tcp,8000-8100`},
		{"udp.test", 53, `port 53 is not in the rule "udp.test" ports 53/udp`}, // the proxy carries TCP only
		{"free.test", 1, ""},
		{"127.0.0.1", 9, ""}, // loopback: every port
	} {
		before := len(resolver.Asked())
		tg, err := newTarget(tc.host, tc.port)
		if err != nil {
			t.Fatal(err)
		}
		ev := Event{Protocol: ProtoConnect, Host: tc.host, Port: tc.port}
		_, f := p.decide(context.Background(), &ev, tg)
		if tc.why == "" {
			if f != nil {
				t.Errorf("%s:%d refused: %v", tc.host, tc.port, f)
			}
			continue
		}
		if f == nil || f.kind != EventRefused || f.status != http.StatusForbidden || f.socks != socksNotAllowed || !strings.Contains(f.reason, tc.why) {
			t.Errorf("%s:%d: %+v, want a 403 refusal %q", tc.host, tc.port, f, tc.why)
		}
		if n := len(resolver.Asked()) - before; n != 0 {
			t.Errorf("%s:%d: refused port resolved the name (%d queries)", tc.host, tc.port, n)
		}
	}
}
