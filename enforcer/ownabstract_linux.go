// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/loader"
)

// ownAbstractTTL is how long a name found to be the session's own is
// trusted without looking again: the session may reach it as often as it
// likes, and only the first connect in a spell costs a look at /proc.
const ownAbstractTTL = time.Second

// ownAbstract remembers which abstract names were found to be the
// session's own, and until when.
type ownAbstract struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// ResolveScoped decides what a Scoped event (an abstract unix name the
// datapath left to the session's Landlock scope) means: ok is false when
// the name belongs to a socket one of the session's processes holds (the
// scope let it through: nothing to report) or to no socket at all (the
// connect failed on its own), and true when only sockets outside the
// session have it, which the scope refused: ev is then returned as the
// denial it is, explained like every refused unix name. A socket found
// too late (its owner gone before the look) is not reported; a name whose
// own socket was closed and then bound outside within ownAbstractTTL is
// not reported either. Either way the kernel's decision stands: this only
// explains it.
func (s *Session) ResolveScoped(ev loader.Event) (loader.Event, bool) {
	if !ev.Scoped {
		return ev, true
	}
	ev.Scoped = false
	name := ev.Unix
	now := time.Now()
	s.own.mu.Lock()
	if t, ok := s.own.until[name]; ok && now.Before(t) {
		s.own.mu.Unlock()
		return ev, false
	}
	s.own.mu.Unlock()
	pids, _ := s.cg.Procs()
	inodes := abstractInodes(name, append([]int{int(ev.PID)}, pids...))
	if len(inodes) == 0 {
		return ev, false
	}
	if heldBy(inodes, pids) {
		s.own.mu.Lock()
		if s.own.until == nil {
			s.own.until = map[string]time.Time{}
		}
		for n, t := range s.own.until {
			if now.After(t) {
				delete(s.own.until, n)
			}
		}
		s.own.until[name] = now.Add(ownAbstractTTL)
		s.own.mu.Unlock()
		return ev, false
	}
	// Report only a name some process outside the session holds. A socket
	// no process holds is the session's own accepted end, left while its
	// peer is open after the session's server exited: the connect was the
	// session's own, and a line would name it an outside one.
	if !heldBy(inodes, allPIDs()) {
		return ev, false
	}
	return ev, true
}

// allPIDs lists the processes /proc shows.
func allPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// abstractInodes lists the inodes of the unix sockets bound to the
// abstract name ("@name", as loader.Event.Unix writes it) in the network
// namespace of the first of pids whose /proc/PID/net/unix can be read
// (the caller's own when none can). /proc shows NULs in names as '@'.
func abstractInodes(name string, pids []int) map[uint64]bool {
	want := strings.ReplaceAll(name, "\x00", "@")
	var f *os.File
	for _, pid := range pids {
		var err error
		if f, err = os.Open(fmt.Sprintf("/proc/%d/net/unix", pid)); err == nil {
			break
		}
	}
	if f == nil {
		var err error
		if f, err = os.Open("/proc/self/net/unix"); err != nil {
			return nil
		}
	}
	defer f.Close()
	inodes := map[uint64]bool{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		ino, path, ok := unixLine(sc.Text())
		if ok && path == want {
			inodes[ino] = true
		}
	}
	return inodes
}

// unixLine splits a line of /proc/net/unix ("Num RefCount Protocol Flags
// Type St Inode Path") into its inode and its path: what follows the
// seventh field and one space (a path may hold spaces).
func unixLine(line string) (uint64, string, bool) {
	rest := line
	var ino string
	for i := 0; i < 7; i++ {
		rest = strings.TrimLeft(rest, " ")
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			return 0, "", false
		}
		ino, rest = rest[:j], rest[j:]
	}
	n, err := strconv.ParseUint(ino, 10, 64)
	if err != nil || len(rest) < 2 {
		return 0, "", false
	}
	return n, rest[1:], true
}

// heldBy reports whether one of pids has a descriptor of one of the
// socket inodes.
func heldBy(inodes map[uint64]bool, pids []int) bool {
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			l, err := os.Readlink(dir + "/" + e.Name())
			if err != nil {
				continue
			}
			v, ok := strings.CutPrefix(l, "socket:[")
			if !ok {
				continue
			}
			if ino, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil && inodes[ino] {
				return true
			}
		}
	}
	return false
}
