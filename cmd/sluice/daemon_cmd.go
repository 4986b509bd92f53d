// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"
	"time"
)

// daemonOptions are the flags of `sluice daemon`.
type daemonOptions struct {
	config           string
	allowlist        string
	stateDir         string
	auditLog         string
	metricsAddr      string
	sessionGroup     string
	adminGroup       string
	containerCallers []string
	readOnly         []string
	socketMode       string
	askTimeout       time.Duration
	askMaxPending    int
	dnsFlags
}

func newDaemonCmd() *cobra.Command {
	var o daemonOptions
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the sluice daemon: sessions over a local API, audit log, metrics",
		Long: `Run the privileged daemon that owns the datapath, the sluice cgroup, the
sessions' resolvers and the machine allowlist. Clients (sluice run, sluice
sessions, ...) reach it on a unix socket. Stopping the daemon does not
unconfine running sessions; a restarted daemon re-adopts them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDaemon(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "/etc/sluice/sluice.json", "configuration file (flags override it; a missing default file is fine; an unknown key is an error)")
	f.StringVar(&o.allowlist, "allowlist", "", "the machine allowlist (default /etc/sluice/network_allowlist.json)")
	f.StringVar(&o.stateDir, "state-dir", "", "state directory (default /run/sluice, or /run/$SLUICE_INSTANCE; another one only with SLUICE_INSTANCE set, which also isolates the cgroup and pins)")
	f.StringVar(&o.auditLog, "audit-log", "", "audit log file, JSON lines (default /var/log/sluice/audit.jsonl)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this loopback address, e.g. 127.0.0.1:9469 (default off)")
	f.StringVar(&o.sessionGroup, "group", "", "members of this group may create sessions (default sluice)")
	f.StringArrayVar(&o.containerCallers, "container-caller", nil, "callers in other namespaces (a container with the socket bind-mounted) whose sessions run in their own namespaces: uid:N, gid:N or cgroup:GLOB (repeatable; default: the config's container_callers, else nobody)")
	f.StringArrayVar(&o.readOnly, "read-only", nil, "make `PATH` (a directory or a file, and everything below it) read-only in every session's mount namespace; absolute and clean (repeatable; joins the config's read_only_paths; sessions may add more, never remove one)")
	f.StringVar(&o.socketMode, "socket-mode", "", "the API socket's mode, octal (default: 0660, group --group, when that group exists; else 0600, root only); 0666 lets everyone connect (each request is still authorised by the caller's credentials)")
	f.StringVar(&o.adminGroup, "admin-group", "", "members of this group may change the machine allowlist (default: root only)")
	// Ask mode's five minutes are the documented behaviour; only tests
	// shorten them (and the per-session cap), so the flags are hidden.
	f.DurationVar(&o.askTimeout, "ask-timeout", 0, "deny an unanswered ask-mode prompt after this long (default 5m; tests only)")
	f.IntVar(&o.askMaxPending, "ask-max-pending", 0, "pending ask-mode prompts per session (default 16; tests only)")
	_ = f.MarkHidden("ask-timeout")
	_ = f.MarkHidden("ask-max-pending")
	o.addDNSFlags(f, "DNS server for allowed names, ADDR[:PORT] (repeatable; default: the host's resolv.conf)",
		"where sessions' UDP DNS goes: auto (the session's resolver, and while it is down straight to the upstream, judged and learned in the kernel), kernel (always straight to the upstream) or resolver (always the session's resolver); default: the config's dns_path, else "+dnsPathDefault)
	return cmd
}

// dnsPathDefault is the DNS path when neither a flag nor the config names
// one: the resolver path (its cache) with the kernel path (bpf/kdns.h) as
// its failover while the session's owner is down, so that a daemon
// restart costs no lookup (docs/design.md, "Three DNS paths").
const dnsPathDefault = "auto"
