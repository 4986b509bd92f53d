// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// mountEntry is the part of a /proc/<pid>/mountinfo line this package needs.
type mountEntry struct {
	root       string   // path of the mount's root inside its filesystem ("/", or "/.." seen from another cgroupns)
	mountPoint string   // where it is mounted, unescaped
	fsType     string   // "cgroup2", "cgroup", ...
	superOpts  []string // per-superblock options; for cgroup v1 they name the bound controllers
}

// ParseMountInfo returns the mount point of the cgroup2 filesystem described
// by r, which has the format of /proc/self/mountinfo (proc(5)).
//
// When several cgroup2 mounts are listed, one whose root is "/" is preferred:
// it shows the whole hierarchy of the reader's cgroup namespace, whereas a
// bind mount of a subtree, or a mount made in another cgroup namespace (root
// "/.."), shows only part of it. Mounts hidden by a later mount on the same
// mount point are skipped. Octal escapes such as \040 are decoded.
//
// It wraps ErrNoCgroup2 when no cgroup2 mount is listed.
func ParseMountInfo(r io.Reader) (string, error) {
	entries, err := parseMountInfo(r)
	if err != nil {
		return "", err
	}
	cands := cgroup2Candidates(entries)
	if len(cands) == 0 {
		return "", fmt.Errorf("%w: no cgroup2 line in mountinfo", ErrNoCgroup2)
	}
	return cands[0].mountPoint, nil
}

// parseMountInfo splits mountinfo into entries. The fields before the "-"
// separator are positional, but the optional fields between them are
// variable in number, so the separator is searched for.
func parseMountInfo(r io.Reader) ([]mountEntry, error) {
	var entries []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+3 {
			return nil, fmt.Errorf("cgroups: mountinfo line %d is malformed: %q", n, line)
		}
		e := mountEntry{
			root:       unescapeMountField(f[3]),
			mountPoint: unescapeMountField(f[4]),
			fsType:     f[sep+1],
		}
		if len(f) > sep+3 {
			e.superOpts = strings.Split(f[sep+3], ",")
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroups: read mountinfo: %w", err)
	}
	return entries, nil
}

// cgroup2Candidates returns the visible cgroup2 mounts, best first.
func cgroup2Candidates(entries []mountEntry) []mountEntry {
	var full, partial []mountEntry
	for i, e := range entries {
		if e.fsType != "cgroup2" || shadowed(entries, i) {
			continue
		}
		if e.root == "/" {
			full = append(full, e)
		} else {
			partial = append(partial, e)
		}
	}
	return append(full, partial...)
}

// shadowed reports whether a later mount sits on the same mount point, which
// hides entry i from path lookups.
func shadowed(entries []mountEntry, i int) bool {
	for _, later := range entries[i+1:] {
		if later.mountPoint == entries[i].mountPoint {
			return true
		}
	}
	return false
}

// v1MountOf returns where a cgroup v1 hierarchy that has controller bound to
// it is mounted, or "" when none is. A controller bound to v1 cannot serve
// cgroup2 at the same time, which is why hybrid machines lack them in v2.
func v1MountOf(entries []mountEntry, controller string) string {
	for _, e := range entries {
		if e.fsType == "cgroup" && slices.Contains(e.superOpts, controller) {
			return e.mountPoint
		}
	}
	return ""
}

// unescapeMountField decodes the \ooo octal escapes the kernel uses for space,
// tab, newline and backslash in mountinfo paths. Anything that is not a
// well-formed escape is kept as it is.
func unescapeMountField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && '0' <= s[i+1] && s[i+1] <= '3' && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			b.WriteByte(v)
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return '0' <= c && c <= '7' }
