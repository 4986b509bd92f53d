// SPDX-License-Identifier: Apache-2.0

package podpolicy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/allowlist"
)

const guardJSON = `{"namespaces": {
	"agents": {"default": "agents", "selectable": ["agents", "npm-only"]},
	"ci-*": {"selectable": ["ci"]},
	"ci-strict-*": {"default": "npm-only"},
	"open": {}
}}`

func testSet(t *testing.T) *Set {
	t.Helper()
	s, err := Parse(map[string][]byte{
		GuardKey:        []byte(guardJSON),
		"agents.json":   []byte(`{"allowed_hosts": ["api.example.com", "*.example.org"]}`),
		"npm-only.json": []byte(`{"allowed_hosts": ["registry.npmjs.org"]}`),
		"ci.json":       []byte(`{"allowed_hosts": ["gitlab.example.com"]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChoose(t *testing.T) {
	s := testSet(t)
	ann := func(v string) map[string]string { return map[string]string{Annotation: v} }
	cases := []struct {
		name    string
		pod     Pod
		guarded bool
		policy  string
		refused string
	}{
		{"unguarded", Pod{Namespace: "default", Name: "web"}, false, "", ""},
		{"unguarded but asks", Pod{Namespace: "default", Name: "web", Annotations: ann("agents")}, true, "", "not guarded on this node"},
		{"default", Pod{Namespace: "agents", Name: "a"}, true, "agents", ""},
		{"selected", Pod{Namespace: "agents", Name: "a", Annotations: ann("npm-only")}, true, "npm-only", ""},
		{"not selectable", Pod{Namespace: "agents", Name: "a", Annotations: ann("ci")}, true, "", "does not let its pods choose (selectable: agents, npm-only)"},
		{"unknown name", Pod{Namespace: "agents", Name: "a", Annotations: ann("wide-open")}, true, "", "does not let its pods choose"},
		{"bad name", Pod{Namespace: "agents", Name: "a", Annotations: ann("../x")}, true, "", "letters, digits"},
		{"pattern, no default", Pod{Namespace: "ci-42", Name: "job"}, true, "", "has no default policy"},
		{"pattern, selected", Pod{Namespace: "ci-42", Name: "job", Annotations: ann("ci")}, true, "ci", ""},
		{"longest pattern", Pod{Namespace: "ci-strict-1", Name: "job"}, true, "npm-only", ""},
		{"longest pattern refuses", Pod{Namespace: "ci-strict-1", Name: "job", Annotations: ann("ci")}, true, "", "selectable: none"},
		{"guarded, nothing", Pod{Namespace: "open", Name: "x"}, true, "", "has no default policy"},
		{"prefix is not a match", Pod{Namespace: "ci", Name: "x"}, false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := s.Choose(c.pod)
			if got.Guarded != c.guarded || got.Name != c.policy {
				t.Fatalf("Choose = %+v; want guarded %v policy %q", got, c.guarded, c.policy)
			}
			if c.refused == "" && got.Refused != "" || !strings.Contains(got.Refused, c.refused) {
				t.Fatalf("Refused = %q; want it to contain %q", got.Refused, c.refused)
			}
			if c.policy != "" && got.Policy != s.Policies[c.policy] {
				t.Fatalf("Policy is not the set's %q", c.policy)
			}
			if got.Refused != "" && got.Policy != nil {
				t.Fatalf("a refused pod got a policy")
			}
		})
	}
}

func TestNoGuardConfinesNothing(t *testing.T) {
	var s *Set
	if c := s.Choose(Pod{Namespace: "agents"}); c.Guarded {
		t.Fatalf("nil set guarded a pod: %+v", c)
	}
	s, err := Parse(map[string][]byte{"agents.json": []byte(`{"allowed_hosts": []}`)})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Choose(Pod{Namespace: "agents"}); c.Guarded {
		t.Fatalf("set without a guard guarded a pod: %+v", c)
	}
}

func TestParseErrors(t *testing.T) {
	good := `{"allowed_hosts": ["a.example.com"]}`
	cases := []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"malformed policy", map[string][]byte{"a.json": []byte(`{"allowed_hosts": [`)}, "a.json"},
		{"unknown policy key", map[string][]byte{"a.json": []byte(`{"allowed_host": []}`)}, "a.json"},
		{"not json key", map[string][]byte{"a.yaml": []byte(good)}, "not a policy"},
		{"bad policy name", map[string][]byte{"-a.json": []byte(good)}, "policy name"},
		{"guard unknown key", map[string][]byte{"a.json": []byte(good), GuardKey: []byte(`{"namespaces": {"x": {"defualt": "a"}}}`)}, "defualt"},
		{"guard no namespaces", map[string][]byte{GuardKey: []byte(`{}`)}, `no "namespaces"`},
		{"guard missing default", map[string][]byte{"a.json": []byte(good), GuardKey: []byte(`{"namespaces": {"x": {"default": "b"}}}`)}, `default policy "b"`},
		{"guard missing selectable", map[string][]byte{"a.json": []byte(good), GuardKey: []byte(`{"namespaces": {"x": {"selectable": ["a", "c"]}}}`)}, `selectable policy "c"`},
		{"guard bad pattern", map[string][]byte{GuardKey: []byte(`{"namespaces": {"c*i": {}}}`)}, "trailing"},
		{"guard bad name", map[string][]byte{GuardKey: []byte(`{"namespaces": {"Agents": {}}}`)}, "not a namespace name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.files)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse = %v, %v; want an error containing %q", s, err, c.want)
			}
		})
	}
}

// TestLoadConfigMapMount reads a directory laid out as the kubelet mounts
// a ConfigMap: keys are symlinks into a ..data directory.
func TestLoadConfigMapMount(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_12_07_13_00_00.000000001")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(data, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	write("agents.json", `{"allowed_hosts": ["api.example.com"]}`)
	write(GuardKey, `{"namespaces": {"agents": {"default": "agents"}}}`)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); len(got) != 1 || got[0] != "agents" {
		t.Fatalf("Names = %v", got)
	}
	if c := s.Choose(Pod{Namespace: "agents", Name: "a"}); c.Name != "agents" {
		t.Fatalf("Choose = %+v", c)
	}
	before := s.Digest
	write("more.json", `{"allowed_hosts": []}`)
	s2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Digest == before {
		t.Fatal("digest did not change with the files")
	}
	write("broken.json", `{`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Fatalf("Load with a broken file = %v", err)
	}
}

func TestIdentity(t *testing.T) {
	p := Pod{Namespace: "ci-7", Name: "runner-abc", UID: "u1",
		Annotations: map[string]string{"job.runner.gitlab.com/id": "4242", "job.runner.gitlab.com/url": "https://gitlab.example.com/p/-/jobs/4242",
			"project.runner.gitlab.com/id": "17", "other": "x", "job.runner.gitlab.com/": "empty key"},
		Labels: map[string]string{"actions.github.com/scale-set-name": "agents", "app": "y"}}
	id := p.Identity()
	want := map[string]string{"pod": "ci-7/runner-abc", "pod_uid": "u1", "job.runner.gitlab.com/id": "4242",
		"job.runner.gitlab.com/url": "https://gitlab.example.com/p/-/jobs/4242", "project.runner.gitlab.com/id": "17",
		"actions.github.com/scale-set-name": "agents"}
	if len(id) != len(want) {
		t.Fatalf("Identity = %v; want %v", id, want)
	}
	for k, v := range want {
		if id[k] != v {
			t.Fatalf("Identity[%q] = %q; want %q", k, id[k], v)
		}
	}
	if p.CI() != "gitlab" {
		t.Fatalf("CI = %q", p.CI())
	}
	arc := Pod{Labels: map[string]string{"actions.github.com/scale-set-name": "s"}}
	if arc.CI() != "arc" || (Pod{}).CI() != "" {
		t.Fatal("CI of ARC or plain pod wrong")
	}
	long := Pod{Annotations: map[string]string{"job.runner.gitlab.com/name": strings.Repeat("x", 1000)}}
	if len(long.Identity()["job.runner.gitlab.com/name"]) != maxIdentityValue {
		t.Fatal("a long value was not clipped")
	}
}

func FuzzParseGuard(f *testing.F) {
	f.Add([]byte(guardJSON))
	f.Add([]byte(`{"namespaces": {"*": {}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGuard(data, map[string]bool{"agents": true, "npm-only": true, "ci": true})
		if err != nil {
			return
		}
		s := &Set{Guard: g, Policies: map[string]*allowlist.Policy{}}
		_ = s.Choose(Pod{Namespace: "agents", Annotations: map[string]string{Annotation: "ci"}})
	})
}

func TestGuardRoundTrip(t *testing.T) {
	s := testSet(t)
	b, err := s.Guard.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	g, err := ParseGuard(b)
	if err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{"agents": true, "ci-1": true, "ci-strict-x": true, "open": true, "default": false, "ci": false} {
		if g.Guards(ns) != want {
			t.Errorf("Guards(%q) = %v, want %v", ns, !want, want)
		}
	}
	if _, err := ParseGuard([]byte(`{"namespaces": {"a": {"default": "none-such"}}}`)); err != nil {
		t.Errorf("ParseGuard checked policy names it cannot know: %v", err)
	}
	if _, err := ParseGuard([]byte(`{"namespaces": {"A*b": {}}}`)); err == nil {
		t.Error("ParseGuard took a bad pattern")
	}
	var none *Set
	if b, err := none.guardOrEmpty().Marshal(); err != nil || !strings.Contains(string(b), `"namespaces": {}`) {
		t.Errorf("empty guard = %s, %v", b, err)
	}
}
