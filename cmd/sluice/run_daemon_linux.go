package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/sandbox"
)

// runViaDaemon runs the command in a session of the running daemon, which
// spawns it with this process's stdin, stdout and stderr.
func runViaDaemon(cmd *cobra.Command, c *api.Client, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) error {
	stderr := cmd.ErrOrStderr()
	if len(o.passFiles) > 0 {
		return &exitError{code: exitSluiceError, err: errors.New("--preserve-fds: the daemon's sessions get stdin, stdout and stderr only; run the command with the embedded enforcer (sudo sluice run, with no daemon socket) to pass more")}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: exitNotFound, err: fmt.Errorf("%s: command not found", argv[0])}
	}
	if len(o.dnsUpstreams) > 0 || cmd.Flags().Changed("dns-ttl-min") || cmd.Flags().Changed("dns-ttl-max") || cmd.Flags().Changed("dns-grace") || cmd.Flags().Changed("dns-max-ips-per-name") {
		fmt.Fprintln(stderr, "sluice: note: the daemon's DNS settings apply; --dns-* flags are ignored")
	}
	req := api.CreateRequest{Audit: o.audit, PidsMax: o.pidsMax, MemoryMax: memMax, Argv: argv, Path: path, Env: o.commandEnv(stderr), NoProxyEnv: o.noProxyEnv,
		ShowPaths: o.showPaths, ShareProcesses: o.shareProcesses, AllowUserNS: o.allowUserNS}
	// --allow entries as strings; the file as it is, so allow_private and
	// owners survive (the daemon parses it, and policy already did here).
	_ = policy
	req.Allow = append(req.Allow, o.allow...)
	if o.allowlist != "" {
		b, err := os.ReadFile(o.allowlist)
		if err != nil {
			return &exitError{code: exitSluiceError, err: err}
		}
		req.Allowlist = b
	}
	if req.Dir, err = os.Getwd(); err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	req.User = o.user
	if req.User == "" && os.Geteuid() == 0 {
		uid, gid := os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID")
		if uid == "" || uid == "0" {
			return &exitError{code: exitSluiceError, err: errors.New("the command would run as root, which could move itself out of the session's cgroup: run sluice through sudo as your user, or pass --user USER[:GROUP]")}
		}
		req.User = uid
		if gid != "" {
			req.User += ":" + gid
		}
	}

	alog, err := openRunAudit(o.auditLog)
	if err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	defer alog.close()
	rep := newReporter(stderr)
	// The suggestion builds on what the session was given: the entries
	// asked for, or without any, the machine allowlist it got.
	base := policy
	askedFor := len(o.allow) > 0 || o.allowlist != ""
	var name atomic.Value
	sigs := make(chan os.Signal, 8)
	// The command is the daemon's child, not in this terminal's process
	// group: every signal, ^C included, is forwarded.
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if n, ok := name.Load().(string); ok {
				_ = c.Signal(cmd.Context(), n, unix.SignalName(sig.(unix.Signal))[3:])
			}
		}
	}()
	code, err := c.Run(cmd.Context(), req, [3]*os.File{os.Stdin, os.Stdout, os.Stderr},
		func(s api.SessionInfo) {
			name.Store(s.Name)
			if len(s.Hidden) > 0 {
				fmt.Fprintln(stderr, hiddenNotice(s.Hidden))
			}
			if !askedFor {
				if p, err := allowlist.FromStrings(s.Policy); err == nil {
					base = p
				}
			}
			alog.session = s.Name
			alog.started(s.PID, s.UID, path, s.Policy, argv[0]+sandbox.StartedNote(s.Hidden))
		},
		func(e audit.Event) {
			rep.Report(e, nil)
			alog.write(e)
		})
	if err != nil {
		return &exitError{code: exitSluiceError, err: err}
	}
	if code == 0 {
		alog.ended(nil)
	} else {
		alog.ended(&exitError{code: code})
	}
	if sum := rep.Summary(); sum != "" {
		fmt.Fprintln(stderr, sum)
	}
	var result error
	if code != 0 {
		result = &exitError{code: code}
	}
	return writeSuggestion(o, rep, base, stderr, result)
}
