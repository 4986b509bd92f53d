// SPDX-License-Identifier: Apache-2.0

package sessions

import "testing"

func TestMayShareProcesses(t *testing.T) {
	free := Caller{UID: 1000, Creator: true}
	confined := Caller{UID: 1000, Creator: true, Confined: true, Own: &Parent{Name: "run-1"}}
	elsewhere := Caller{UID: 1000, Creator: true, Confined: true}
	for _, tc := range []struct {
		name    string
		c       Caller
		request bool
		ok      bool
	}{
		{"unconfined caller", free, true, true},
		{"confined caller", confined, true, false},
		{"caller confined outside this daemon", elsewhere, true, false},
		{"confined caller, isolated session", confined, false, true},
	} {
		if err := mayShareProcesses(tc.c, tc.request); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err := mayAllowUserNamespaces(tc.c, tc.request); (err == nil) != tc.ok {
			t.Errorf("allow_userns, %s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestMayUseDocker(t *testing.T) {
	root := Caller{UID: 0, Creator: true}
	for _, tc := range []struct {
		name   string
		c      Caller
		docker bool
		host   string
		ok     bool
	}{
		{"root", root, true, "", true},
		{"root names the engine", root, true, "/var/tmp/x/docker.sock", true},
		{"a host without docker", root, false, "/x", false},
		{"a tcp host", root, true, "tcp://10.0.0.1:2375", false},
		{"a unix:// host", root, true, "unix:///var/run/docker.sock", true},
		{"a user", Caller{UID: 1000, Creator: true}, true, "", false},
		{"confined root", Caller{UID: 0, Creator: true, Confined: true}, true, "", false},
		{"no docker asked", Caller{UID: 1000}, false, "", true},
	} {
		if err := mayUseDocker(tc.c, tc.docker, tc.host); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
