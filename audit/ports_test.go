// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/loader"
)

// TestFromKernelPortRule: a refused port's audit event carries the rule in
// its reason and message; without the session's explanation it still says
// the port, not the address, was refused.
func TestFromKernelPortRule(t *testing.T) {
	ev := loader.Event{Hook: loader.HookConnect4, Reason: loader.ReasonPort, Addr: netip.MustParseAddr("203.0.113.5"), Port: 23, Proto: 6, PID: 123, Comm: "probe",
		PortRule: `port 23 is not in the rule "203.0.113.0/24" ports 22/tcp,8000-8100`}
	e := FromKernelBrief("s", ev)
	if e.Reason != ev.PortRule || !strings.HasSuffix(e.Message, ": "+ev.PortRule) || e.Port != 23 || e.Proto != "tcp" || e.Type != EgressDenied {
		t.Errorf("event = %+v", e)
	}
	ev.PortRule = ""
	if e := FromKernelBrief("s", ev); e.Reason != loader.ReasonPort.String() {
		t.Errorf("without the rule: reason %q", e.Reason)
	}
}
