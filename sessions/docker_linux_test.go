// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

// TestJudgeRegistry: a pull's or push's registry is judged as the
// engine's connection to it would be, by host and by the TCP port the
// engine dials (the one named, else 443; 80 too for a port-less loopback
// registry, which the engine falls back to plain HTTP for); loopback
// needs an entry of its own.
func TestJudgeRegistry(t *testing.T) {
	p, err := allowlist.Parse([]byte(`{"allowed_hosts": [
		"ghcr.io",
		{"host": "registry.example.test", "ports": [443, 5000]},
		{"host": "*.mirror.example.test", "ports": ["8000-8100/tcp"]},
		{"host": "dns.example.test", "ports": ["5000/udp"]},
		{"host": "127.0.0.1", "ports": [5000]},
		{"host": "198.51.100.0/24", "ports": [443]},
		{"host": "2001:db8::1", "ports": [5000]},
		{"host": "localhost", "ports": [443]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{
		"ghcr.io":                    "",
		"ghcr.io:5000":               "",
		"registry.example.test":      "",
		"registry.example.test:5000": "",
		"registry.example.test:443":  "",
		"registry.example.test:5001": `port 5001 is not in the rule "registry.example.test" ports 443,5000`,
		"a.mirror.example.test:8080": "",
		"a.mirror.example.test":      "port 443 is not in",
		"dns.example.test:5000":      "port 5000 is not in",
		"127.0.0.1:5000":             "",
		"127.0.0.1:5001":             "port 5001 is not in",
		"127.0.0.1":                  "port 443 is not in",
		"127.0.0.2:5000":             "the registry 127.0.0.2:5000 is not in the session's allowlist",
		"198.51.100.7":               "",
		"198.51.100.7:443":           "",
		"198.51.100.7:5000":          "port 5000 is not in",
		"[2001:db8::1]:5000":         "",
		"[2001:db8::1]:443":          "port 443 is not in",
		"[2001:db8::2]:5000":         "is not in the session's allowlist",
		"localhost":                  "port 80 is not in",
		"localhost:443":              "",
		"localhost:5000":             "port 5000 is not in",
		"registry.denied.test":       "the registry registry.denied.test is not in the session's allowlist",
		"registry.denied.test:443":   "is not in the session's allowlist",
		"registry-1.docker.io":       "is not in the session's allowlist",
		"ghcr.io:0":                  `"0" is not a port`,
		"ghcr.io:99999":              `"99999" is not a port`,
		"ghcr.io:":                   `"" is not a port`,
	} {
		err := judgeRegistry(p, host)
		switch {
		case want == "" && err != nil:
			t.Errorf("judgeRegistry(%q) = %v, want allowed", host, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("judgeRegistry(%q) = %v, want a refusal saying %q", host, err, want)
		}
	}
	// Loopback with no entry: refused, whatever the datapath allows the
	// session itself.
	if err := judgeRegistry(nil, "127.0.0.1:5000"); err == nil {
		t.Error("judgeRegistry with no policy allowed a loopback registry")
	}
	empty, err := allowlist.Parse([]byte(`{"allowed_hosts": []}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1:5000", "localhost:5000", "[::1]:5000"} {
		if err := judgeRegistry(empty, host); err == nil {
			t.Errorf("judgeRegistry(%q) with an empty policy: allowed, want refused", host)
		}
	}
}
