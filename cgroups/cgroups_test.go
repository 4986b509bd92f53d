// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const (
	pureV2Info = `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	hybridInfo = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// Seen inside a container whose cgroup namespace is not the one the
	// mount was made in: the root is outside this namespace's view.
	cgroupnsInfo = `1021 1012 0:30 /.. /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw
`
	// A bind mount of a subtree listed before the full hierarchy.
	subtreeFirstInfo = `50 23 0:38 /system.slice /mnt/slice rw,relatime - cgroup2 cgroup2 rw
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	escapedInfo = `60 23 0:38 / /mnt/my\040cgroup\011dir\134x rw,relatime - cgroup2 none rw
`
	shadowedInfo = `26 22 0:23 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw
31 22 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	noneInfo = `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
`
	optionalFieldsInfo = `26 22 0:23 / /sys/fs/cgroup rw,relatime shared:4 master:1 propagate_from:2 - cgroup2 cgroup2 rw
`
)

func TestParseMountInfo(t *testing.T) {
	tests := []struct {
		name, info, want string
		wantErr          error
	}{
		{name: "pure v2", info: pureV2Info, want: "/sys/fs/cgroup"},
		{name: "hybrid", info: hybridInfo, want: "/sys/fs/cgroup/unified"},
		{name: "cgroupns root /..", info: cgroupnsInfo, want: "/sys/fs/cgroup"},
		{name: "full hierarchy preferred", info: subtreeFirstInfo, want: "/sys/fs/cgroup/unified"},
		{name: "escaped path", info: escapedInfo, want: "/mnt/my cgroup\tdir\\x"},
		{name: "shadowed mount skipped", info: shadowedInfo, want: "/sys/fs/cgroup/unified"},
		{name: "several optional fields", info: optionalFieldsInfo, want: "/sys/fs/cgroup"},
		{name: "none", info: noneInfo, wantErr: ErrNoCgroup2},
		{name: "empty", info: "", wantErr: ErrNoCgroup2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountInfo(strings.NewReader(tt.info))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParseMountInfo() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseMountInfo() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseMountInfoMalformed(t *testing.T) {
	for _, info := range []string{
		"26 22 0:23 / /sys/fs/cgroup rw\n",           // no separator
		"26 22 0:23 / - cgroup2 cgroup2 rw\n",        // separator too early
		"26 22 0:23 / /sys/fs/cgroup rw - cgroup2\n", // nothing after fstype
	} {
		if _, err := ParseMountInfo(strings.NewReader(info)); err == nil || errors.Is(err, ErrNoCgroup2) {
			t.Errorf("ParseMountInfo(%q) error = %v, want a malformed-line error", info, err)
		}
	}
}

func TestV1MountOf(t *testing.T) {
	entries, err := parseMountInfo(strings.NewReader(hybridInfo))
	if err != nil {
		t.Fatal(err)
	}
	for controller, want := range map[string]string{
		"pids":   "/sys/fs/cgroup/pids",
		"memory": "/sys/fs/cgroup/memory",
		"io":     "",
		"rw":     "/sys/fs/cgroup/cpu", // documents the match: any super option, first mount wins
	} {
		if got := v1MountOf(entries, controller); got != want {
			t.Errorf("v1MountOf(%q) = %q, want %q", controller, got, want)
		}
	}
}

func TestUnescapeMountField(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:        "plain",
		`a\040b`:       "a b",
		`a\012b`:       "a\nb",
		`trail\04`:     `trail\04`,
		`not\999oct`:   `not\999oct`,
		`big\400x`:     `big\400x`,
		`back\134\040`: `back\ `,
	} {
		if got := unescapeMountField(in); got != want {
			t.Errorf("unescapeMountField(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"max", -1, true},
		{"MAX", -1, true},
		{"1048576", 1048576, true},
		{"0", 0, true},
		{"512M", 512 << 20, true},
		{"512m", 512 << 20, true},
		{"512MiB", 512 << 20, true},
		{"512Mi", 512 << 20, true},
		{"512MB", 512 << 20, true},
		{"2G", 2 << 30, true},
		{"64k", 64 << 10, true},
		{"1T", 1 << 40, true},
		{"7E", 7 << 60, true},
		{"100B", 100, true},
		{" 2G ", 2 << 30, true},
		{"8E", 0, false}, // overflows int64
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5G", 0, false},
		{"12X", 0, false},
		{"12 M", 0, false},
		{"G", 0, false},
		{"12iB", 0, false},
		{"12MM", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.ok && (err != nil || got != tt.want) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if !tt.ok && err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", tt.in, got)
		}
	}
}

// fakeDB is an account database with alice (uid 1000) in groups 1000, 27, 100.
type fakeDB struct{}

func (fakeDB) userByName(name string) (account, error) {
	if name == "alice" {
		return account{name: "alice", uid: 1000, gid: 1000}, nil
	}
	return account{}, fmt.Errorf("unknown user %s", name)
}

func (fakeDB) userByID(uid uint32) (account, bool, error) {
	if uid == 1000 {
		return account{name: "alice", uid: 1000, gid: 1000}, true, nil
	}
	return account{}, false, nil
}

func (fakeDB) groupByName(name string) (uint32, error) {
	if name == "staff" {
		return 50, nil
	}
	return 0, fmt.Errorf("unknown group %s", name)
}

func (fakeDB) groupsOf(a account) ([]uint32, error) {
	if a.name == "alice" {
		return []uint32{1000, 27, 100, 27}, nil
	}
	return nil, nil
}

func TestResolveUserSpec(t *testing.T) {
	tests := []struct {
		spec string
		want SpawnOptions
		ok   bool
	}{
		{"alice", SpawnOptions{UID: 1000, GID: 1000, Groups: []uint32{27, 100, 1000}}, true},
		{"1000", SpawnOptions{UID: 1000, GID: 1000, Groups: []uint32{27, 100, 1000}}, true},
		{"4242", SpawnOptions{UID: 4242, GID: 4242}, true},
		{"4242:7", SpawnOptions{UID: 4242, GID: 7}, true},
		{"alice:staff", SpawnOptions{UID: 1000, GID: 50}, true},
		{"alice:60", SpawnOptions{UID: 1000, GID: 60}, true},
		{"0", SpawnOptions{UID: 0, GID: 0}, true}, // resolution is neutral; Start refuses it
		{"", SpawnOptions{}, false},
		{":staff", SpawnOptions{}, false},
		{"alice:", SpawnOptions{}, false},
		{"alice:staff:x", SpawnOptions{}, false},
		{"bob", SpawnOptions{}, false},
		{"alice:nogroup", SpawnOptions{}, false},
		{"4294967295", SpawnOptions{}, false},
		{"4294967296", SpawnOptions{}, false},
		{"1:4294967295", SpawnOptions{}, false},
		{"ali ce", SpawnOptions{}, false},
	}
	for _, tt := range tests {
		got, err := resolveUserSpec(tt.spec, fakeDB{})
		if !tt.ok {
			if err == nil {
				t.Errorf("resolveUserSpec(%q) = %+v, want an error", tt.spec, got)
			}
			continue
		}
		if err != nil || got.UID != tt.want.UID || got.GID != tt.want.GID || !slices.Equal(got.Groups, tt.want.Groups) {
			t.Errorf("resolveUserSpec(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
	}
}

func TestSpawnOptionsValidate(t *testing.T) {
	if err := (SpawnOptions{UID: 0, GID: 100}).validate(); !errors.Is(err, ErrRootUID) {
		t.Errorf("uid 0: error = %v, want ErrRootUID", err)
	}
	for _, o := range []SpawnOptions{
		{UID: invalidID, GID: 1},
		{UID: 1, GID: invalidID},
		{UID: 1, GID: 1, Groups: []uint32{2, invalidID}},
	} {
		if err := o.validate(); err == nil {
			t.Errorf("validate(%+v) = nil, want an error", o)
		}
	}
	if err := (SpawnOptions{UID: 65534, GID: 65534, Groups: []uint32{0}}).validate(); err != nil {
		t.Errorf("validate(nobody) = %v", err)
	}
}

func TestValidName(t *testing.T) {
	for _, name := range []string{"sluice", "s1", "sess-42_a.b@c+d", "A", strings.Repeat("a", maxNameLen)} {
		if err := validName(name); err != nil {
			t.Errorf("validName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "a/b", "/a", "../x", ".hidden", "-x", "a b", "a\nb", "a\x00b",
		"cgroup.procs", "cgroup.x", "é", strings.Repeat("a", maxNameLen+1)} {
		if err := validName(name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("validName(%q) = %v, want ErrInvalidName", name, err)
		}
	}
}

func TestControllerError(t *testing.T) {
	r := &Root{controllers: []string{"memory"}, unavailable: map[string]string{"pids": "bound to cgroup v1"}}
	if err := r.controllerErr("memory"); err != nil {
		t.Errorf("controllerErr(memory) = %v, want nil", err)
	}
	err := r.controllerErr("pids")
	var ce *ControllerError
	if !errors.Is(err, ErrControllerUnavailable) || !errors.As(err, &ce) || ce.Controller != "pids" || !strings.Contains(err.Error(), "bound to cgroup v1") {
		t.Errorf("controllerErr(pids) = %v", err)
	}
	if got := r.Controllers(); !slices.Equal(got, []string{"memory"}) {
		t.Errorf("Controllers() = %v", got)
	}
}
