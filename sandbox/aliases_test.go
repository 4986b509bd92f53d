// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"slices"
	"strings"
	"testing"
)

// A mount table with the same file system (8:1) at /, its /home subtree
// bind-mounted at /workspaces/home, the whole device mounted again at
// /mnt/disk, a user's directory bound at "/srv/my home" (escaped), and
// another device (8:2) whose paths must never be aliases.
const testMountinfo = `21 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 21 8:1 /home /workspaces/home rw,relatime shared:1 - ext4 /dev/sda1 rw
31 21 8:1 / /mnt/disk rw,relatime shared:1 - ext4 /dev/sda1 rw
32 21 8:1 /home/alice /srv/my\040home rw,relatime shared:1 - ext4 /dev/sda1 rw
33 21 8:1 /home/bob /srv/bob rw,relatime shared:1 - ext4 /dev/sda1 rw
40 21 8:2 /home /data/home rw,relatime shared:2 - ext4 /dev/sda2 rw
`

func TestAliasPaths(t *testing.T) {
	mounts, err := parseMounts(strings.NewReader(testMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != 6 || mounts[3].mountpoint != "/srv/my home" {
		t.Fatalf("parsed %+v", mounts)
	}
	for _, tc := range []struct {
		mountID int
		path    string
		want    []string
	}{
		{21, "/home/alice/.ssh/id_ed25519", []string{"/workspaces/home/alice/.ssh/id_ed25519", "/mnt/disk/home/alice/.ssh/id_ed25519", "/srv/my home/.ssh/id_ed25519"}},
		// Named through the bind: found again at / and the others.
		{30, "/workspaces/home/alice/.netrc", []string{"/home/alice/.netrc", "/mnt/disk/home/alice/.netrc", "/srv/my home/.netrc"}},
		// A directory that is a mount's root is an alias of itself there.
		{21, "/home/alice", []string{"/workspaces/home/alice", "/mnt/disk/home/alice", "/srv/my home"}},
		// Outside /home: only the whole-device mount shows it.
		{21, "/etc/shadow", []string{"/mnt/disk/etc/shadow"}},
		// A path on another device, and an unknown mount: nothing.
		{40, "/data/home/alice/.netrc", nil},
		{99, "/home/alice/.netrc", nil},
	} {
		got := aliasPaths(mounts, tc.mountID, tc.path)
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("aliasPaths(%d, %s) = %q, want %q", tc.mountID, tc.path, got, want)
		}
	}
}
