// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/containers"
	"github.com/sluice-dev/sluice/sessions"
)

func writePolicy(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A labelled container gets its policy within the machine's; no label, the
// machine's; an unknown label or an unreadable record, loopback only, with
// the reason; never the machine allowlist for a label sluice cannot honour.
func TestChooseContainerPolicy(t *testing.T) {
	dir := t.TempDir()
	alpha := filepath.Join(dir, "alpha.json")
	writePolicy(t, alpha, `{"allowed_hosts": ["alpha.test", "203.0.113.10", "198.51.100.7"]}`)
	cp, err := loadContainerPolicies(map[string]string{"alpha": alpha})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := allowlist.FromStrings([]string{"alpha.test", "beta.test", "203.0.113.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(labels map[string]string) containers.Record { return containers.Record{Labels: labels} }

	c := chooseContainerPolicy(cp, rec(map[string]string{"sluice.policy": "alpha"}), nil)
	got := strings.Join(policyEntries(sessions.Intersect(c.requested, machine)), " ")
	if c.problem != "" || c.display() != "alpha" || got != "alpha.test 203.0.113.10" {
		t.Errorf("alpha: %q problem %q display %q; want alpha.test 203.0.113.10 (198.51.100.7 is not the machine's)", got, c.problem, c.display())
	}

	c = chooseContainerPolicy(cp, rec(map[string]string{"other": "x"}), nil)
	if c.requested != nil || c.problem != "" || c.display() != "(machine)" {
		t.Errorf("no label: %+v, want the machine allowlist", c)
	}
	if p := sessions.Intersect(c.requested, machine); p != machine {
		t.Errorf("no label: not the machine policy")
	}

	for name, tc := range map[string]struct {
		rec     containers.Record
		err     error
		problem string
		display string
	}{
		"unknown":    {rec(map[string]string{"sluice.policy": "gamma"}), nil, `names no policy in the daemon's container_policies (configured: alpha)`, `"gamma" (unknown: loopback only)`},
		"empty":      {rec(map[string]string{"sluice.policy": ""}), nil, `sluice.policy=""`, `"" (unknown: loopback only)`},
		"unreadable": {containers.Record{}, errors.New("no shim"), "cannot be read", "(unreadable: loopback only)"},
	} {
		c := chooseContainerPolicy(cp, tc.rec, tc.err)
		p := sessions.Intersect(c.requested, machine)
		if p.Len() != 0 || !strings.Contains(c.problem, tc.problem) || c.display() != tc.display {
			t.Errorf("%s: %d entries, problem %q, display %q; want loopback only, %q, %q", name, p.Len(), c.problem, c.display(), tc.problem, tc.display)
		}
	}
	if c := chooseContainerPolicy(nil, rec(map[string]string{"sluice.policy": "alpha"}), nil); !strings.Contains(c.problem, "none are configured") {
		t.Errorf("no container_policies: %q", c.problem)
	}
}

func policyEntries(p *allowlist.Policy) []string {
	var out []string
	for _, e := range p.Entries() {
		out = append(out, e.String())
	}
	return out
}

// The configuration is checked whole: names, paths, files; each error
// names its policy.
func TestLoadContainerPolicies(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	writePolicy(t, good, `{"allowed_hosts": ["a.test"]}`)
	bad := filepath.Join(dir, "bad.json")
	writePolicy(t, bad, `{"allowed_hosts": ["http://a.test/x"]}`)
	for name, tc := range map[string]struct {
		paths map[string]string
		want  string
	}{
		"bad name":      {map[string]string{"a b": good}, `"a b"`},
		"leading dot":   {map[string]string{".a": good}, `".a"`},
		"relative path": {map[string]string{"a": "good.json"}, "absolute, clean path"},
		"missing file":  {map[string]string{"a": filepath.Join(dir, "none.json")}, `container policy "a"`},
		"bad file":      {map[string]string{"a": good, "b": bad}, `container policy "b"`},
	} {
		if _, err := loadContainerPolicies(tc.paths); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
	if cp, err := loadContainerPolicies(nil); err != nil || len(cp.names()) != 0 {
		t.Errorf("none: %v", err)
	}
}

// A changed file is read again: a valid one becomes the policy, an
// invalid one is reported and the last good version stays.
func TestContainerPolicyChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	writePolicy(t, path, `{"allowed_hosts": ["a.test"]}`)
	cp, err := loadContainerPolicies(map[string]string{"a": path})
	if err != nil {
		t.Fatal(err)
	}
	if ch := cp.changed(); len(ch) != 0 {
		t.Fatalf("changes without a change: %+v", ch)
	}
	// A new inode, as editors write.
	tmp := path + ".new"
	writePolicy(t, tmp, `{"allowed_hosts": ["a.test", "b.test"]}`)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	ch := cp.changed()
	if len(ch) != 1 || ch[0].err != nil || ch[0].policy.Len() != 2 {
		t.Fatalf("after a valid change: %+v", ch)
	}
	if p, _ := cp.policy("a"); p.Len() != 2 {
		t.Errorf("policy a: %d entries, want 2", p.Len())
	}
	time.Sleep(10 * time.Millisecond) // a new mtime
	writePolicy(t, path, `{"allowed_hosts": [`)
	ch = cp.changed()
	if len(ch) != 1 || ch[0].err == nil {
		t.Fatalf("after an invalid change: %+v", ch)
	}
	if p, _ := cp.policy("a"); p.Len() != 2 {
		t.Errorf("policy a after an invalid file: %d entries, want the last good 2", p.Len())
	}
}

// Near misses of the root's two names, not the names themselves nor
// unrelated ones.
func TestNearMiss(t *testing.T) {
	for name, want := range map[string]bool{
		"sluce.slice":   true,
		"sluice.slic":   true,
		"slice":         true,
		"sluice.slice":  false,
		"sluice":        false,
		"sluicee":       true,
		"system.slice":  false,
		"docker":        false,
		"machine.slice": false,
	} {
		if got := nearMissOf(name, "sluice.slice", "sluice"); got != want {
			t.Errorf("nearMiss(%q) = %v, want %v", name, got, want)
		}
	}
}
