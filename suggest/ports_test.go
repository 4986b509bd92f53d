// SPDX-License-Identifier: Apache-2.0

package suggest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/loader"
)

// TestSuggestionPorts: with SetPorts, each addition gets the ports it was
// refused on (kernel refusals: their protocol; the proxy's: TCP), a name
// seen on no port keeps every port and Explain says so; without it,
// additions allow every port as before.
func TestSuggestionPorts(t *testing.T) {
	events := []audit.Event{
		{Type: audit.EgressDenied, Dst: "203.0.113.5", Port: 5432, Proto: "tcp", Reason: loader.ReasonNotAllowed.String()},
		{Type: audit.EgressAudit, Dst: "203.0.113.5", Port: 53, Proto: "udp", Reason: loader.ReasonNotAllowed.String()},
		{Type: audit.EgressDenied, Dst: "203.0.113.5", Port: 5433, Proto: "tcp", Reason: loader.ReasonNotAllowed.String()},
		{Type: audit.ProxyRefused, Host: "api.example.com", Port: 443, Proto: "connect", Reason: "api.example.com is not in the allowlist"},
		{Type: audit.DNSRefused, Host: "quiet.example.com", Reason: "not in the allowlist"},
	}
	base, _ := allowlist.FromStrings([]string{"kept.example.com"})
	for _, on := range []bool{true, false} {
		s := New(nil)
		s.SetPorts(on)
		for _, e := range events {
			s.AddEvent(e)
		}
		merged, add, err := s.Render(base)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s.Explain(&out, "x.json", merged, add)
		text := string(merged.Format())
		hasPorts := strings.Contains(text, `{"host": "203.0.113.5", "ports": ["53/udp", "5432-5433/tcp"]}`) &&
			strings.Contains(text, `{"host": "api.example.com", "ports": ["443/tcp"]}`)
		if hasPorts != on || strings.Contains(text, `"quiet.example.com", "ports"`) || (!on && strings.Contains(text, "ports")) {
			t.Errorf("SetPorts(%v): %s", on, text)
		}
		if got := strings.Contains(out.String(), "no port was seen for quiet.example.com"); got != on {
			t.Errorf("SetPorts(%v): explanation %q", on, out.String())
		}
		if _, err := allowlist.Parse(merged.Format()); err != nil {
			t.Errorf("the suggestion does not parse: %v", err)
		}
	}
}
