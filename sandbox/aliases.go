// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// A hidden file is hidden by file identity, not by path: the same file
// can be reachable through more than one mount of its file system in a
// session's view (a bind-mounted home, /workspaces in a dev container, a
// second mount of the same device), and covering only the path the
// pattern named would leave it readable through the others. Each mount
// of /proc/self/mountinfo shows a subtree (its root) of a file system
// (its device) at a mount point; a file at fs-path F on that device is
// also reachable at mountpoint + (F - root) through every mount whose root
// is F or above it. The candidates are then opened and kept only when
// they are the same file (device and inode), so a mount stacked over an
// alias, or a stale table, hides nothing it should not.

// mount is one line of /proc/self/mountinfo.
type mount struct {
	id         int
	dev        string // "major:minor"
	root       string // the subtree of the file system it shows
	mountpoint string
}

// parseMounts reads /proc/self/mountinfo lines.
func parseMounts(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("mountinfo: mount id %q: %w", f[0], err)
		}
		out = append(out, mount{id: id, dev: f[2], root: unescapeMount(f[3]), mountpoint: unescapeMount(f[4])})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within reports whether p is dir or below it (both clean, absolute).
func within(p, dir string) (rest string, ok bool) {
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if p == dir {
		return "", true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir)+1:], true
	}
	return "", false
}

// aliasPaths are the other paths at which the file at p (a resolved,
// absolute path in the view mounts describes) is reachable: p is on the
// mount with id mountID; every other mount of the same device whose root
// is at or above the file's path in its file system shows it too. The
// result is candidates only: the caller checks each is the same file.
func aliasPaths(mounts []mount, mountID int, p string) []string {
	var on *mount
	for i := range mounts {
		if mounts[i].id == mountID {
			on = &mounts[i]
			break
		}
	}
	if on == nil {
		return nil
	}
	rest, ok := within(p, on.mountpoint)
	if !ok {
		return nil
	}
	fsPath := path.Join(on.root, rest)
	var out []string
	seen := map[string]bool{p: true}
	for _, m := range mounts {
		if m.id == mountID || m.dev != on.dev {
			continue
		}
		r, ok := within(fsPath, m.root)
		if !ok {
			continue
		}
		alias := path.Join(m.mountpoint, r)
		if !seen[alias] {
			seen[alias] = true
			out = append(out, alias)
		}
	}
	return out
}
