// SPDX-License-Identifier: Apache-2.0

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

func TestParseEventUnix(t *testing.T) {
	for _, tc := range []struct {
		abstract bool
		name     string
		want     string
	}{
		{false, "/var/run/docker.sock", "denied node[4242] -> unix:/var/run/docker.sock: not in the allowlist"},
		{true, "relay", "denied node[4242] -> unix:@relay: not in the allowlist"},
		// Abstract names may hold any byte: the line escapes them.
		{true, "a\x00b\n", `denied node[4242] -> unix:@a\x00b\x0a: not in the allowlist`},
	} {
		u := sluiceUnixEvent{E: sluiceEvent{Pid: 4242, Hook: uint8(sluiceSluiceHookHOOK_UNIX_CONNECT),
			Reason: uint8(sluiceSluiceReasonREASON_NOT_ALLOWED), Family: 1, Comm: comm("node")}, Len: uint32(len(tc.name))}
		if tc.abstract {
			u.Abstract = 1
		}
		for i := range len(tc.name) {
			u.Path[i] = int8(tc.name[i])
		}
		b, err := binary.Append(nil, binary.LittleEndian, u)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if !e.IsUnix() || e.Addr.IsValid() || e.String() != tc.want {
			t.Errorf("decoded %+v: %q, want %q", e, e.String(), tc.want)
		}
		if _, err := ParseEvent(b[:eventSize]); err == nil {
			t.Error("a unix event cut to the size of a plain event decoded without error")
		}
	}
}
