// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command fakesudo stands in for a CI runner's passwordless sudo in tests,
// without touching the machine's sudoers: a root broker (`fakesudo serve
// SOCKET UID`) runs commands as root for one user, and the same binary,
// installed as `sudo` early in that user's PATH, asks it to (`sudo [-n]
// [--] COMMAND...`), handing over its standard descriptors, its working
// directory and its cgroup, as a child of real sudo would have. With a
// third argument, SUDOERS, the broker grants sudo only while that file
// exists, as a sudoers drop-in does (`sluice-ci` with confine=job moves it
// aside for the job).
//
// It refuses what real (setuid) sudo cannot do: a caller with
// no_new_privs set (every sluice session) gets sudo's own refusal, since
// a setuid program does not gain privileges under no_new_privs. The
// command's environment is sudo's env_reset one: HOME, PATH
// (secure_path), LOGNAME, USER, SHELL and the SUDO_* variables, and TERM
// when the caller had it; nothing else of the caller's.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// request is what the client sends, with its descriptors 0, 1, 2.
type request struct {
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
	Term string   `json:"term,omitempty"`
}

// reply is the command's exit status, or why it did not run.
type reply struct {
	Code  int    `json:"code"`
	Error string `json:"error,omitempty"`
}

// sudoers, when set, is the file whose existence grants sudo.
var sudoers string

const securePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "serve" {
		if len(os.Args) != 4 && len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: fakesudo serve SOCKET UID [SUDOERS]")
			os.Exit(2)
		}
		if len(os.Args) == 5 {
			sudoers = os.Args[4]
		}
		if err := serve(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "fakesudo:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(client(os.Args[1:]))
}

// client is `sudo [-n] [--] COMMAND...`; the broker's socket is sudo.sock
// beside this program.
func client(args []string) int {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		if a != "-n" {
			fmt.Fprintf(os.Stderr, "sudo: option %s is not supported by this stand-in\n", a)
			return 1
		}
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: sudo [-n] [--] COMMAND...")
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sudo:", err)
		return 1
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: filepath.Join(filepath.Dir(exe), "sudo.sock"), Net: "unix"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "sudo:", err)
		return 1
	}
	defer c.Close()
	dir, _ := os.Getwd()
	b, _ := json.Marshal(request{Argv: args, Dir: dir, Term: os.Getenv("TERM")})
	if _, _, err := c.WriteMsgUnix(append(b, '\n'), unix.UnixRights(0, 1, 2), nil); err != nil {
		fmt.Fprintln(os.Stderr, "sudo:", err)
		return 1
	}
	var r reply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		fmt.Fprintln(os.Stderr, "sudo: the broker did not answer:", err)
		return 1
	}
	if r.Error != "" {
		fmt.Fprintln(os.Stderr, "sudo:", r.Error)
	}
	return r.Code
}

// serve runs the broker until it is killed.
func serve(sock, uidText string) error {
	uid, err := strconv.Atoi(uidText)
	if err != nil {
		return fmt.Errorf("uid %q: %w", uidText, err)
	}
	_ = os.Remove(sock)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return err
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		return err
	}
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return err
		}
		go handle(c, uid)
	}
}

func handle(c *net.UnixConn, uid int) {
	defer c.Close()
	r := run(c, uid)
	b, _ := json.Marshal(r)
	_, _ = c.Write(append(b, '\n'))
}

func run(c *net.UnixConn, uid int) reply {
	raw, err := c.SyscallConn()
	if err != nil {
		return reply{Code: 1, Error: err.Error()}
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil {
		return reply{Code: 1, Error: err.Error()}
	}
	buf, oob := make([]byte, 64<<10), make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return reply{Code: 1, Error: err.Error()}
	}
	fds, err := rights(oob[:oobn])
	if err != nil {
		return reply{Code: 1, Error: err.Error()}
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "fd"+strconv.Itoa(i))
		defer files[i].Close()
	}
	if _, err := os.Stat(sudoers); sudoers != "" && err != nil {
		return reply{Code: 1, Error: "a password is required"}
	}
	if int(cred.Uid) != uid {
		return reply{Code: 1, Error: fmt.Sprintf("uid %d is not in the sudoers file", cred.Uid)}
	}
	if nnp, err := noNewPrivs(int(cred.Pid)); err != nil || nnp {
		return reply{Code: 1, Error: "effective uid is not 0, is sudo installed setuid root? (the caller has no_new_privs)"}
	}
	if len(files) != 3 {
		return reply{Code: 1, Error: "want the caller's descriptors 0, 1 and 2"}
	}
	var req request
	if err := json.Unmarshal(buf[:n], &req); err != nil || len(req.Argv) == 0 {
		return reply{Code: 1, Error: "bad request"}
	}
	user := strconv.Itoa(uid)
	env := []string{"HOME=/root", "PATH=" + securePath, "LOGNAME=root", "USER=root", "SHELL=/bin/bash",
		"SUDO_UID=" + user, "SUDO_GID=" + strconv.Itoa(int(cred.Gid)), "SUDO_USER=" + user,
		"SUDO_COMMAND=" + strings.Join(req.Argv, " ")}
	if req.Term != "" {
		env = append(env, "TERM="+req.Term)
	}
	name := req.Argv[0]
	if !strings.Contains(name, "/") {
		p, err := lookPath(name)
		if err != nil {
			return reply{Code: 1, Error: name + ": command not found"}
		}
		name = p
	}
	cmd := exec.Command(name, req.Argv[1:]...)
	cmd.Args[0] = req.Argv[0]
	cmd.Env, cmd.Dir = env, req.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = files[0], files[1], files[2]
	// Born in the caller's cgroup, as a child of sudo would be.
	if cg, err := callerCgroup(int(cred.Pid)); err == nil {
		if f, err := os.Open(cg); err == nil {
			defer f.Close()
			cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
		}
	}
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return reply{Code: 128 + int(ws.Signal())}
		}
		return reply{Code: ee.ExitCode()}
	case err != nil:
		return reply{Code: 1, Error: err.Error()}
	}
	return reply{}
}

// lookPath finds name in sudo's secure_path.
func lookPath(name string) (string, error) {
	for _, d := range filepath.SplitList(securePath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			return nil, err
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// noNewPrivs reads the NoNewPrivs flag of pid.
func noNewPrivs(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NoNewPrivs:"); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return false, errors.New("no NoNewPrivs in status")
}

// callerCgroup is the cgroup v2 directory of pid.
func callerCgroup(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mnt, p), nil
		}
	}
	return "", errors.New("no cgroup v2 line")
}

// cgroup2Mount finds the cgroup2 mount in mountinfo (hybrid layouts have
// it at /sys/fs/cgroup/unified).
func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		if f := strings.Fields(pre); len(f) >= 5 {
			return f[4], nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}
