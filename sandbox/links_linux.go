// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// A hidden file with more than one hard link is the same file under
// other names, which covering its path (and its aliases through other
// mounts) leaves readable. No index maps an inode to its names, so they
// are searched for: outward from the file's directory (its directory,
// then each parent up to its mount point: links are usually near, a
// backup or a copy made with ln), then every other mount of its file
// system in the session's view, never crossing into another file system.
// The search only runs for a hidden file whose link count says there are
// other names, and is bounded (linkSearchEntries, linkSearchTime) so a
// session's start is never held for long: when it stops before finding
// every name, the session is told which file may still be readable.
const (
	linkSearchEntries = 200_000
	linkSearchTime    = 2 * time.Second
)

// linkBudget is what is left of one session start's search.
type linkBudget struct {
	entries  int
	deadline time.Time
	cut      bool
}

// newLinkBudget is one session start's budget.
func newLinkBudget() *linkBudget {
	return &linkBudget{entries: linkSearchEntries, deadline: time.Now().Add(linkSearchTime)}
}

func (b *linkBudget) spend() bool {
	if b.cut {
		return false
	}
	b.entries--
	if b.entries < 0 || (b.entries%1024 == 0 && time.Now().After(b.deadline)) {
		b.cut = true
		return false
	}
	return true
}

// findLinks opens the other names of each hidden file (not directory:
// those have no hard links) whose link count is above one. seen holds the
// paths already hidden. Notes say which files kept names the bounded
// search did not reach.
func findLinks(targets []target, mounts []mount, seen map[string]bool, budget *linkBudget) (found []target, notes []string) {
	for _, t := range targets {
		if t.dir {
			continue
		}
		var stx unix.Statx_t
		if err := unix.Statx(t.fd, "", unix.AT_EMPTY_PATH, unix.STATX_NLINK|unix.STATX_INO|unix.STATX_MNT_ID, &stx); err != nil || stx.Nlink <= 1 {
			continue
		}
		real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", t.fd))
		if err != nil || !filepath.IsAbs(real) {
			continue
		}
		names := map[string]bool{real: true}
		// match takes p as a name of the file; true once every name the
		// link count announces is known (the search stops there).
		match := func(p string) bool {
			if names[p] || seen[p] {
				names[p] = true
				return uint32(len(names)) >= stx.Nlink
			}
			fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return false
			}
			var a unix.Statx_t
			if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &a); err != nil ||
				a.Ino != stx.Ino || a.Dev_major != stx.Dev_major || a.Dev_minor != stx.Dev_minor {
				unix.Close(fd)
				return false
			}
			names[p] = true
			seen[p] = true
			found = append(found, target{path: p, fd: fd})
			return uint32(len(names)) >= stx.Nlink
		}
		dev := unix.Mkdev(stx.Dev_major, stx.Dev_minor)
		for _, root := range linkRoots(mounts, int(stx.Mnt_id), real) {
			if walkLinks(root.dir, root.skip, dev, stx.Ino, budget, match) || budget.cut {
				break
			}
		}
		if budget.cut && uint32(len(names)) < stx.Nlink {
			notes = append(notes, fmt.Sprintf("the hidden file %s has %d names (hard links); the bounded search found %d of them and hid them, and any other stays readable in this session", real, stx.Nlink, len(names)))
		}
	}
	return found, notes
}

// linkRoot is a directory to search, without its subtree skip ("" for
// none): already searched.
type linkRoot struct{ dir, skip string }

// linkRoots are where the names of the file at p, on the mount with id
// mountID, are searched: its directory, then each parent up to the
// mount's mount point, then the other mounts of the same file system.
func linkRoots(mounts []mount, mountID int, p string) []linkRoot {
	var on *mount
	for i := range mounts {
		if mounts[i].id == mountID {
			on = &mounts[i]
		}
	}
	if on == nil {
		return nil
	}
	var roots []linkRoot
	skip := ""
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		roots = append(roots, linkRoot{dir: dir, skip: skip})
		if _, ok := within(dir, on.mountpoint); !ok || dir == on.mountpoint || dir == "/" {
			break
		}
		skip = dir
	}
	for _, m := range mounts {
		if m.dev == on.dev && m.id != on.id {
			roots = append(roots, linkRoot{dir: m.mountpoint})
		}
	}
	return roots
}

// walkLinks calls match for each regular file below dir (not below skip)
// with inode ino on device dev, spending budget per entry, until match
// says every name is known (then it returns true).
func walkLinks(dir, skip string, dev uint64, ino uint64, budget *linkBudget, match func(string) bool) bool {
	done := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if !budget.spend() {
			return filepath.SkipAll
		}
		if err != nil {
			if d != nil && d.IsDir() {
				return filepath.SkipDir // unreadable: nothing below to find
			}
			return nil
		}
		if d.IsDir() {
			if p == skip {
				return filepath.SkipDir
			}
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil || st.Dev != dev {
				return filepath.SkipDir // another file system: its own mount
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil // gone since it was listed
		}
		if st.Ino == ino && st.Dev == dev && match(p) {
			done = true
			return filepath.SkipAll
		}
		return nil
	})
	return done
}
