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

// The names the environment chooses are the ones BuiltinUnixSockets adds
// beyond the fixed list; a bound keeps only names in it, exactly.
func TestEnvUnixSocketsWithin(t *testing.T) {
	env := []string{"SSH_AUTH_SOCK=/var/run/docker.sock", "GNUPGHOME=/home/u/.gnupg"}
	names := EnvUnixSockets(env)
	if want := []string{"/var/run/docker.sock", "/home/u/.gnupg/S.gpg-agent", "/home/u/.gnupg/S.gpg-agent.ssh"}; !slices.Equal(names, want) {
		t.Fatalf("EnvUnixSockets = %q, want %q", names, want)
	}
	if all := BuiltinUnixSockets(1000, env); !slices.Equal(all[len(all)-len(names):], names) || len(all) != 6+len(names) {
		t.Errorf("BuiltinUnixSockets = %q, want the 6 fixed names and then %q", all, names)
	}
	if kept, refused := WithinEnvSockets(names, nil); !slices.Equal(kept, names) || refused != nil {
		t.Errorf("no bound: kept %q refused %q", kept, refused)
	}
	bound := []string{"/tmp/ssh-x/agent.1", "/home/u/.gnupg/S.gpg-agent"}
	kept, refused := WithinEnvSockets(names, &bound)
	if !slices.Equal(kept, []string{"/home/u/.gnupg/S.gpg-agent"}) || !slices.Equal(refused, []string{"/var/run/docker.sock", "/home/u/.gnupg/S.gpg-agent.ssh"}) {
		t.Errorf("bound %q: kept %q refused %q", bound, kept, refused)
	}
	empty := []string{}
	if kept, refused := WithinEnvSockets(names, &empty); len(kept) != 0 || len(refused) != len(names) {
		t.Errorf("empty bound: kept %q refused %q", kept, refused)
	}
	// A spelling that leads to the same place is still a new path.
	one := []string{"/tmp/ssh-x/agent.1"}
	if kept, _ := WithinEnvSockets(EnvUnixSockets([]string{"SSH_AUTH_SOCK=/tmp/ssh-x/../ssh-x/agent.1"}), &one); len(kept) != 0 {
		t.Errorf("another spelling of the bound's name was kept: %q", kept)
	}
}
