// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"slices"
	"testing"
)

func TestHiddenPathsCombine(t *testing.T) {
	h, err := HiddenPaths([]string{"/srv/machine", "~/.netrc"}, []string{"~/.mine", "~/.netrc"}, []string{"~/.netrc", "~/.ssh"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range DefaultHiddenPaths {
		if !slices.Contains(h.Patterns, p) {
			t.Errorf("default %s missing from %q", p, h.Patterns)
		}
	}
	if !slices.Contains(h.Patterns, "~/.mine") || !slices.Equal(h.Machine, []string{"/srv/machine", "~/.netrc"}) {
		t.Errorf("Patterns %q Machine %q", h.Patterns, h.Machine)
	}
	globs, shown := h.Expand("/home/u")
	exemptable := map[string]bool{}
	for _, g := range globs {
		if g.Exemptable {
			exemptable[g.Pattern] = true
		}
	}
	if !exemptable["/home/u/.ssh/id_*"] || !exemptable["/home/u/.mine"] {
		t.Errorf("defaults and the session's own list must be exemptable: %+v", globs)
	}
	var machineNetrc bool
	for _, g := range globs {
		if g.Pattern == "/home/u/.netrc" && !g.Exemptable {
			machineNetrc = true
		}
	}
	if !machineNetrc {
		t.Errorf("the machine's ~/.netrc must stay hidden whatever --show-path says: %+v", globs)
	}
	if !slices.Equal(shown, []string{"/home/u/.netrc", "/home/u/.ssh"}) {
		t.Errorf("shown = %q", shown)
	}
	if !Shows("/home/u/.ssh/id_rsa", shown) || Shows("/home/u/.sshx", shown) || !Shows("/home/u/.ssh", shown) {
		t.Error("Shows: a shown directory exempts what is below it, and only that")
	}
}

func TestHiddenPathsBadInput(t *testing.T) {
	for _, c := range [][3][]string{
		{{"relative"}, nil, nil},
		{nil, {"~/a/../b"}, nil},
		{nil, nil, {"~"}},
	} {
		if _, err := HiddenPaths(c[0], c[1], c[2]); err == nil {
			t.Errorf("HiddenPaths(%q) accepted a bad path", c)
		}
	}
}

func TestExpandWithoutHome(t *testing.T) {
	h := Hidden{Patterns: []string{"~/.netrc", "/etc/secret"}}
	for _, home := range []string{"", "/", "relative"} {
		globs, _ := h.Expand(home)
		if len(globs) != 1 || globs[0].Pattern != "/etc/secret" {
			t.Errorf("home %q: %+v, want only the absolute path", home, globs)
		}
	}
}

func TestScrubEnv(t *testing.T) {
	env := []string{"PATH=/bin", "GITHUB_TOKEN=t", "AWS_SECRET_ACCESS_KEY=k", "MY_SECRET=s", "DB_PASSWORD=p", "PASSWORD_FILE=f",
		"api_key=x", "KEYBOARD=us", "TOKENIZERS_PARALLELISM=1", "HOME=/h", "NOEQUALS"}
	kept, removed := ScrubEnv(env)
	if want := []string{"PATH=/bin", "KEYBOARD=us", "TOKENIZERS_PARALLELISM=1", "HOME=/h", "NOEQUALS"}; !slices.Equal(kept, want) {
		t.Errorf("kept %q, want %q", kept, want)
	}
	if want := []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_SECRET", "DB_PASSWORD", "PASSWORD_FILE", "api_key"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
}

func TestStartedNote(t *testing.T) {
	if got := StartedNote(nil); got != "" {
		t.Errorf("StartedNote(nil) = %q", got)
	}
	if got, want := StartedNote([]string{"/h/.netrc", "/h/.aws/credentials"}), "; sandbox hid /h/.netrc, /h/.aws/credentials"; got != want {
		t.Errorf("StartedNote = %q, want %q", got, want)
	}
}
