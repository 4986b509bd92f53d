// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/sessions"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// runConfined is the embedded enforcer: it sets up a session, runs the
// command in it and tears the session down when the command exits.
// runConfined picks the confinement mode (the strongest available unless
// --mode forces one: a forced mode that is unavailable is an error, never a
// silent downgrade) and runs the command under it.
func runConfined(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) error {
	fail := func(err error) error { return &exitError{code: exitSluiceError, err: err} }

	// An explicit socket means "through the daemon": falling back to the
	// embedded enforcer would silently apply another policy.
	explicit := socketFlag != "" || os.Getenv(api.SocketEnv) != ""
	var why []string
	if o.docker {
		// A Docker socket is the kernel mode's: through the daemon when one
		// answers (whose container watcher leaves the session's
		// containers to it), else embedded as root.
		if o.mode != "" && o.mode != modeBPF {
			return fail(fmt.Errorf("--docker needs mode bpf (not %s)", o.mode))
		}
		if ran, reach, err := throughDaemon(cmd, explicit, o, policy, memMax, argv); ran || err != nil {
			return err
		} else if os.Geteuid() != 0 {
			return fail(fmt.Errorf("--docker needs root or a running sluice daemon (%v): run `sudo sluice run --docker ...`, or start `sluice daemon`", reach))
		}
		return runBPF(cmd, o, policy, memMax, argv)
	}
	if o.mode == "" || o.mode == modeBPF {
		ran, reach, err := throughDaemon(cmd, explicit, o, policy, memMax, argv)
		if ran || err != nil {
			return err
		}
		if errors.Is(reach, os.ErrPermission) {
			// A daemon is there, but not for this user: say so rather
			// than fall back in silence.
			why = append(why, "the daemon's socket "+reach.Error())
		}
	}
	if o.mode == "" || o.mode == modeBPF {
		if os.Geteuid() == 0 {
			return runBPF(cmd, o, policy, memMax, argv)
		}
		if o.mode == modeBPF {
			return fail(errors.New("--mode bpf needs root or a running daemon: run `sudo sluice run ...`, or start `sluice daemon`"))
		}
		why = append(why, "bpf needs root or a running daemon")
	}
	if o.mode == "" || o.mode == modeLandlock {
		err := landlock.Available()
		if err == nil {
			return runUserspace(cmd, o, policy, argv, modeLandlock, why)
		}
		if o.mode == modeLandlock {
			return fail(fmt.Errorf("--mode landlock: %w", err))
		}
		why = append(why, "landlock: "+err.Error())
	}
	return runUserspace(cmd, o, policy, argv, modeProxy, why)
}

// throughDaemon runs the command in a session of the daemon when one
// answers (ran: its result is err). Otherwise reach says why none did;
// with an explicit socket that is an error, never a fallback.
func throughDaemon(cmd *cobra.Command, explicit bool, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) (ran bool, reach, err error) {
	c := client()
	reach = c.Reach(cmd.Context())
	switch {
	case reach == nil:
		return true, nil, runSession(cmd, c, o, policy, memMax, argv)
	case explicit && errors.Is(reach, os.ErrPermission):
		return false, reach, &exitError{code: exitSluiceError, err: fmt.Errorf("the sluice daemon's socket %v", reach)}
	case explicit:
		return false, reach, &exitError{code: exitSluiceError, err: fmt.Errorf("no sluice daemon answers on %s", api.SocketPath(socketFlag))}
	}
	return false, reach, nil
}

// runBPF is the embedded enforcer: kernel enforcement from this process,
// through the same session service the daemon runs (package sessions),
// in-process.
func runBPF(cmd *cobra.Command, o runOptions, policy *allowlist.Policy, memMax int64, argv []string) error {
	stderr := cmd.ErrOrStderr()
	fail := func(err error) error { return &exitError{code: exitSluiceError, err: err} }
	dnsPath, err := enforcer.ParseDNSPath(pick(o.dnsPath, "", dnsPathDefault))
	if err != nil {
		return fail(fmt.Errorf("--dns-path: %w", err))
	}
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return fail(err)
	}
	e, err := enforcer.Open(cfg)
	if err != nil {
		return fail(err)
	}
	defer e.Close()
	if r := e.Datapath().Replaced(); len(r) > 0 {
		fmt.Fprintf(stderr, "sluice: note: replaced the pinned maps %s, left with another layout by an older sluice (sessions it still runs fail closed)\n", strings.Join(r, ", "))
	}
	fmt.Fprintln(stderr, "sluice: mode bpf: the kernel enforces the allowlist for the command and all it starts")
	svc := sessions.NewService(e, sessions.Config{
		DNS: enforcer.DNSOptions{Path: dnsPath, Upstreams: o.dnsUpstreams, MinTTL: o.dnsTTLMin, MaxTTL: o.dnsTTLMax,
			Grace: o.dnsGrace, MaxIPsPerName: o.dnsMaxIPs},
		UnixSockets: []string{api.SocketPath(socketFlag)}, Docker: true})
	svc.WatchSandbox()
	defer svc.Close()
	local := &sessions.Local{Service: svc, Caller: sessions.Caller{UID: 0, Creator: true},
		Machine: sessions.Machine{LookupUser: cgroups.LookupUser}, Policy: policy, ExtraFiles: o.passFiles}
	return runSession(cmd, local, o, policy, memMax, argv)
}

// userspaceUser is whom a userspace mode runs the command as: in landlock
// mode as root, the target user (sluice never runs the command as root);
// else nil, as sluice.
func userspaceUser(mode string, o runOptions) (*cgroups.SpawnOptions, error) {
	if mode != modeLandlock || os.Geteuid() != 0 {
		return nil, nil
	}
	spawn, err := targetUser(o.user)
	if err != nil {
		return nil, err
	}
	return &spawn, nil
}

// targetUser is whom the command runs as: --user, else the user who
// invoked sudo. sluice never runs the command as root.
func targetUser(spec string) (cgroups.SpawnOptions, error) {
	if spec == "" {
		uid, gid := os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID")
		if uid == "" || uid == "0" {
			return cgroups.SpawnOptions{}, errors.New("the command would run as root, which could move itself out of the session's cgroup: run sluice through sudo as your user, or pass --user USER[:GROUP]")
		}
		spec = uid
		if gid != "" {
			spec += ":" + gid
		}
	}
	opts, err := cgroups.LookupUser(spec)
	if err != nil {
		return cgroups.SpawnOptions{}, fmt.Errorf("--user %s: %w", spec, err)
	}
	if opts.UID == 0 {
		return cgroups.SpawnOptions{}, errors.New("--user: sluice never runs the command as root: a root process could move itself out of the session's cgroup")
	}
	return opts, nil
}

// hiddenNotice is the line that names what the sandbox hid, so that an
// empty credential file is not a mystery.
func hiddenNotice(hid []string) string {
	shown := hid
	if len(shown) > 4 {
		shown = shown[:4]
	}
	more := ""
	if len(hid) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(hid)-len(shown))
	}
	return fmt.Sprintf("sluice: sandbox: hidden (empty, read-only): %s%s (--show-path PATH to see one)", strings.Join(shown, ", "), more)
}
