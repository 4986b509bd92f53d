// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"encoding/json"
	"strings"
	"testing"
)

// engineHostConfig is the part of the create body the engine reads as the
// engine reads it: encoding/json into a struct, keys matched without
// regard to case, the last of two matching keys winning.
type engineCreate struct {
	Labels     map[string]string
	HostConfig *struct {
		Privileged   bool
		CgroupParent string
		NetworkMode  string
		Binds        []string
	}
}

func engineReads(t *testing.T, body []byte) engineCreate {
	t.Helper()
	var c engineCreate
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("the engine could not read %s: %v", body, err)
	}
	return c
}

// The attack: a body whose keys differ only in case. The judge's struct
// reads the last of them; the forwarded body was re-encoded from a map,
// sorted, so the engine read the other one. Before the fix, this body was
// judged unprivileged and ran privileged.
func TestCaseVariantKeysAreRefused(t *testing.T) {
	for _, body := range []string{
		`{"HostConfig":{"privileged":true,"Privileged":false}}`,
		`{"hostConfig":{"Privileged":true},"HostConfig":{"Privileged":false}}`,
		`{"HostConfig":{"NetworkMode":"none","networkmode":"host"}}`,
		`{"HostConfig":{"cgroupParent":"/","CgroupParent":""}}`,
		// U+017F LATIN SMALL LETTER LONG S folds to s, as encoding/json folds.
		`{"HostConfig":{"Privileged":false,"privileged":true,"Binds":[],"Binſ":[]}}`,
		`{"HostConfig":{"Binds":[],"binds":["/:/host"]}}`,
	} {
		if _, r := JudgeCreate([]byte(body), scope()); r == nil || !strings.Contains(r.Why, "repeated key") {
			t.Errorf("%s: %v, want refused for its repeated key", body, r)
		}
	}
	if r := JudgeExec([]byte(`{"Privileged":false,"privileged":true}`)); r == nil {
		t.Error("an exec with case-variant Privileged keys passed")
	}
}

// What passes is what the engine reads: a client's own spelling of a key
// gets the session's cgroup parent and label under that spelling, not
// beside it.
func TestRewriteKeepsTheClientsSpelling(t *testing.T) {
	for _, body := range []string{
		`{"hostconfig":{"networkmode":"none"},"labels":{"a":"b"}}`,
		`{"HOSTCONFIG":{"CGROUPPARENT":""}}`,
		`{"HostConfig":null}`,
		`{}`,
	} {
		out, r := JudgeCreate([]byte(body), scope())
		if r != nil {
			t.Errorf("%s: refused: %v", body, r)
			continue
		}
		if err := checkKeys(out); err != nil {
			t.Errorf("%s: the rewrite has %v: %s", body, err, out)
		}
		c := engineReads(t, out)
		if c.HostConfig == nil || c.HostConfig.CgroupParent != "/sluice" || c.Labels[SessionLabel] != "run-1-abc" {
			t.Errorf("%s: the engine reads %s", body, out)
		}
	}
}

func TestCheckKeys(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"a":1,"b":{"a":2,"c":[{"a":1,"A":2}]}}`, false},
		{`{"a":1,"b":{"a":2,"c":[{"a":1,"b":2}]}}`, true},
		{`[1,2,{"x":{}}]`, true},
		{`{"a":1}{"b":2}`, false},
		{`{"a":`, false},
	} {
		if err := checkKeys([]byte(c.body)); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.body, err, c.ok)
		}
	}
}
