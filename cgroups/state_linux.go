// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Procs returns the pids of the processes in the session (cgroup.procs), in
// the kernel's order. A process may exit, and its pid be reused, at any time
// after the read: treat the list as a snapshot.
func (s *Session) Procs() ([]int, error) {
	b, err := readFile(s.root.mount, s.rel("cgroup.procs"))
	if err != nil {
		return nil, wrapSession(s, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroups: session %s: cgroup.procs holds %q: %w", s.name, f, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// Populated reports whether any live process is in the session, from the
// "populated" key of cgroup.events. Unlike Procs it is a single kernel
// counter, so it is the reliable way to wait for a session to empty.
func (s *Session) Populated() (bool, error) {
	v, err := s.event("populated")
	return v == "1", err
}

// event reads one key of cgroup.events.
func (s *Session) event(key string) (string, error) {
	b, err := readFile(s.root.mount, s.rel("cgroup.events"))
	if err != nil {
		return "", wrapSession(s, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			return v, nil
		}
	}
	return "", fmt.Errorf("cgroups: session %s: cgroup.events has no %q key", s.name, key)
}
