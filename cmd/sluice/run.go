// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/report"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/sessions"
)

// runOptions are the flags of `sluice run`. Their names are an interface
// that users' scripts depend on.
type runOptions struct {
	allow     []string
	allowlist string
	user      string
	audit     bool
	ask       string // --ask: askOff, askOn or askNever (ask.go)
	pidsMax   int64
	memoryMax string

	dnsFlags

	mode          string
	noProxyEnv    bool
	loopbackPorts []uint
	auditLog      string
	suggest       string
	ports         bool // --ports: the suggestion lists the ports used

	showPaths           []string
	readOnly            []string
	shareProcesses      bool
	scrubEnv            bool
	preserveFDs         int
	allowUserNamespaces bool
	docker              bool   // --docker: a judged Docker socket (docs/docker.md)
	dockerHost          string // --docker-host: the engine's socket

	// passFiles are the descriptors --preserve-fds hands the command
	// (inheritedFiles), set once run has closed the others.
	passFiles []*os.File

	reconnect time.Duration
}

// defaultReconnect is how long `sluice run` waits for a daemon to come
// back when its daemon went away mid-session; $SLUICE_RECONNECT_TIMEOUT
// (a Go duration) overrides it, --reconnect-timeout overrides both.
const defaultReconnect = 60 * time.Second

// reconnectDefault is the flag's default: the environment's, else
// defaultReconnect.
func reconnectDefault() time.Duration {
	if v := os.Getenv("SLUICE_RECONNECT_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return d
		}
	}
	return defaultReconnect
}

// Modes of `sluice run`, strongest first.
const (
	modeBPF      = "bpf"                 // cgroup BPF: kernel enforcement of IPs, DNS learning (root or the daemon)
	modeLandlock = sessions.ModeLandlock // Landlock + seccomp: TCP only to the proxy's port (Linux, no root)
	modeProxy    = sessions.ModeProxy    // proxy variables only: programs that ignore them are NOT contained
)

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
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	cmd.Flags().SetInterspersed(false)
	o.flags(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&o.audit, "audit", false, "allow everything, but report what would have been denied")
	f.StringVar(&o.ask, "ask", "", "ask a person (`sluice prompts`, `sluice approve ID`, through the daemon) before refusing an unlisted host; --ask=never (or CI=true) denies at once and lists what would have been asked")
	f.Lookup("ask").NoOptDefVal = askOn
	f.StringVar(&o.suggest, "suggest-allowlist", "", "when the command exits, write to `FILE` a network_allowlist.json that would have allowed what it was refused (with --audit: what would have been); review it before use")
	return cmd
}

// newLearnCmd is `sluice learn`: `run --audit --suggest-allowlist` under
// the name of what it is for.
func newLearnCmd() *cobra.Command {
	o := runOptions{audit: true}
	cmd := &cobra.Command{
		Use:   "learn [flags] -o FILE -- COMMAND [ARGS...]",
		Short: "Run a command in audit mode and write the allowlist it needed",
		Long: `Run COMMAND as sluice run --audit does (nothing is denied; what would have
been is reported), then write to FILE the network_allowlist.json that would
have allowed it: the entries given with --allow and --allowlist, plus every
name it asked for and every address it dialled without an allowed name.

Review the file, then confine the command with sluice run --allowlist FILE.
Names whose answers held private addresses are named, never given
allow_private. Audit mode needs the kernel (root, or the daemon).`,
		Example: `  sudo sluice learn -o network_allowlist.json -- npm ci
  sudo sluice learn --allowlist base.json -o ci.json -- make test`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.suggest == "" {
				return &exitError{code: exitSluiceError, err: errors.New("-o FILE: name the allowlist to write")}
			}
			return o.run(cmd, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	o.flags(cmd.Flags())
	cmd.Flags().StringVarP(&o.suggest, "output", "o", "", "write the learned network_allowlist.json to `FILE`")
	return cmd
}

// flags are the flags run and learn share.
func (o *runOptions) flags(f *pflag.FlagSet) {
	f.StringArrayVar(&o.allow, "allow", nil, "allow a host name, *.wildcard, IP or CIDR (repeatable)")
	f.StringVar(&o.allowlist, "allowlist", "", "read allowed hosts from a network_allowlist.json file")
	f.StringVar(&o.user, "user", "", "run the command as USER[:GROUP] (names or numeric ids; default: the sudo user)")
	f.Int64Var(&o.pidsMax, "pids-max", 0, "limit the number of processes in the session (cgroup pids.max)")
	f.StringVar(&o.memoryMax, "memory-max", "", "limit the session's memory, e.g. 512M or 2G (cgroup memory.max)")
	o.addDNSFlags(f, "forward allowed names, the proxy's lookups included, to this DNS server, ADDR[:PORT] (repeatable; default: the host's resolv.conf, or in landlock and proxy modes the system's resolver)",
		"bpf mode without a daemon: where UDP DNS goes, auto (sluice's local resolver, and while it is down straight to the upstream, judged and learned in the kernel), kernel (always straight to the upstream) or resolver (always the local resolver); default "+dnsPathDefault+" (`sluice check` says)")
	f.BoolVar(&o.ports, "ports", false, "with --suggest-allowlist (and learn's -o): give each added entry the TCP and UDP ports it was used on, not every port")
	f.StringVar(&o.mode, "mode", "", "force a confinement mode: bpf, landlock or proxy (default: the strongest available)")
	f.BoolVar(&o.noProxyEnv, "no-proxy-env", false, "do not point the command at the session's proxy (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY)")
	f.StringVar(&o.auditLog, "audit-log", "", "also write the session's denials, start and end to `FILE`, as JSON lines (the daemon's audit format, docs/audit.md)")
	f.DurationVar(&o.reconnect, "reconnect-timeout", reconnectDefault(), "with the daemon: when it goes away mid-session, wait this long for the next one to report the command's exit status (env SLUICE_RECONNECT_TIMEOUT)")
	f.StringArrayVar(&o.showPaths, "show-path", nil, "do not hide `PATH` (a hidden credential file or directory, or anything below one) for this run; absolute or ~/... (repeatable)")
	f.StringArrayVar(&o.readOnly, "read-only", nil, "make `PATH` (a directory or a file, and everything below it) read-only for the command; an absolute path that exists (repeatable; adds to the daemon's --read-only paths, never removes one)")
	f.BoolVar(&o.shareProcesses, "share-processes", false, "let the command see, trace and signal its user's processes outside the session (turns process isolation off)")
	f.BoolVar(&o.scrubEnv, "scrub-env", false, "remove environment variables named like *_TOKEN, *_KEY, *_SECRET and *PASSWORD* from the command's environment")
	f.BoolVar(&o.allowUserNamespaces, "allow-userns", false, "with --share-processes: let the command create user namespaces (refused there by default: inside one it could mount another socket over an allowed unix socket name; with process isolation they are allowed and mounts are refused)")
	f.BoolVar(&o.docker, "docker", false, "give the command a Docker socket served by sluice (DOCKER_HOST): the session's own containers, placed under its policy; privileged containers, host namespaces, binds outside the working directory and registries the policy lacks are refused (docs/docker.md); mode bpf, through the daemon for users who may use the engine themselves, or embedded as root")
	f.StringVar(&o.dockerHost, "docker-host", "", "with --docker: the engine's socket sluice forwards judged requests to (default /var/run/docker.sock)")
	f.IntVar(&o.preserveFDs, "preserve-fds", 0, "pass the `N` inherited descriptors 3 to 3+N-1 on to the command; every other descriptor sluice inherited is closed for it, as sudo does (a socket opened outside the session is never judged by it); not through the daemon")
	f.UintSliceVar(&o.loopbackPorts, "loopback-port", nil, "landlock mode: a local TCP port the command may also connect to, e.g. a local LLM server (repeatable)")
}

// run checks the options and runs argv confined.
func (o runOptions) run(cmd *cobra.Command, argv []string) error {
	// First, before anything could start: what sluice inherited stays
	// with sluice.
	files, err := inheritedFiles(o.preserveFDs)
	if err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	o.passFiles = files
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
	if o.ask, err = askMode(o.ask, os.Getenv); err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	if o.ask == askNever && cmd.Flags().Changed("ask") && os.Getenv("CI") != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "sluice: note: a non-interactive job (CI): --ask denies at once and lists what it would have asked")
	}
	switch o.mode {
	case "", modeBPF, modeLandlock, modeProxy:
	default:
		return &exitError{code: exitSluiceError, err: fmt.Errorf("--mode %q: want bpf, landlock or proxy", o.mode)}
	}
	if o.suggest != "" {
		if st, err := os.Stat(filepath.Dir(o.suggest)); err != nil || !st.IsDir() {
			return &exitError{code: exitSluiceError, err: fmt.Errorf("%s: no such directory to write the allowlist in", o.suggest)}
		}
	}
	for _, p := range o.showPaths {
		if err := allowlist.CheckHiddenPath(p); err != nil {
			return &exitError{code: exitSluiceError, err: fmt.Errorf("--show-path: %w", err)}
		}
	}
	for _, p := range o.readOnly {
		if err := sandbox.CheckReadOnlyPath(p); err != nil {
			return &exitError{code: exitSluiceError, err: fmt.Errorf("--read-only: %w", err)}
		}
	}
	if o.pidsMax < 0 {
		return &exitError{code: exitSluiceError, err: fmt.Errorf("--pids-max must be positive, got %d", o.pidsMax)}
	}
	// "docker": true in the allowlist file is --docker, with its checks.
	o.docker = o.docker || policy.Docker()
	return runConfined(cmd, o, policy, memMax, argv)
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

// writeSuggestion writes --suggest-allowlist, if asked, once the command
// has exited with err. A suggestion that cannot be written fails a run
// that otherwise succeeded: a script would go on to use a stale file.
func writeSuggestion(o runOptions, rep *report.Reporter, base *allowlist.Policy, stderr io.Writer, err error) error {
	if o.suggest == "" {
		return err
	}
	rep.Suggestion().SetPorts(o.ports)
	if werr := rep.Suggestion().Write(o.suggest, base, stderr); werr != nil {
		if err == nil {
			return &exitError{code: exitSluiceError, err: werr}
		}
		fmt.Fprintf(stderr, "sluice: %v\n", werr)
	}
	return err
}

// commandEnv is the command's environment before sluice's additions: this
// process's, without secret-looking variables under --scrub-env (the
// names removed are told on stderr, so a failing command is explained).
func (o runOptions) commandEnv(stderr io.Writer) []string {
	env := os.Environ()
	if !o.scrubEnv {
		return env
	}
	kept, removed := sandbox.ScrubEnv(env)
	if len(removed) > 0 {
		fmt.Fprintf(stderr, "sluice: --scrub-env removed %s\n", strings.Join(removed, ", "))
	}
	return kept
}

// exitCodeOf is the exit status a run that ended with err reports: the
// command's (an *exitError's), 0 for nil, else sluice's own failure.
func exitCodeOf(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return exitSluiceError
}
