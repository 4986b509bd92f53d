// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SocketOwner names the process of the session that owns the socket bound
// to local (a DNS query's source on loopback), as "comm[pid]", or "" when
// it cannot be found (the process may be gone already). It reads /proc, so
// callers use it only for lines they are going to print.
func (s *Session) SocketOwner(local netip.AddrPort) string {
	if !local.IsValid() {
		return "" // the session's proxy asked, not a program
	}
	pids, err := s.cg.Procs()
	if err != nil {
		return ""
	}
	for _, pid := range pids {
		inode := socketInode(pid, local)
		if inode == "" {
			continue
		}
		// The socket is in this pid's namespace; find who holds it.
		for _, p := range pids {
			if holds(p, inode) {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
				return fmt.Sprintf("%s[%d]", strings.TrimSpace(string(comm)), p)
			}
		}
		return ""
	}
	return ""
}

// socketInode finds local's socket inode in pid's network namespace.
func socketInode(pid int, local netip.AddrPort) string {
	port := fmt.Sprintf(":%04X", local.Port())
	for _, f := range []string{"udp", "udp6", "tcp", "tcp6"} {
		fh, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && strings.HasSuffix(fields[1], port) {
				fh.Close()
				return fields[9]
			}
		}
		fh.Close()
	}
	return ""
}

func holds(pid int, inode string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}
