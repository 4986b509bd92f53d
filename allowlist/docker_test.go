// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"strings"
	"testing"
)

func TestDockerKey(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": ["registry.example.com"], "docker": true}`)
	if !p.Docker() {
		t.Fatal(`"docker": true not read`)
	}
	if mustParse(t, `{"docker": false}`).Docker() || mustParse(t, `{"allowed_hosts": []}`).Docker() {
		t.Error(`"docker" read as true when false or absent`)
	}
	var nilPolicy *Policy
	if nilPolicy.Docker() {
		t.Error("nil policy asks for docker")
	}
	// Round trips, compact and pretty.
	for _, text := range [][]byte{p.Format(), must(p.MarshalJSON())} {
		q, err := Parse(text)
		if err != nil || !q.Docker() || q.Len() != 1 {
			t.Errorf("round trip of %s: %v, docker %v", text, err, q.Docker())
		}
	}
	if strings.Contains(string(mustParse(t, `{"allowed_hosts": []}`).Format()), "docker") {
		t.Error("Format writes docker for a policy without it")
	}
	// Merging keeps it if either asked; Without keeps it.
	other := mustParse(t, `{"allowed_hosts": ["a.example.com"]}`)
	if !other.Merge(p).Docker() || !p.Merge(other).Docker() || other.Merge(other).Docker() {
		t.Error("Merge: docker not the union")
	}
	if w, _ := p.Without(""); !w.Docker() {
		t.Error("Without dropped docker")
	}
	if !other.WithDocker(true).Docker() || p.WithDocker(false).Docker() || !p.Docker() {
		t.Error("WithDocker")
	}
}

func TestDockerKeyErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"docker": "yes"}`, `"docker" must be true or false, not a string`},
		{`{"docker": 1}`, `"docker" must be true or false`},
		{`{"docker": null}`, `"docker" must be true or false`},
		{`{"docker": true, "docker": true}`, `"docker" appears twice`},
		{`{"Docker": true}`, `unknown key "Docker"`},
	} {
		_, err := Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
