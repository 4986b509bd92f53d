// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/internal/atomicfile"
	"github.com/sluice-dev/sluice/sessions"
)

// Adopting a running process (POST /v1/sessions/adopt, `sluice adopt`).
//
// A CI runner's worker process (GitHub's Runner.Worker) is already running
// when the job's sluice step starts, and it is the parent of every later
// step, `uses:` and post steps included. Root asks the daemon to put it in
// a session of its own; from then on everything it starts is born in that
// session, confined. (Not to be confused with re-adoption, a restarted
// daemon taking over the sessions it finds: adopted sessions are
// re-attached then too.)
//
// The session is a whole-container session in all but its origin: the
// daemon creates its cgroup under sluice's root, attaches it as a session
// with the machine allowlist (Enforcer.AttachSession, as attachContainer
// does) with its resolver in the process's network namespace, and only
// then moves the process in (cgroup v2 cgroup.procs moves all of its
// threads). There is no moment in which the process's new connections are
// judged by nothing: before the move they are the unconfined process's
// own, after it the session's policy judges them; the session is
// configured before the first process is in it. (Had it been moved first,
// the datapath would have refused it everything but loopback until the
// attach, as any cgroup under the root that is no session yet.)
//
// What is not moved: sockets the process made before keep the cgroup
// they were made in, so the datapath never judges them: its established
// connections (a CI worker's connection to the job service) continue, and
// so would a socket it made but had not connected yet. Processes it had
// started before stay where they are. Only the network is confined: a
// running process cannot be given a Landlock domain or a mount namespace,
// so the sandbox of `sluice run` sessions does not apply.
//
// The pid is pinned with a pidfd from the first look at /proc to the
// move: the network namespace is opened through /proc/PID only while the
// pidfd says the process lives (a reused pid cannot hand over another
// namespace), and after the write to cgroup.procs the pidfd says whether
// the pid written was still this process's.
//
// The session belongs to root (as container sessions do), ends when its
// cgroup empties, and has no exit status (the process is not the
// daemon's child). Its cgroup is named adopt-PID-RANDOM (wrapped as a
// scope name under systemd): a restarted daemon finds it by that name,
// as it finds containers, and attaches it again, in audit mode if it was
// (the record beside the other sessions' says so; without it, enforcing:
// fail closed). A process inside it that asks for a session (a nested
// `sluice run`) is a confined caller like any other: its session is at
// most this one's policy.

// adoptedBase is the base name (Root.SessionName's argument) of an
// adopted process's session cgroup: the pid it was made for and 12 hex
// digits.
var adoptedBase = regexp.MustCompile(`^adopt-[0-9]+-[0-9a-f]{12}$`)

// isAdoptedName reports whether name, a child of the root, is an adopted
// process's session cgroup.
func (s *Server) isAdoptedName(name string) bool {
	// SessionName wraps a base the same way for every base (a scope in
	// the systemd slice, or nothing at all).
	pre, suf, _ := strings.Cut(s.e.Root().SessionName("\x00"), "\x00")
	base, ok := strings.CutPrefix(name, pre)
	if !ok {
		return false
	}
	base, ok = strings.CutSuffix(base, suf)
	return ok && adoptedBase.MatchString(base)
}

// adoptedPID is the pid an adopted session's cgroup was made for, from
// its name (0 if it does not say).
func (s *Server) adoptedPID(name string) int {
	pre, _, _ := strings.Cut(s.e.Root().SessionName("\x00"), "\x00")
	f := strings.Split(strings.TrimPrefix(name, pre), "-")
	if len(f) < 3 {
		return 0
	}
	pid, _ := strconv.Atoi(f[1])
	return pid
}

// maxAdoptLabel bounds the label of an adoption, which appears in audit
// lines and `sluice sessions`.
const maxAdoptLabel = 64

// adoptRecord is what a restarted daemon needs to attach an adopted
// process's session again, beside the other sessions' records (under
// another suffix: adoptAll takes every *.json for a `sluice run` one).
type adoptRecord struct {
	PID     int       `json:"pid"`
	Comm    string    `json:"comm"`
	Label   string    `json:"label,omitempty"`
	Audit   bool      `json:"audit,omitempty"`
	Created time.Time `json:"created"`
}

func (s *Server) adoptRecordPath(name string) string {
	return filepath.Join(s.stateDir(), name+".adopted")
}

func (s *Server) handleAdoptPID(w http.ResponseWriter, r *http.Request) {
	c, err := s.peerOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	// Who first: a caller that may not adopt learns nothing about pids.
	who, _ := s.caller(c.peer)
	if err := who.mayAdopt(); err != nil {
		s.auditRefusal(c.peer, err)
		writeErr(w, err)
		return
	}
	var req api.AdoptRequest
	if err := decode(w, r, &req); err != nil {
		writeErr(w, err)
		return
	}
	ss, err := s.adoptPID(c.peer, req)
	if err != nil {
		s.auditRefusal(c.peer, err)
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ss.infoNow())
}

// adoptTarget is what the daemon found out about the process to adopt.
type adoptTarget struct {
	pid  int
	comm string
	exe  string
	uid  uint32
}

// adoptPID validates an adoption request and makes its session. Every
// refusal changes nothing.
func (s *Server) adoptPID(p peer, req api.AdoptRequest) (*session, error) {
	if err := samePIDNamespace(p); err != nil {
		return nil, err
	}
	label, err := adoptLabel(req.Name)
	if err != nil {
		return nil, err
	}
	if req.PID <= 1 {
		return nil, fail(http.StatusBadRequest, "pid: want the id of a running process above 1 (got %d)", req.PID)
	}
	pidfd, err := unix.PidfdOpen(req.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, fail(http.StatusNotFound, "pid %d: no such process", req.PID)
	}
	if err != nil {
		return nil, fail(http.StatusInternalServerError, "pid %d: pidfd_open: %v", req.PID, err)
	}
	keep := false
	defer func() {
		if !keep {
			_ = unix.Close(pidfd)
		}
	}()

	// One adoption at a time, and never while the root scan (which
	// attaches adopted cgroups a restarted daemon finds) looks at one:
	// the check that the process is in no session holds until the move.
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	t, err := s.inspectTarget(req.PID, pidfd)
	if err != nil {
		return nil, err
	}
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", req.PID))
	if err != nil || !pidfdAlive(pidfd) {
		if netns != nil {
			netns.Close()
		}
		return nil, fail(http.StatusNotFound, "pid %d exited before it could be adopted", req.PID)
	}
	defer netns.Close()

	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := s.e.Root().SessionName(fmt.Sprintf("adopt-%d-%s", t.pid, hex.EncodeToString(rnd[:])))
	cg, err := s.e.Root().NewSession(name)
	if err != nil {
		return nil, fail(http.StatusInternalServerError, "adopt pid %d: create the session's cgroup: %v", t.pid, err)
	}
	rec := adoptRecord{PID: t.pid, Comm: t.comm, Label: label, Audit: req.Audit, Created: time.Now().UTC()}
	ss, err := s.attachAdopted(name, rec, netns, pidfd)
	if err != nil {
		_ = cg.Remove(5 * time.Second)
		return nil, fail(http.StatusInternalServerError, "adopt pid %d: %v", t.pid, err)
	}
	// The session is in force on the empty cgroup: now the process.
	if err := cg.Move(t.pid); err != nil {
		ss.pidfd = -1 // still ours to close (keep is false)
		s.dropAttached(ss)
		switch {
		case errors.Is(err, unix.ESRCH):
			return nil, fail(http.StatusNotFound, "pid %d exited before it could be adopted", t.pid)
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
			return nil, fail(http.StatusBadRequest, "pid %d (%s) cannot be moved into a session: %v", t.pid, t.comm, err)
		}
		return nil, fail(http.StatusInternalServerError, "adopt pid %d: %v", t.pid, err)
	}
	keep = true
	if !pidfdAlive(pidfd) {
		// The process exited around the write, so the pid written may
		// have been another's by then (a reuse within microseconds):
		// whatever is in the cgroup now stays confined, and the session
		// ends when it empties, as every session does.
		go s.waitAdopted(ss)
		return nil, fail(http.StatusNotFound, "pid %d exited while it was being adopted (session %s ends when its cgroup is empty)", t.pid, name)
	}
	if err := s.saveAdoptRecord(name, rec); err != nil {
		// Confined all the same; a restarted daemon would attach it
		// enforcing (no record: fail closed).
		s.logf("adopted session %s: %v", name, err)
	}
	msg := fmt.Sprintf("adopted pid %d (%s) into session %s%s", t.pid, t.comm, name, labelNote(label))
	if req.Audit {
		msg += " in audit mode"
	}
	s.emit(audit.Event{Type: audit.SessionStarted, Session: name, PID: uint32(t.pid), UID: &t.uid, Exe: t.exe,
		Entries: sessions.PolicyStrings(ss.Enforced()), Message: msg})
	go s.waitAdopted(ss)
	return ss, nil
}

// attachAdopted makes the cgroup name (under the root, empty or holding
// the adopted process) a session with the machine allowlist, its resolver
// in netns, and registers it. pidfd (or -1) is the adopted process's, for
// signals; the session owns it from now on.
func (s *Server) attachAdopted(name string, rec adoptRecord, netns *os.File, pidfd int) (*session, error) {
	ss := s.attached(api.SessionInfo{Name: name, UID: 0, Created: rec.Created, PID: rec.PID, Audit: rec.Audit,
		Argv: []string{fmt.Sprintf("adopted pid %d (%s)%s", rec.PID, rec.Comm, labelNote(rec.Label))}}, nil, nil)
	// The options of a container session (attachContainer), and the API
	// socket: a nested `sluice run` of the adopted process reaches the
	// daemon through it. No proxy: nothing in a running process's
	// environment could name its port.
	es, err := s.e.AttachSession(name, enforcer.Options{Policy: s.machine.Load(), Audit: rec.Audit, DNS: ss.DNSOptions(), Verify: &enforcer.VerifyOptions{OnRefuse: ss.NameEvent},
		SharedEvents: true, NetNS: netns, UnixSockets: []string{s.cfg.SocketPath}})
	if err != nil {
		return nil, err
	}
	ss.Bind(es)
	ss.pidfd = pidfd
	s.register(ss)
	return ss, nil
}

// waitAdopted ends an adopted session when its cgroup empties, and
// forgets its record; a daemon that stops first leaves both to the next.
func (s *Server) waitAdopted(ss *session) {
	ss.Wait()
	select {
	case <-ss.Done():
		_ = os.Remove(s.adoptRecordPath(ss.Info.Name))
	default:
	}
}

// reattachAdoptedOnce is the root scan's step for the cgroup of an
// adopted process (containers_linux.go): it attaches one that no session
// of this daemon holds, trying again at most every 5 s after a failure.
// Until then the process's new connections stay refused but for loopback
// (a cgroup under the root that is no session).
func (s *Server) reattachAdoptedOnce(name string, failed map[string]time.Time) {
	s.mu.Lock()
	_, known := s.sessions[name]
	s.mu.Unlock()
	if known || time.Since(failed[name]) < 5*time.Second {
		return
	}
	if err := s.reattachAdopted(name); err != nil {
		failed[name] = time.Now()
		if err != errNoProcess {
			// The daemon's log, not a session_refused line: that type
			// names the API caller refused, and there is none.
			s.logf("adopted session %s not confined by its policy yet (its traffic stays refused but for loopback): %v", name, err)
		}
		return
	}
	delete(failed, name)
}

// reattachAdopted attaches again, after a daemon restart, the session of
// an adopted process that the previous daemon left running (the root scan
// finds its cgroup by name). Its network namespace comes from a process in
// it, as a container's does.
func (s *Server) reattachAdopted(name string) error {
	s.adoptMu.Lock()
	defer s.adoptMu.Unlock()
	s.mu.Lock()
	_, known := s.sessions[name]
	s.mu.Unlock()
	if known {
		return nil // adopted through the API meanwhile
	}
	netns, _, err := containerNetNS(filepath.Join(s.e.Root().Path(), name))
	if err != nil {
		return err
	}
	defer netns.Close()
	rec, err := s.readAdoptRecord(name)
	if err != nil {
		// Attached all the same, enforcing: fail closed.
		s.logf("adopted session %s: %v; attaching it enforcing", name, err)
		rec = adoptRecord{PID: s.adoptedPID(name), Comm: "?", Created: time.Now().UTC()}
	}
	pidfd, ok := supervisorPidfd(rec.PID, name)
	if !ok {
		pidfd = -1
		rec.PID = 0 // gone, or no longer in the session: not ours to signal
	}
	ss, err := s.attachAdopted(name, rec, netns, pidfd)
	if err != nil {
		if pidfd >= 0 {
			_ = unix.Close(pidfd)
		}
		return err
	}
	s.emit(audit.Event{Type: audit.SessionAdopted, Session: name,
		Message: fmt.Sprintf("session %s of adopted pid %d (%s) attached again after a daemon restart", name, rec.PID, rec.Comm)})
	go s.waitAdopted(ss)
	return nil
}

func (s *Server) saveAdoptRecord(name string, rec adoptRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.adoptRecordPath(name), b, 0o600, nil); err != nil {
		return fmt.Errorf("save the record of %s: %w", name, err)
	}
	return nil
}

func (s *Server) readAdoptRecord(name string) (adoptRecord, error) {
	var rec adoptRecord
	b, err := os.ReadFile(s.adoptRecordPath(name))
	if err != nil {
		return rec, fmt.Errorf("read its record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("its record %s: %w", s.adoptRecordPath(name), err)
	}
	return rec, nil
}

// sweepAdoptRecords removes the records of adopted sessions whose cgroup
// is gone (the process exited while no daemon ran, and Open reclaimed the
// empty cgroup).
func (s *Server) sweepAdoptRecords() {
	paths, _ := filepath.Glob(filepath.Join(s.stateDir(), "*.adopted"))
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".adopted")
		if _, err := os.Stat(filepath.Join(s.e.Root().Path(), name)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(p)
		}
	}
}

// inspectTarget reads what the daemon must know about pid before it
// adopts it, and refuses what must not be adopted. pidfd pins the process:
// what /proc said is checked to have been about it.
func (s *Server) inspectTarget(pid, pidfd int) (adoptTarget, error) {
	t := adoptTarget{pid: pid}
	proc := fmt.Sprintf("/proc/%d", pid)
	stat, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return t, fail(http.StatusNotFound, "pid %d: no such process", pid)
	}
	cg, cgErr := os.ReadFile(proc + "/cgroup")
	status, stErr := os.ReadFile(proc + "/status")
	comm, _ := os.ReadFile(proc + "/comm")
	t.exe, _ = os.Readlink(proc + "/exe")
	if !pidfdAlive(pidfd) || cgErr != nil || stErr != nil {
		return t, fail(http.StatusNotFound, "pid %d exited before it could be adopted", pid)
	}
	t.comm = strings.TrimSpace(string(comm))
	if t.exe == "" {
		t.exe = "?"
	}
	_, _, flags, err := parseStat(stat)
	if err != nil {
		return t, fail(http.StatusInternalServerError, "pid %d: %v", pid, err)
	}
	if flags&pfKthread != 0 {
		return t, fail(http.StatusBadRequest, "pid %d (%s) is a kernel thread: it has no network of its own to confine", pid, t.comm)
	}
	if uid, ok := statusUID(status); ok {
		t.uid = uid
	}
	if pid == os.Getpid() {
		return t, fail(http.StatusBadRequest, "pid %d is the sluice daemon itself: it cannot confine itself", pid)
	}
	if anc, ok := daemonAncestor(pid); ok {
		return t, fail(http.StatusBadRequest, "pid %d (%s) is an ancestor of the sluice daemon (%s): the daemon would be moved with what it starts", pid, t.comm, anc)
	}
	if name, inside := s.inSluiceTree(string(cg)); inside {
		s.mu.Lock()
		_, known := s.sessions[name]
		s.mu.Unlock()
		if known {
			return t, fail(http.StatusConflict, "pid %d (%s) is already in sluice session %s", pid, t.comm, name)
		}
		return t, fail(http.StatusConflict, "pid %d (%s) is already in sluice's cgroup tree (%s): it is confined, or is being confined", pid, t.comm, name)
	}
	return t, nil
}

// inSluiceTree reports whether the cgroup v2 line of a /proc/PID/cgroup
// file lies in the root, and which child of the root it is in.
func (s *Server) inSluiceTree(procCgroup string) (string, bool) {
	mount, err := cgroups.Mount()
	if err != nil {
		return "", true // cannot tell: refuse
	}
	rel, err := filepath.Rel(mount, s.e.Root().Path())
	if err != nil {
		return "", true // cannot tell: refuse
	}
	root := "/" + rel + "/"
	for _, line := range strings.Split(procCgroup, "\n") {
		path, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		rest, inside := strings.CutPrefix(path+"/", root)
		if !inside {
			return "", false
		}
		name, _, _ := strings.Cut(rest, "/")
		return name, true
	}
	return "", true // no cgroup v2 line: cannot tell, refuse
}

// pfKthread is PF_KTHREAD in /proc/PID/stat's flags field.
const pfKthread = 0x00200000

// parseStat reads the comm, ppid and flags of a /proc/PID/stat line; the
// comm, in parentheses, may itself hold spaces and parentheses.
func parseStat(b []byte) (comm string, ppid int, flags uint64, err error) {
	line := string(b)
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("unreadable stat line %q", line)
	}
	f := strings.Fields(line[end+1:])
	// state ppid pgrp session tty_nr tpgid flags ...
	if len(f) < 7 {
		return "", 0, 0, fmt.Errorf("short stat line %q", line)
	}
	ppid, err = strconv.Atoi(f[1])
	if err == nil {
		flags, err = strconv.ParseUint(f[6], 10, 64)
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("stat line %q: %w", line, err)
	}
	return line[open+1 : end], ppid, flags, nil
}

// statusUID is the real uid of a /proc/PID/status file.
func statusUID(b []byte) (uint32, bool) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if n, err := strconv.ParseUint(f[0], 10, 32); err == nil {
					return uint32(n), true
				}
			}
		}
	}
	return 0, false
}

// daemonAncestor reports whether pid is an ancestor of the daemon, and
// says which ("parent", "grandparent", "ancestor 3 levels up").
func daemonAncestor(pid int) (string, bool) {
	cur := os.Getpid()
	for level := 1; level <= 4096; level++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cur))
		if err != nil {
			return "", false
		}
		_, ppid, _, err := parseStat(b)
		if err != nil || ppid <= 0 {
			return "", false
		}
		if ppid == pid {
			switch level {
			case 1:
				return "its parent", true
			case 2:
				return "its grandparent", true
			}
			return fmt.Sprintf("%d levels up", level), true
		}
		cur = ppid
	}
	return "", false
}

// samePIDNamespace refuses a caller whose pids are not the daemon's: the
// pid it names would be another process here.
func samePIDNamespace(p peer) error {
	mine, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return fmt.Errorf("read the daemon's pid namespace: %w", err)
	}
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.PID))
	if err != nil || !p.alive() {
		return fail(http.StatusForbidden, "the caller's pid namespace cannot be read: a process is adopted only for a caller that shares the daemon's pid namespace")
	}
	if theirs != mine {
		return fail(http.StatusForbidden, "the caller is in another pid namespace (%s, the daemon's is %s): the pid it names is not the daemon's to adopt", theirs, mine)
	}
	return nil
}

// adoptLabel checks an adoption's label: short and printable, since it
// goes into audit lines and `sluice sessions` as it is.
func adoptLabel(name string) (string, error) {
	if len(name) > maxAdoptLabel {
		return "", fail(http.StatusBadRequest, "name: at most %d bytes (got %d)", maxAdoptLabel, len(name))
	}
	if !utf8.ValidString(name) {
		return "", fail(http.StatusBadRequest, "name: not valid UTF-8")
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return "", fail(http.StatusBadRequest, "name: %q holds a character that is not printable", name)
		}
	}
	return name, nil
}

// labelNote is the label as messages carry it.
func labelNote(label string) string {
	if label == "" {
		return ""
	}
	return ": " + label
}

// pidfdAlive reports whether the process of pidfd has not been reaped
// yet, so that its pid is still its own.
func pidfdAlive(pidfd int) bool { return unix.PidfdSendSignal(pidfd, 0, nil, 0) == nil }
