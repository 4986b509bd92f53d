// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"strings"
)

// maxNameLen leaves room below NAME_MAX (255) and keeps /proc/<pid>/cgroup
// lines readable.
const maxNameLen = 128

// validName accepts a conservative alphabet on purpose: names become one
// directory component under cgroupfs and appear in /proc/<pid>/cgroup lines,
// audit logs and metrics labels, so a '/', "..", a newline or a space in them
// would be an escape or a parsing hazard somewhere downstream. The "cgroup."
// prefix is refused because it is the kernel's namespace for interface files.
func validName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidName)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: %q is longer than %d bytes", ErrInvalidName, name, maxNameLen)
	}
	if !isAlnum(name[0]) {
		return fmt.Errorf("%w: %q must start with a letter or digit", ErrInvalidName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && !strings.ContainsRune("._-@+", rune(c)) {
			return fmt.Errorf("%w: %q contains %q; use letters, digits and . _ - @ +", ErrInvalidName, name, c)
		}
	}
	if strings.HasPrefix(name, "cgroup.") {
		return fmt.Errorf("%w: %q uses the kernel's \"cgroup.\" prefix", ErrInvalidName, name)
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
