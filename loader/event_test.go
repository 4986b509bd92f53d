package loader

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// record encodes r the way the datapath writes struct event.
func record(t *testing.T, r sluiceEvent) []byte {
	t.Helper()
	b, err := binary.Append(nil, binary.LittleEndian, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func comm(s string) (c [16]int8) {
	for i := range len(s) {
		c[i] = int8(s[i])
	}
	return c
}

func TestParseEventConnect(t *testing.T) {
	r := sluiceEvent{
		Ts: 5, Cgroup: 77, Pid: 10, Tid: 11, Uid: 1000,
		Hook: uint8(sluiceSluiceHookHOOK_CONNECT4), Reason: uint8(sluiceSluiceReasonREASON_NOT_ALLOWED),
		Flags: uint8(sluiceSluiceEventFlagEVENT_AUDIT), Family: 2, Port: 443, Proto: 6,
		Addr: netip.MustParseAddr("::ffff:203.0.113.9").As16(), Comm: comm("curl"),
	}
	e, err := ParseEvent(record(t, r))
	if err != nil {
		t.Fatal(err)
	}
	if e.Hook != HookConnect4 || e.Reason != ReasonNotAllowed || !e.Audit || e.Cgroup != 77 || e.PID != 10 || e.UID != 1000 {
		t.Fatalf("decoded %+v", e)
	}
	if got, want := e.String(), "audit: would deny curl[10] -> 203.0.113.9:443/tcp: not in the allowlist"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if _, err := ParseEvent(record(t, r)[:eventSize-1]); err == nil {
		t.Fatal("a short record decoded without error")
	}
}
