// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"slices"
	"strings"
	"testing"
)

func TestParseHiddenPaths(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": ["example.test"], "hidden_paths": ["~/.secret", "/etc/app/*.key", "~/.secret"]}`)
	if got, want := p.HiddenPaths(), []string{"~/.secret", "/etc/app/*.key"}; !slices.Equal(got, want) {
		t.Errorf("HiddenPaths = %q, want %q", got, want)
	}
	back, err := Parse(p.Format())
	if err != nil {
		t.Fatalf("Format does not parse back: %v\n%s", err, p.Format())
	}
	if !slices.Equal(back.HiddenPaths(), p.HiddenPaths()) {
		t.Errorf("round trip lost hidden paths: %s", p.Format())
	}
	compact, _ := p.MarshalJSON()
	if back, err := Parse(compact); err != nil || !slices.Equal(back.HiddenPaths(), p.HiddenPaths()) {
		t.Errorf("compact round trip: %v %s", err, compact)
	}
}

func TestParseHiddenPathsErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"hidden_paths": "~/.x"}`, `must be a list`},
		{`{"hidden_paths": [1]}`, `must be a string`},
		{`{"hidden_paths": ["relative/x"]}`, `must be absolute or start with ~/`},
		{`{"hidden_paths": ["~/a/../b"]}`, `not clean`},
		{`{"hidden_paths": ["/"]}`, `hide everything`},
		{`{"hidden_paths": ["~/"]}`, `hide everything`},
		{`{"hidden_paths": ["/x/[a"]}`, `bad glob`},
		{`{"hidden_paths": [], "hidden_paths": []}`, `appears twice`},
		{`{"hidden_path": []}`, `unknown key "hidden_path"`},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Parse(%s) = %v, want an error with its line saying %q", tc.doc, err, tc.want)
		}
	}
}

func TestHiddenPathsMerge(t *testing.T) {
	machine := mustParse(t, `{"hidden_paths": ["/srv/m"]}`)
	session := mustParse(t, `{"allowed_hosts": ["a.test"], "hidden_paths": ["~/.s", "/srv/m"]}`)
	if got := machine.Merge(session).HiddenPaths(); !slices.Equal(got, []string{"/srv/m", "~/.s"}) {
		t.Errorf("Merge: %q", got)
	}
	if got, _ := session.Without(""); !slices.Equal(got.HiddenPaths(), session.HiddenPaths()) {
		t.Errorf("Without dropped hidden paths: %q", got.HiddenPaths())
	}
	if _, err := session.WithHiddenPaths("nope"); err == nil {
		t.Error("WithHiddenPaths accepted a relative path")
	}
}
