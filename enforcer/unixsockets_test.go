// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"slices"
	"testing"
)

func TestBuiltinUnixSockets(t *testing.T) {
	got := BuiltinUnixSockets(1000, []string{"SSH_AUTH_SOCK=/tmp/old", "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "GNUPGHOME=/home/u/.gnupg"})
	for _, want := range []string{"/dev/log", "/run/systemd/journal/socket", "/run/systemd/journal/stdout", "/run/systemd/journal/dev-log",
		"/run/user/1000/gnupg/S.gpg-agent", "/run/user/1000/gnupg/S.gpg-agent.ssh", "/tmp/ssh-x/agent.1", "/home/u/.gnupg/S.gpg-agent"} {
		if !slices.Contains(got, want) {
			t.Errorf("built-in list lacks %s: %v", want, got)
		}
	}
	for _, never := range []string{"/tmp/old", "/run/user/1000/gnupg/S.dirmngr", "/run/user/1000/gnupg/S.gpg-agent.extra"} {
		if slices.Contains(got, never) {
			t.Errorf("built-in list holds %s", never)
		}
	}
	// A relative or missing SSH_AUTH_SOCK adds nothing.
	if n := len(BuiltinUnixSockets(0, []string{"SSH_AUTH_SOCK=agent.sock"})); n != 6 {
		t.Errorf("relative SSH_AUTH_SOCK: %d entries, want the 6 fixed ones", n)
	}
	for _, q := range QuietUnixSockets {
		if slices.Contains(got, q) {
			t.Errorf("%s is both built in and refused quietly", q)
		}
	}
}
