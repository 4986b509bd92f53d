// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/sandbox/shim"
)

// SessionEnv names the variable that tells a confined command which sluice
// session it runs in.
const SessionEnv = "SLUICE_SESSION"

// ErrNoProcessIsolation refuses a session that asks for process isolation
// (the default) on a kernel without Landlock: it is never downgraded
// silently. The front door that knows how the user turns isolation off
// says so.
var ErrNoProcessIsolation = errors.New("process isolation needs Landlock (Linux 5.13 with landlock in the lsm= list), which this kernel does not offer: without it the command could trace and read its user's other processes")

// SandboxSpec is what a session's command may touch besides the network
// (package sandbox). Its zero value is the default: every layer on, the
// default hidden paths hidden.
type SandboxSpec struct {
	// ShareProcesses turns process isolation off: no Landlock domain and
	// the host's /proc, so the command can see, trace and signal its
	// user's processes outside the session.
	ShareProcesses bool
	// Hidden is what to hide; nil: sandbox.DefaultHiddenPaths.
	Hidden *sandbox.Hidden
	// Home is the directory "~/" means in hidden paths; empty: the home
	// of User.UID.
	Home string
	// MountNamespaceOf is a pidfd of the process whose view of the file
	// system the session's starts from (a daemon's caller); nil: the
	// view of the process that starts the session.
	MountNamespaceOf *os.File
	// NamespacesOf is a pidfd of a daemon's caller in other namespaces (a
	// container) that the daemon's configuration lets in: the command
	// starts in its network, UTS, IPC, PID and mount namespaces (package
	// callerns), and the shim is run from the starting process's own
	// binary, not from whatever the caller's file system has at that
	// path. MountNamespaceOf is then not used.
	NamespacesOf *os.File
	// AbstractUnix leaves abstract unix sockets created outside the
	// session reachable (for an allowlist that lists one; the datapath
	// judges unix sockets too).
	AbstractUnix bool
	// AllowUserNamespaces lets a command without process isolation
	// (ShareProcesses) create user namespaces, in which it could bind
	// another socket over an allowed unix socket name; by default the
	// shim refuses them there (sandbox.RefuseUserNamespaces). With process
	// isolation they are allowed and changes nothing: the Landlock domain
	// refuses every mount.
	AllowUserNamespaces bool
	// ReadOnly are the paths made read-only, with everything below them,
	// in the session's mount namespace (sandbox.ReadOnly); the zero value
	// makes nothing read-only.
	ReadOnly sandbox.ReadOnly
	// DockerSocket, when set, is bound over each of DockerNames in the
	// session's mount namespace (sandbox.Spec.DockerSocket).
	DockerSocket string
	DockerNames  []string
	// OnHidden, if set, is told each path the session hides.
	OnHidden func(path string)
	// OnNote, if set, is told what the user should know about the
	// sandbox as built (sandbox.Spec.OnNote).
	OnNote func(note string)
	// OnSocketDropped, if set, is told each built-in unix socket name
	// the session does not get, and why (sandbox.Spec.Sockets).
	OnSocketDropped func(name, why string)
}

// shimOptions is what the shim (package sandbox/shim) is told to put on
// for sb before it execs path with argv. The zero SandboxSpec gives the
// zero shim.Options, every layer on.
func shimOptions(path string, argv []string, sb SandboxSpec) shim.Options {
	return shim.Options{Path: path, Argv: argv, ShareProcesses: sb.ShareProcesses,
		AbstractUnix: sb.AbstractUnix, AllowUserNamespaces: sb.AllowUserNamespaces}
}

// CommandSpec is what a caller asks for when it starts a session's
// command: what runs, where, with which environment and descriptors, and
// as whom. What confinement needs on top (the session's name, its proxy
// variables, the socket-family shim, and later the sandbox's namespaces)
// is added by the session, in one place, so the embedded enforcer and the
// daemon start commands the same way.
type CommandSpec struct {
	// Path is the executable, already resolved by the caller: absolute,
	// or relative to Dir with a '/' in it. It is never looked up in PATH.
	Path string
	// Argv is the command line; Argv[0] is the name the program sees.
	Argv []string
	// Env is the command's environment before sluice's additions. It is
	// used as it is: nil means an empty environment, never the caller's
	// (a daemon must not hand its own environment to a client's command).
	Env []string
	// NoProxyEnv leaves out the variables that point the command at the
	// session's proxy.
	NoProxyEnv bool
	// Dir is the working directory; empty: the caller's.
	Dir string
	// Stdin, Stdout and Stderr are the command's standard descriptors;
	// nil: /dev/null, as with exec.Cmd.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// ExtraFiles are passed on as descriptors 3, 4, ... (exec.Cmd's
	// ExtraFiles); nothing else the caller holds reaches the command
	// unless it was left without close-on-exec. A socket passed here was
	// made outside the session and is not judged by its datapath: only
	// what a user asks for explicitly belongs here.
	ExtraFiles []*os.File
	// User is whom the command runs as; uid 0 is refused when it starts.
	User cgroups.SpawnOptions
	// ExitStatus, when set, is a file the command's exit status is written
	// to when it ends, by a supervisor that stays the session's first
	// process (package exitstatus): a daemon that restarts meanwhile still
	// learns it. The caller opens it (the supervisor runs as User) and
	// closes its copy once the command has started.
	ExitStatus *os.File
	// Kept, with ExitStatus only, is a file the supervisor holds open for
	// the session's life as its descriptor KeptFD, never the command's:
	// a listening socket of the session's (its Docker socket) that must
	// outlive a daemon restart, so that its name and the bind mounts of it
	// stay the same socket and clients queue instead of failing. The next
	// daemon takes it back with pidfd_getfd.
	Kept *os.File
	// Sandbox is what the command may touch besides the network; the
	// zero value is every layer on.
	Sandbox SandboxSpec
	// EnvSocketsWithin, when not nil, bounds the built-in unix sockets
	// that Env chooses (EnvUnixSockets: $SSH_AUTH_SOCK, $GNUPGHOME's):
	// the session gets only those that are in it, exactly. A daemon sets
	// it, for a caller inside one of its sessions, to what that session
	// was given (Session.EnvUnixSockets), so that a nested session can
	// never name a new socket as its agent. Nil: Env decides, as it does
	// for a session its user starts from outside sluice.
	EnvSocketsWithin *[]string
}

// validate refuses a spec that cannot describe a command, before anything
// is built from it.
func (c CommandSpec) validate() error {
	switch {
	case len(c.Argv) == 0 || c.Argv[0] == "":
		return errors.New("a command is required")
	case c.Path == "":
		return fmt.Errorf("%s: no executable path", c.Argv[0])
	case !strings.Contains(c.Path, "/"):
		return fmt.Errorf("%s: the executable path %q must contain a '/': it is not looked up in PATH", c.Argv[0], c.Path)
	}
	return nil
}

// build returns the command that runs c in the session named session: the
// shim binary self (sluice itself) re-executes as the shim (shim.Name),
// which execs c.Path with c.Argv. The environment is c.Env, then the proxy variables
// (unless NoProxyEnv), then SessionEnv: later entries win, so a command
// nested in a session cannot inherit a stale proxy or session name.
// build does no I/O; it is the platform-free half of Session.Start.
func (c CommandSpec) build(self, session string, proxyEnv []string) (*exec.Cmd, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if self == "" {
		return nil, errors.New("no path to sluice's own binary for the socket-family shim")
	}
	env := slices.Clip(slices.Clone(c.Env))
	if !c.NoProxyEnv {
		env = append(env, proxyEnv...)
	}
	env = append(env, SessionEnv+"="+session)
	args := shim.Args(self, shimOptions(c.Path, c.Argv, c.Sandbox))
	extra := c.ExtraFiles
	if c.ExitStatus != nil {
		if len(c.ExtraFiles) > 0 {
			return nil, errors.New("a supervised command (ExitStatus) takes no ExtraFiles: the supervisor's descriptor 3 is its exit status")
		}
		// ExtraFiles[0] is descriptor 3 in the shim, which then stays as
		// the command's supervisor (shim.FlagExitFD).
		args = append([]string{args[0], args[1], shim.FlagExitFD, "3"}, args[2:]...)
		extra = []*os.File{c.ExitStatus}
		if c.Kept != nil {
			extra = append(extra, c.Kept)
		}
	} else if c.Kept != nil {
		return nil, errors.New("a kept file (Kept) needs a supervisor (ExitStatus) to hold it")
	}
	return &exec.Cmd{
		Path:       self,
		Args:       args,
		Env:        env,
		Dir:        c.Dir,
		Stdin:      c.Stdin,
		Stdout:     c.Stdout,
		Stderr:     c.Stderr,
		ExtraFiles: extra,
	}, nil
}

// KeptFD is the supervisor's descriptor of CommandSpec.Kept: 3 is its
// exit status.
const KeptFD = 4

// spawner is what starting a command needs from the machine: check that
// the datapath is in force on the session's cgroup, and spawn into it.
// Tests give a fake one.
type spawner interface {
	// Verify reports why the datapath is not in force on the session, or
	// nil.
	Verify() error
	// Spawn starts cmd in the session as user.
	Spawn(cmd *exec.Cmd, user cgroups.SpawnOptions) error
}

// startCommand builds c's command and spawns it, but only once sp says the
// datapath is in force: a command never runs in a session that is not
// enforced.
func startCommand(sp spawner, c CommandSpec, self, session string, proxyEnv []string) (*exec.Cmd, error) {
	cmd, err := c.build(self, session, proxyEnv)
	if err != nil {
		return nil, err
	}
	if err := sp.Verify(); err != nil {
		return nil, fmt.Errorf("refusing to start the command: %w", err)
	}
	if err := sp.Spawn(cmd, c.User); err != nil {
		return nil, err
	}
	return cmd, nil
}
