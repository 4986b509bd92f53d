// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/proxy"
	"github.com/sluice-dev/sluice/report"
)

// runUserspace confines without BPF: a loopback allowlist proxy in this
// process, the command pointed at it, and, where the platform has one, a
// filter that keeps programs ignoring the proxy variables from going
// around it (Landlock+seccomp on Linux, Seatbelt on macOS).
func runUserspace(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, argv []string, mode string, why []string) error {
	stderr := cmd.ErrOrStderr()
	fail := func(err error) error { return &exitError{code: exitSluiceError, err: err} }
	if o.audit || o.pidsMax != 0 || o.memoryMax != "" {
		return fail(fmt.Errorf("audit mode (--audit, sluice learn), --pids-max and --memory-max need mode bpf (this run would use %s)", mode))
	}
	if o.ask == askOn {
		return fail(fmt.Errorf("--ask needs mode bpf and the sluice daemon (this run would use %s); --ask=never works everywhere", mode))
	}
	if len(o.readOnly) > 0 {
		// No mount namespace here to make them read-only in: refuse
		// rather than run with the paths writable.
		return fail(fmt.Errorf("--read-only needs mode bpf, root or the daemon (this run would use %s, which has no mount namespace of its own)", mode))
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return &exitError{code: exitNotFound, err: fmt.Errorf("%s: command not found", argv[0])}
	}
	audit, err := report.OpenAuditLog(o.auditLog)
	if err != nil {
		return fail(fmt.Errorf("--audit-log: %w", err))
	}
	defer audit.Close()
	// No cgroup names this session: the mode and sluice's pid do.
	audit.Session = fmt.Sprintf("%s-%d", mode, os.Getpid())
	rep := report.New(stderr)
	res, err := userspaceResolver(o, policy, rep, audit)
	if err != nil {
		return fail(err)
	}
	if res != nil {
		defer res.Close()
	}
	p, err := proxy.New(withResolver(proxy.Config{Policy: func() *allowlist.Policy { return policy }, OnEvent: report.ProxyEvents(rep, audit)}, res))
	if err != nil {
		return fail(err)
	}
	l, err := proxy.ListenLoopback(context.Background())
	if err != nil {
		return fail(err)
	}
	go func() { _ = p.Serve(l) }()
	defer p.Close()
	addr := netip.MustParseAddrPort(l.Addr().String())

	c, label, err := confineCommand(mode, o, addr.Port(), argv)
	if err != nil {
		return fail(err)
	}
	note := ""
	if len(why) > 0 {
		note = " (" + strings.Join(why, "; ") + ")"
	}
	switch label {
	case modeProxy:
		fmt.Fprintf(stderr, "sluice: mode proxy%s: WARNING: only programs that honour the proxy variables are confined; others can reach anything\n", note)
	default:
		fmt.Fprintf(stderr, "sluice: mode %s%s: outbound TCP only through the allowlist proxy at %s\n", label, note, addr)
	}
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.ExtraFiles = o.passFiles
	c.Env = o.commandEnv(cmd.ErrOrStderr())
	if !o.noProxyEnv {
		c.Env = append(c.Env, proxy.Env(addr)...)
	} else if label != modeProxy {
		fmt.Fprintln(stderr, "sluice: note: --no-proxy-env: the command can reach only loopback")
	}
	started := false
	err = supervise(func() (*exec.Cmd, error) {
		if err := c.Start(); err != nil {
			return nil, &exitError{code: exitCannotExec, err: err}
		}
		started = true
		var entries []string
		for _, en := range policy.Entries() {
			entries = append(entries, en.String())
		}
		audit.Started(c.Process.Pid, uint32(os.Getuid()), c.Path, entries, argv[0])
		return c, nil
	})
	if started {
		audit.Ended(exitCodeOf(err))
	}
	if sum := rep.Summary(); sum != "" {
		fmt.Fprintln(stderr, sum)
	}
	if o.ask == askNever {
		writeWouldAsk(rep, policy, stderr, os.Getenv("GITHUB_STEP_SUMMARY"))
	}
	var ee *exitError
	if err != nil && !errors.As(err, &ee) {
		return fail(err)
	}
	return writeSuggestion(o, rep, policy, stderr, err)
}
