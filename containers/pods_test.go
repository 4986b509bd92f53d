// SPDX-License-Identifier: Apache-2.0

package containers

import "testing"

func TestPodCgroup(t *testing.T) {
	good := map[string]string{
		"/kubepods/besteffort/pod3f1c":           "kubepods/besteffort/pod3f1c",
		"/kubepods/pod3f1c/":                     "kubepods/pod3f1c",
		"kubepods-besteffort-pod3f1c_9a2b.slice": "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod3f1c_9a2b.slice",
		"kubepods-pod3f1c.slice":                 "kubepods.slice/kubepods-pod3f1c.slice",
		"kubepods.slice":                         "kubepods.slice",
	}
	for in, want := range good {
		if got, err := PodCgroup(in); err != nil || got != want {
			t.Errorf("PodCgroup(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "/kubepods/../etc", "kubepods", "-a.slice", "a--b.slice", "a/b.slice", ".slice", "/.."} {
		if got, err := PodCgroup(in); err == nil {
			t.Errorf("PodCgroup(%q) = %q, want an error", in, got)
		}
	}
}
