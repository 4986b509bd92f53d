// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/report"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/sessions"
)

// sessionRunner runs a session: the daemon's client (api.Client), or the
// session service in this process (sessions.Local).
type sessionRunner interface {
	Run(ctx context.Context, req api.CreateRequest, stdio [3]*os.File, started func(api.SessionInfo), fn func(audit.Event)) (int, error)
	Signal(ctx context.Context, name, sig string) error
}

// runSession runs the command in a session of r, which spawns it with this
// process's stdin, stdout and stderr: one runner, whether the daemon or
// this process serves the session.
func runSession(cmd *cobra.Command, r sessionRunner, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) error {
	stderr := cmd.ErrOrStderr()
	local, inProcess := r.(*sessions.Local)
	if len(o.passFiles) > 0 && !inProcess {
		return &exitError{code: exitSluiceError, err: errors.New("--preserve-fds: the daemon's sessions get stdin, stdout and stderr only; run the command with the embedded enforcer (sudo sluice run, with no daemon socket) to pass more")}
	}
	if o.ask == askOn && inProcess {
		return &exitError{code: exitSluiceError, err: sessions.ErrAskNeedsDaemon}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return &exitError{code: exitNotFound, err: fmt.Errorf("%s: command not found", argv[0])}
	}
	if !inProcess && (len(o.dnsUpstreams) > 0 || cmd.Flags().Changed("dns-ttl-min") || cmd.Flags().Changed("dns-ttl-max") || cmd.Flags().Changed("dns-grace") || cmd.Flags().Changed("dns-max-ips-per-name")) {
		fmt.Fprintln(stderr, "sluice: note: the daemon's DNS settings apply; --dns-* flags are ignored")
	}
	req := api.CreateRequest{Audit: o.audit, Ask: o.ask == askOn, PidsMax: o.pidsMax, MemoryMax: memMax, Argv: argv, Path: path, Env: o.commandEnv(stderr), NoProxyEnv: o.noProxyEnv,
		ShowPaths: o.showPaths, ReadOnlyPaths: o.readOnly, ShareProcesses: o.shareProcesses, AllowUserNamespaces: o.allowUserNamespaces,
		Docker: o.docker, DockerHost: o.dockerHost}
	// To a daemon: --allow entries as strings, the file as it is, so
	// allow_private and owners survive (the daemon parses its copy; this
	// process's parse is the suggestion's base). In-process, the parsed
	// policy itself (sessions.Local.Policy).
	if !inProcess {
		req.Allow = append(req.Allow, o.allow...)
	}
	if o.allowlist != "" && !inProcess {
		b, err := os.ReadFile(o.allowlist)
		if err != nil {
			return &exitError{code: exitSluiceError, err: err}
		}
		req.Allowlist = b
	}
	// The daemon's child starts in this directory; in-process, the
	// command inherits it as it is (even where its user could not enter
	// it again by name).
	if !inProcess {
		if req.Dir, err = os.Getwd(); err != nil {
			return &exitError{code: exitSluiceError, err: err}
		}
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

	alog, err := report.OpenAuditLog(o.auditLog)
	if err != nil {
		return &exitError{code: exitSluiceError, err: fmt.Errorf("--audit-log: %w", err)}
	}
	defer alog.Close()
	rep := report.New(stderr)
	if inProcess {
		local.OnNote = rep.Note
	}
	// The suggestion builds on what the session was given: the entries
	// asked for, or without any, the machine allowlist it got.
	base := policy
	askedFor := inProcess || len(o.allow) > 0 || o.allowlist != ""
	var name atomic.Value
	sigs := make(chan os.Signal, 8)
	// The command is the daemon's child, not in this terminal's process
	// group: every signal, ^C included, is forwarded.
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if n, ok := name.Load().(string); ok {
				_ = r.Signal(cmd.Context(), n, unix.SignalName(sig.(unix.Signal))[3:])
			}
		}
	}()
	onEvent := func(e audit.Event) {
		rep.Report(e, nil)
		alog.Write(e)
	}
	code, err := r.Run(cmd.Context(), req, [3]*os.File{os.Stdin, os.Stdout, os.Stderr},
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
			alog.Session = s.Name
			alog.Started(s.PID, s.UID, path, s.Policy, argv[0]+sandbox.StartedNote(s.Hidden))
		}, onEvent)
	var lost *api.StreamLostError
	if c, ok := r.(*api.Client); ok && errors.As(err, &lost) {
		code, err = reattach(cmd.Context(), c, lost.Session, o.reconnect, stderr, onEvent)
	}
	if err != nil {
		return &exitError{code: startFailure(err), err: err}
	}
	alog.Ended(code)
	if sum := rep.Summary(); sum != "" {
		fmt.Fprintln(stderr, sum)
	}
	if o.ask == askNever {
		writeWouldAsk(rep, base, stderr, os.Getenv("GITHUB_STEP_SUMMARY"))
	}
	var result error
	if code != 0 {
		result = &exitError{code: code}
	}
	return writeSuggestion(o, rep, base, stderr, result)
}

// startFailure is sluice's exit status for a session that did not run:
// 126 for a command the service found but could not execute, else 125.
func startFailure(err error) int {
	if sessions.KindOf(err) == sessions.Invalid && (errors.Is(err, os.ErrPermission) || errors.Is(err, unix.ENOEXEC)) {
		return exitCannotExec
	}
	return exitSluiceError
}

// reattach follows session name after the daemon that started it went
// away (api.Client.Reattach), says once that the daemon restarted, and
// returns the command's exit status. The session stays confined whatever
// happens here: only this client gives up.
func reattach(ctx context.Context, c *api.Client, name string, bound time.Duration, stderr io.Writer, onEvent func(audit.Event)) (int, error) {
	code, err := c.Reattach(ctx, name, bound, func(api.SessionInfo) {
		fmt.Fprintf(stderr, "sluice: the daemon restarted; session %s goes on under the new one\n", name)
	}, onEvent)
	switch {
	case errors.Is(err, api.ErrNoSuchSession):
		return 0, fmt.Errorf("the daemon restarted and does not know session %s (sluice sessions)", name)
	case errors.Is(err, api.ErrDaemonGone):
		return 0, fmt.Errorf("the daemon went away and none came back within %v (--reconnect-timeout); session %s goes on, still confined: sluice sessions show %s", bound, name, name)
	}
	return code, err
}
