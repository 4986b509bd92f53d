// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"fmt"
	"slices"
	"testing"
)

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
	user := Caller{UID: 1000, GID: 1000, Groups: []uint32{998}, Creator: true}
	// The engine's socket as a machine's: root:docker (998), 0660, and
	// another that only root reaches.
	access := func(path string, c Caller) error {
		if path == "/var/run/docker.sock" && slices.Contains(c.Groups, 998) {
			return nil
		}
		return fmt.Errorf("user %d may not connect to %s", c.UID, path)
	}
	for _, tc := range []struct {
		name   string
		c      Caller
		docker bool
		host   string
		access func(string, Caller) error
		ok     bool
	}{
		{"root", root, true, "", nil, true},
		{"root names the engine", root, true, "/var/tmp/x/docker.sock", nil, true},
		{"a host without docker", root, false, "/x", nil, false},
		{"a tcp host", root, true, "tcp://10.0.0.1:2375", nil, false},
		{"a unix:// host", root, true, "unix:///var/run/docker.sock", nil, true},
		{"a user, no engine access rule", user, true, "", nil, false},
		{"a user in the engine's group", user, true, "", access, true},
		{"the same user names the engine", user, true, "unix:///var/run/docker.sock", access, true},
		{"a user names a socket it may not reach", user, true, "/run/containerd/containerd.sock", access, false},
		{"a user outside the group", Caller{UID: 1001, GID: 1001, Creator: true}, true, "", access, false},
		{"confined root", Caller{UID: 0, Creator: true, Confined: true}, true, "", nil, false},
		{"confined user in the group", Caller{UID: 1000, Groups: []uint32{998}, Creator: true, Confined: true}, true, "", access, false},
		{"no docker asked", Caller{UID: 1000}, false, "", nil, true},
	} {
		if err := mayUseDocker(tc.c, tc.docker, tc.host, tc.access); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
