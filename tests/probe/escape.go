// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// move is one attempt to move the probe into another cgroup.
type move struct {
	Path  string `json:"path"` // the cgroup.procs file written
	OK    bool   `json:"ok"`
	Errno string `json:"errno,omitempty"`
	Error string `json:"error,omitempty"`
}

// runEscapeCgroup tries to leave the session cgroup by writing its pid into
// cgroup.procs of every ancestor up to the cgroup2 mount's root, then runs
// the wrapped action. The attempts are reported, not judged: a confined,
// unprivileged agent must see every one fail, and the action must still be
// confined.
func runEscapeCgroup(args []string, r *result) error {
	from, err := ownCgroup()
	r.CgroupFrom = from
	if err != nil {
		r.Escapes = append(r.Escapes, failedMove("/proc/self/cgroup", err))
	} else if mnt, root, err := cgroup2Mount(from); err != nil {
		r.Escapes = append(r.Escapes, failedMove("/proc/self/mountinfo", err))
	} else {
		dir := filepath.Join(mnt, strings.TrimPrefix(from, root))
		for dir != mnt && strings.HasPrefix(dir, mnt) {
			dir = filepath.Dir(dir)
			r.Escapes = append(r.Escapes, tryMove(filepath.Join(dir, "cgroup.procs")))
		}
	}
	r.CgroupTo, _ = ownCgroup()

	sub := perform(args)
	r.Action = sub
	if !sub.OK {
		return resultError{sub}
	}
	r.Reply = sub.Reply
	return nil
}

// tryMove writes our pid into a cgroup.procs file.
func tryMove(procs string) move {
	f, err := os.OpenFile(procs, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(os.Getpid()))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return failedMove(procs, err)
	}
	return move{Path: procs, OK: true}
}

func failedMove(path string, err error) move {
	m := move{Path: path, Error: err.Error()}
	var errno unix.Errno
	if errors.As(err, &errno) {
		m.Errno = unix.ErrnoName(errno)
	}
	return m
}

// ownCgroup returns the cgroup2 path from /proc/self/cgroup's "0::" line.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("no cgroup2 (0::) line in /proc/self/cgroup")
}

// cgroup2Mount finds a cgroup2 mount in /proc/self/mountinfo whose root
// contains cgroup; it returns the mount point and the mount's root.
func cgroup2Mount(cgroup string) (mountpoint, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 || tail[0] != "cgroup2" {
			continue
		}
		root, mnt := unescapeMountinfo(fields[3]), unescapeMountinfo(fields[4])
		if root == "/" || cgroup == root || strings.HasPrefix(cgroup, root+"/") {
			return mnt, strings.TrimSuffix(root, "/"), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", "", err
	}
	return "", "", fmt.Errorf("no cgroup2 mount holding %s", cgroup)
}

// unescapeMountinfo undoes the octal escapes (\040 and friends) of
// /proc/self/mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
