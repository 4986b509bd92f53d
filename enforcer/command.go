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
	// User is whom the command runs as; uid 0 is refused when it starts.
	User cgroups.SpawnOptions
	// ExitStatus, when set, is a file the command's exit status is written
	// to when it ends, by a supervisor that stays the session's first
	// process (package exitstatus): a daemon that restarts meanwhile still
	// learns it. The caller opens it (the supervisor runs as User) and
	// closes its copy once the command has started.
	ExitStatus *os.File
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
	args := []string{shim, FamiliesShim}
	var extra []*os.File
	if c.ExitStatus != nil {
		// ExtraFiles[0] is descriptor 3 in the shim.
		args = append(args, "--exit-fd", "3")
		extra = []*os.File{c.ExitStatus}
	}
	args = append(append(args, "--path", c.Path, "--"), c.Argv...)
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
