package enforcer

import (
	"fmt"
	"os"
	"os/exec"
)

// FamiliesShim is the hidden subcommand of the sluice binary that installs
// the socket-family seccomp filter (userspace/landlock.ExecFamilies) and
// execs the command.
const FamiliesShim = "__families"

// WrapSocketFamilies makes cmd start through the sluice binary's
// FamiliesShim, so the command cannot open sockets the datapath does not
// see (AF_VSOCK and the like). The shim execs the command in place: same
// pid, same cgroup, same credentials.
func WrapSocketFamilies(cmd *exec.Cmd) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find sluice's own binary: %w", err)
	}
	args := append([]string{self, FamiliesShim, "--path", cmd.Path, "--"}, cmd.Args...)
	cmd.Path, cmd.Args = self, args
	return nil
}
