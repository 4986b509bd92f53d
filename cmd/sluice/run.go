package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
)

// runOptions are the flags of `sluice run`. Their names are an interface
// that users' scripts depend on.
type runOptions struct {
	allow     []string
	allowlist string
	user      string
	audit     bool
	pidsMax   int64
	memoryMax string
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run a command confined to loopback and the allowlist",
		Long: `Run COMMAND in a fresh session whose processes, however deep, can reach only
loopback and the allowed hosts. Everything else fails at once with EPERM and
sluice prints which process tried which destination and why it was refused.

The command runs as the invoking user (SUDO_UID/SUDO_GID, or --user) with
no_new_privs and no capabilities. Its exit status is sluice's exit status.`,
		Example: `  sudo sluice run --allow 203.0.113.0/24 --allow 2001:db8:2::/64 -- some-agent --flags
  sudo sluice run --allowlist network_allowlist.json -- npm install`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy, err := o.policy()
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			var memMax int64
			if o.memoryMax != "" {
				if memMax, err = cgroups.ParseSize(o.memoryMax); err != nil {
					return &exitError{code: exitSluiceError, err: fmt.Errorf("--memory-max: %w", err)}
				}
			}
			if o.pidsMax < 0 {
				return &exitError{code: exitSluiceError, err: fmt.Errorf("--pids-max must be positive, got %d", o.pidsMax)}
			}
			return runConfined(cmd, o, policy, memMax, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringArrayVar(&o.allow, "allow", nil, "allow a host name, *.wildcard, IP or CIDR (repeatable)")
	f.StringVar(&o.allowlist, "allowlist", "", "read allowed hosts from a network_allowlist.json file")
	f.StringVar(&o.user, "user", "", "run the command as USER[:GROUP] (names or numeric ids; default: the sudo user)")
	f.BoolVar(&o.audit, "audit", false, "allow everything, but report what would have been denied")
	f.Int64Var(&o.pidsMax, "pids-max", 0, "limit the number of processes in the session (cgroup pids.max)")
	f.StringVar(&o.memoryMax, "memory-max", "", "limit the session's memory, e.g. 512M or 2G (cgroup memory.max)")
	return cmd
}

// policy combines --allow and --allowlist. Any bad entry is an error and
// nothing runs.
func (o runOptions) policy() (*allowlist.Policy, error) {
	p, err := allowlist.FromStrings(o.allow)
	if err != nil {
		return nil, fmt.Errorf("--allow: %w", err)
	}
	if o.allowlist != "" {
		f, err := allowlist.Load(o.allowlist)
		if err != nil {
			return nil, err
		}
		p = p.Merge(f)
	}
	return p, nil
}

// nameEntries lists the host-name entries of a policy for messages.
func nameEntries(p *allowlist.Policy) string {
	var names []string
	for _, e := range p.Names() {
		names = append(names, e.String())
	}
	return strings.Join(names, ", ")
}
