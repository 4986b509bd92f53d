// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCheckReadOnlyPath(t *testing.T) {
	for _, p := range []string{"/", "/etc", "/home/runner/_work/_actions", "/srv/a b/c.txt"} {
		if err := CheckReadOnlyPath(p); err != nil {
			t.Errorf("CheckReadOnlyPath(%q) = %v, want nil", p, err)
		}
	}
	for p, want := range map[string]string{
		"":             "empty",
		"relative":     "not an absolute path",
		"./x":          "not an absolute path",
		"~/x":          "not an absolute path",
		"/a/../b":      "not a clean path",
		"/a/./b":       "not a clean path",
		"/a//b":        "not a clean path",
		"/a/":          "not a clean path",
		"/a\x00b":      "NUL",
		"/etc/passwd/": "did you mean \"/etc/passwd\"",
	} {
		if err := CheckReadOnlyPath(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckReadOnlyPath(%q) = %v, want an error saying %q", p, err, want)
		}
	}
}

// The machine's paths stay whatever the session asks; a session adds its
// own; duplicates go; one bad path refuses the whole list.
func TestReadOnlyPathsCombine(t *testing.T) {
	r, err := ReadOnlyPaths([]string{"/opt/a", "/opt/b", "/opt/a"}, []string{"/opt/b", "/srv/c", "/srv/c"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Machine, []string{"/opt/a", "/opt/b"}) || !slices.Equal(r.Session, []string{"/srv/c"}) {
		t.Errorf("got machine %q session %q", r.Machine, r.Session)
	}
	if r.Empty() {
		t.Error("Empty() on a non-empty list")
	}
	if r, err := ReadOnlyPaths(nil, nil); err != nil || !r.Empty() {
		t.Errorf("no paths: %+v, %v", r, err)
	}
	if _, err := ReadOnlyPaths([]string{"/opt/a"}, []string{"/srv/c", "srv/d"}); err == nil || !strings.Contains(err.Error(), `"srv/d"`) {
		t.Errorf("a relative session path: %v, want an error naming it", err)
	}
	if _, err := ReadOnlyPaths([]string{"/opt/../a"}, nil); err == nil {
		t.Error("an unclean machine path was accepted")
	}
	var many []string
	for i := range MaxReadOnlyPaths + 1 {
		many = append(many, fmt.Sprintf("/srv/%d", i))
	}
	if _, err := ReadOnlyPaths(nil, many); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("%d paths: %v, want a refusal", len(many), err)
	}
}

func TestBelow(t *testing.T) {
	for _, c := range []struct {
		path, p string
		want    bool
	}{
		{"/a", "/a", true}, {"/a/b", "/a", true}, {"/ab", "/a", false}, {"/a", "/a/b", false}, {"/x", "/", true}, {"/", "/", true},
	} {
		if got := Below(c.path, c.p); got != c.want {
			t.Errorf("Below(%q, %q) = %v, want %v", c.path, c.p, got, c.want)
		}
	}
}
