// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxAncestors bounds the walk from a container process up to its shim.
const maxAncestors = 64

// RecordOf reads the engine's record of container id, one of whose
// processes is pid. It finds the OCI bundle through pid's first ancestor
// outside the container's cgroup (the engine's shim), and reads only files
// that are root's and writable by no one else.
//
// A container seen while it starts may still hang below the runtime
// (runc), which exits a moment later and leaves the shim above it: the
// walk is tried again, a few times within half a second, before the
// container is taken as unreadable (which confines it to loopback).
func RecordOf(pid int, id string) (Record, error) {
	var bundle string
	var err error
	for try := 0; try < bundleTries; try++ {
		if try > 0 {
			time.Sleep(bundleRetry)
		}
		if bundle, err = BundleOf(pid, id); err == nil {
			break
		}
	}
	if err != nil {
		return Record{}, err
	}
	return ReadRecord(id, bundle, readTrusted)
}

// bundleTries and bundleRetry bound RecordOf's walks.
const (
	bundleTries = 10
	bundleRetry = 50 * time.Millisecond
)

// BundleOf returns the OCI bundle directory of container id, one of whose
// processes is pid.
func BundleOf(pid int, id string) (string, error) {
	cg, err := unifiedCgroup(pid)
	if err != nil {
		return "", err
	}
	p := pid
	for range maxAncestors {
		ppid, err := parentOf(p)
		if err != nil {
			return "", fmt.Errorf("containers: container %s: %w", id[:12], err)
		}
		if ppid <= 1 {
			return "", fmt.Errorf("containers: container %s: process %d has no engine shim above it", id[:12], pid)
		}
		pcg, err := unifiedCgroup(ppid)
		if err != nil {
			return "", fmt.Errorf("containers: container %s: %w", id[:12], err)
		}
		if pcg == cg || strings.HasPrefix(pcg, cg+"/") {
			p = ppid
			continue
		}
		return shimBundle(ppid, id)
	}
	return "", fmt.Errorf("containers: container %s: no process outside its cgroup within %d ancestors of %d", id[:12], maxAncestors, pid)
}

// shimBundle is the bundle of the shim process pid: its --bundle argument
// (conmon) or its working directory (containerd's shims).
func shimBundle(pid int, id string) (string, error) {
	if uid, err := procUID(pid); err != nil || uid != 0 {
		return "", fmt.Errorf("containers: container %s: the process above it (%d) is not root's (uid %d, %v): no engine shim", id[:12], pid, uid, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", fmt.Errorf("containers: container %s: its shim: %w", id[:12], err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	bundle := BundleFromArgs(args)
	if bundle == "" {
		if bundle, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
			return "", fmt.Errorf("containers: container %s: its shim's working directory: %w", id[:12], err)
		}
	}
	if !BundleNamesID(bundle, id) {
		return "", fmt.Errorf("containers: container %s: its shim %d (%s) names no bundle of it (found %s)", id[:12], pid, args[0], bundle)
	}
	return bundle, nil
}

func parentOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold anything: the
	// fields after the last ')' are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strconv.Atoi(f[1])
}

// unifiedCgroup is pid's cgroup v2 path, as /proc/PID/cgroup's "0::" line.
func unifiedCgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("/proc/%d/cgroup: no cgroup v2 line", pid)
}

func procUID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return -1, errors.New("no Uid line")
}

// readTrusted reads a file of an engine's record: a regular file, not a
// symlink, owned by root and writable by no one else.
func readTrusted(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%s: not a root-owned regular file writable only by root (mode %#o, uid %d): not an engine's record", name, st.Mode&0o7777, st.Uid)
	}
	const maxRecord = 4 << 20
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > maxRecord {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxRecord)
	}
	return b, nil
}
