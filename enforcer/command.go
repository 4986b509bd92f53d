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
)

// SessionEnv names the variable that tells a confined command which sluice
// session it runs in.
const SessionEnv = "SLUICE_SESSION"

// FamiliesShim is the hidden subcommand of the sluice binary that installs
// the socket-family seccomp filter (userspace/landlock.ExecFamilies) and
// execs the command. Every session's command starts through it, so the
// command cannot open sockets the datapath does not see (AF_VSOCK and the
// like). The shim execs the command in place: same pid, same cgroup, same
// credentials.
const FamiliesShim = "__families"

// Flags of FamiliesShim that turn sandbox layers off; without them the
// shim puts the command in a Landlock domain scoped to its session
// (sandbox.RestrictSelf), so a spec's zero value is the safe one.
const (
	// ShimShareProcesses leaves the command without the Landlock domain:
	// it can trace and signal the user's processes outside the session.
	ShimShareProcesses = "--share-processes"
	// ShimAbstractUnix leaves abstract unix sockets outside the session
	// reachable.
	ShimAbstractUnix = "--abstract-unix"
	// ShimAllowUserNS lets a command without the Landlock domain create
	// user namespaces, in which it could mount over the names of allowed
	// unix sockets (sandbox.RefuseUserNamespaces says why they are
	// refused).
	ShimAllowUserNS = "--allow-userns"
	// ShimExitFD N, before the other arguments, makes the shim the
	// session's supervisor: it runs the shim with the rest of its
	// arguments as its child and writes the child's exit status to
	// descriptor N (package exitstatus). The daemon's sessions use it.
	ShimExitFD = "--exit-fd"
)

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
	// OnHidden, if set, is told each path the session hides.
	OnHidden func(path string)
	// OnSocketDropped, if set, is told each built-in unix socket name
	// the session does not get, and why (sandbox.Spec.Sockets).
	OnSocketDropped func(name, why string)
}

// shimArgs is the command line of FamiliesShim that runs path with argv
// under sb.
func shimArgs(shim, path string, argv []string, sb SandboxSpec) []string {
	args := []string{shim, FamiliesShim, "--path", path}
	if sb.ShareProcesses {
		args = append(args, ShimShareProcesses)
	}
	if sb.AbstractUnix {
		args = append(args, ShimAbstractUnix)
	}
	if sb.AllowUserNamespaces {
		args = append(args, ShimAllowUserNS)
	}
	return append(append(args, "--"), argv...)
}

// ShimOptions is what FamiliesShim's command line asks for.
type ShimOptions struct {
	Path           string
	ShareProcesses bool
	AbstractUnix   bool
	AllowUserNS    bool
	Argv           []string
}

// ParseShimArgs parses FamiliesShim's arguments (after its name):
// --path PATH, the flags above, "--", then the command line.
func ParseShimArgs(args []string) (ShimOptions, error) {
	var o ShimOptions
	usage := errors.New("usage: " + FamiliesShim + " --path PATH [" + ShimShareProcesses + "] [" + ShimAbstractUnix + "] [" + ShimAllowUserNS + "] -- ARGV")
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--path":
			if i+1 >= len(args) || o.Path != "" {
				return ShimOptions{}, usage
			}
			i++
			o.Path = args[i]
		case ShimShareProcesses:
			o.ShareProcesses = true
		case ShimAbstractUnix:
			o.AbstractUnix = true
		case ShimAllowUserNS:
			o.AllowUserNS = true
		case "--":
			o.Argv = args[i+1:]
			if o.Path == "" || len(o.Argv) == 0 {
				return ShimOptions{}, usage
			}
			return o, nil
		default:
			return ShimOptions{}, usage
		}
	}
	return ShimOptions{}, usage
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
// shim binary (sluice itself) re-executes as FamiliesShim, which execs
// c.Path with c.Argv. The environment is c.Env, then the proxy variables
// (unless NoProxyEnv), then SessionEnv: later entries win, so a command
// nested in a session cannot inherit a stale proxy or session name.
// build does no I/O; it is the platform-free half of Session.Start.
func (c CommandSpec) build(shim, session string, proxyEnv []string) (*exec.Cmd, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if shim == "" {
		return nil, errors.New("no path to sluice's own binary for the socket-family shim")
	}
	env := slices.Clip(slices.Clone(c.Env))
	if !c.NoProxyEnv {
		env = append(env, proxyEnv...)
	}
	env = append(env, SessionEnv+"="+session)
	args := shimArgs(shim, c.Path, c.Argv, c.Sandbox)
	extra := c.ExtraFiles
	if c.ExitStatus != nil {
		if len(c.ExtraFiles) > 0 {
			return nil, errors.New("a supervised command (ExitStatus) takes no ExtraFiles: the supervisor's descriptor 3 is its exit status")
		}
		// ExtraFiles[0] is descriptor 3 in the shim, which then stays as
		// the command's supervisor (ShimExitFD).
		args = append([]string{args[0], args[1], ShimExitFD, "3"}, args[2:]...)
		extra = []*os.File{c.ExitStatus}
	}
	return &exec.Cmd{
		Path:       shim,
		Args:       args,
		Env:        env,
		Dir:        c.Dir,
		Stdin:      c.Stdin,
		Stdout:     c.Stdout,
		Stderr:     c.Stderr,
		ExtraFiles: extra,
	}, nil
}

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
func startCommand(sp spawner, c CommandSpec, shim, session string, proxyEnv []string) (*exec.Cmd, error) {
	cmd, err := c.build(shim, session, proxyEnv)
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
