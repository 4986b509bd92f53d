// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/report"
	"github.com/sluice-dev/sluice/sessions"
)

// runUserspace confines without BPF, through the session service's
// userspace runner (sessions.StartUserspace): a loopback allowlist proxy
// in this process, the command pointed at it, and, where the platform has
// one, a filter that keeps programs ignoring the proxy variables from
// going around it (Landlock+seccomp on Linux, Seatbelt on macOS). What is
// left here is the command's: the flags this mode
// refuses, and what the user is told.
func runUserspace(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, argv []string, mode string, why []string) error {
	stderr := cmd.ErrOrStderr()
	fail := func(err error) error { return &exitError{code: exitSluiceError, err: err} }
	if o.audit || o.pidsMax != 0 || o.memoryMax != "" {
		return fail(fmt.Errorf("audit mode (--audit, sluice learn), --pids-max and --memory-max need mode bpf (this run would use %s)", mode))
	}
	if o.docker {
		return fail(fmt.Errorf("--docker needs mode bpf, as root or through a daemon (this run would use %s, which cannot confine the engine's containers)", mode))
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
	var ports []uint16
	for _, p := range o.loopbackPorts {
		if mode == modeLandlock && (p == 0 || p > 65535) {
			return fail(fmt.Errorf("--loopback-port %d: not a port", p))
		}
		ports = append(ports, uint16(p))
	}
	user, err := userspaceUser(mode, o)
	if err != nil {
		return fail(err)
	}
	alog, err := report.OpenAuditLog(o.auditLog)
	if err != nil {
		return fail(fmt.Errorf("--audit-log: %w", err))
	}
	defer alog.Close()
	rep := report.New(stderr)
	cfg := sessions.UserspaceConfig{Mode: mode, Policy: policy, LoopbackPorts: ports, User: user, Argv: argv,
		NoProxyEnv: o.noProxyEnv, Stdio: [3]*os.File{os.Stdin, os.Stdout, os.Stderr}, ExtraFiles: o.passFiles,
		OnEvent: func(e audit.Event) { rep.Report(e, nil); alog.Write(e) }, OnNote: rep.Note}
	if len(o.dnsUpstreams) > 0 {
		// With --dns-upstream, allowed names go to those servers and
		// nowhere else; without, the proxy keeps the system's resolver.
		cfg.DNS = &dnsresolver.Config{Upstreams: o.dnsUpstreams, MinTTL: o.dnsTTLMin, MaxTTL: o.dnsTTLMax,
			Grace: o.dnsGrace, MaxIPsPerName: o.dnsMaxIPs}
	}
	u, err := sessions.StartUserspace(cfg)
	if err != nil {
		return fail(err)
	}
	defer u.Close()

	note := ""
	if len(why) > 0 {
		note = " (" + strings.Join(why, "; ") + ")"
	}
	switch u.Mode() {
	case modeProxy:
		fmt.Fprintf(stderr, "sluice: mode proxy%s: WARNING: only programs that honour the proxy variables are confined; others can reach anything\n", note)
	default:
		fmt.Fprintf(stderr, "sluice: mode %s%s: outbound TCP only through the allowlist proxy at %s\n", u.Mode(), note, u.ProxyAddr())
	}
	env := o.commandEnv(stderr)
	if o.noProxyEnv && u.Mode() != modeProxy {
		fmt.Fprintln(stderr, "sluice: note: --no-proxy-env: the command can reach only loopback")
	}
	started := false
	code, err := u.Run(env, func(s sessions.UserspaceStarted) {
		started = true
		// No cgroup names this session: the mode and sluice's pid do.
		alog.Session = s.Name
		alog.Started(s.PID, s.UID, s.Path, s.Policy, argv[0])
	})
	var result error
	switch {
	case err != nil && !started:
		result = &exitError{code: exitCannotExec, err: err}
	case err != nil:
		result = &exitError{code: exitSluiceError, err: err}
	case code != 0:
		result = &exitError{code: code}
	}
	if started {
		alog.Ended(exitCodeOf(result))
	}
	if sum := rep.Summary(); sum != "" {
		fmt.Fprintln(stderr, sum)
	}
	if o.ask == askNever {
		writeWouldAsk(rep, policy, stderr, os.Getenv("GITHUB_STEP_SUMMARY"))
	}
	return writeSuggestion(o, rep, policy, stderr, result)
}
