// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// fileIDKernfs is the file handle type of cgroupfs (FILEID_KERNFS): its
// handle is the 64-bit cgroup id that bpf_get_current_cgroup_id returns.
const fileIDKernfs = 0xfe

// SessionOf names the session that the cgroup with id belongs to: the
// root's child that is that cgroup or one of its ancestors. A kernel event
// carries the cgroup of the task, which is a session's own cgroup, or one
// below it when something (a container runtime given the session as its
// cgroup parent) made children there. The error wraps os.ErrNotExist when
// no such cgroup exists any more, and says so when it is not under the
// root. It opens the cgroup by its handle, which needs CAP_DAC_READ_SEARCH.
func (r *Root) SessionOf(id uint64) (string, error) {
	mfd, err := unix.Open(r.mount, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("cgroup %d: open %s: %w", id, r.mount, err)
	}
	defer unix.Close(mfd)
	var handle [8]byte
	binary.NativeEndian.PutUint64(handle[:], id)
	fd, err := unix.OpenByHandleAt(mfd, unix.NewFileHandle(fileIDKernfs, handle[:]), unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		if err == unix.ESTALE || err == unix.ENOENT {
			err = os.ErrNotExist
		}
		return "", fmt.Errorf("cgroup %d: %w", id, err)
	}
	defer unix.Close(fd)
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return "", fmt.Errorf("cgroup %d: %w", id, err)
	}
	rel, err := filepath.Rel(r.Path(), p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("cgroup %d (%s) is not a session of %s", id, p, r.Path())
	}
	name, _, _ := strings.Cut(rel, "/")
	return name, nil
}
