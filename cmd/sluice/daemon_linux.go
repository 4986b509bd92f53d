// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/daemon"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/internal/strictjson"
)

// fileConfig is /etc/sluice/sluice.json.
type fileConfig struct {
	Allowlist    string   `json:"allowlist"`
	DNSUpstreams []string `json:"dns_upstreams"`
	Socket       string   `json:"socket"`
	StateDir     string   `json:"state_dir"`
	AuditLog     string   `json:"audit_log"`
	MetricsAddr  string   `json:"metrics_addr"`
	Group        string   `json:"group"`
	AdminGroup   string   `json:"admin_group"`
	DNSPath      string   `json:"dns_path"` // auto, kernel or resolver, as --dns-path
	// ContainerCallers, as --container-caller: callers in other
	// namespaces whose sessions run in their own namespaces.
	ContainerCallers []string `json:"container_callers"`
	// ReadOnlyPaths, with --read-only: paths read-only in every session.
	ReadOnlyPaths []string `json:"read_only_paths"`
	// SocketMode, as --socket-mode: the API socket's mode, octal.
	SocketMode string `json:"socket_mode"`
	// ContainerPolicies are the named policies containers select with the
	// label sluice.policy=NAME: {"NAME": "/etc/sluice/NAME.json"}.
	ContainerPolicies map[string]string `json:"container_policies"`
}

// loadFileConfig reads the --config file; a missing one is fine unless
// the flag named it.
func loadFileConfig(path string, explicit bool) (fileConfig, error) {
	var fc fileConfig
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("config: %w", err)
	}
	// Strict: an unknown key is most likely a misspelt one, and a daemon
	// that ignored it would run on a default the administrator meant to
	// change (a wider socket group, another upstream) without a word.
	if err := strictjson.Decode(b, &fc); err != nil {
		return fileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

// parseSocketMode reads --socket-mode: "" is the default rule (0), else
// an octal mode daemon.CheckSocketMode accepts.
func parseSocketMode(s string) (os.FileMode, error) {
	if s == "" {
		return 0, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("--socket-mode %q: want an octal mode such as 0660", s)
	}
	mode := os.FileMode(m)
	if err := daemon.CheckSocketMode(mode); err != nil {
		return 0, fmt.Errorf("--socket-mode: %w", err)
	}
	return mode, nil
}

func pick(flag, file, def string) string {
	switch {
	case flag != "":
		return flag
	case file != "":
		return file
	}
	return def
}

func runDaemon(cmd *cobra.Command, o daemonOptions) error { return serveDaemon(cmd, o, nil) }

// runNode is `sluice node`: the daemon with pod policies and the NRI
// plugin (node_linux.go).
func runNode(cmd *cobra.Command, o daemonOptions, n nodeOptions) error {
	return serveDaemon(cmd, o, &n)
}

func serveDaemon(cmd *cobra.Command, o daemonOptions, node *nodeOptions) error {
	if os.Geteuid() != 0 {
		return errors.New("the daemon needs root")
	}
	// Descriptors the daemon inherited (a shell's, a supervisor's) would
	// reach every session's command: exec closes only descriptors opened
	// close-on-exec, as Go opens its own. A socket handed to a confined
	// agent is one the datapath never judges.
	if err := closeInheritedOnExec(); err != nil {
		return err
	}
	fc, err := loadFileConfig(o.config, cmd.Flags().Changed("config"))
	if err != nil {
		return err
	}
	ups := o.dnsUpstreams
	if len(ups) == 0 {
		ups = fc.DNSUpstreams
	}
	// The state directory and the instance together (instanceConfig);
	// daemon.Config.StateDir carries the choice on.
	stateDir := pick(o.stateDir, fc.StateDir, "")
	ecfg, err := instanceConfig(stateDir)
	if err != nil {
		return err
	}
	dnsPath, err := enforcer.ParseDNSPath(pick(o.dnsPath, fc.DNSPath, dnsPathDefault))
	if err != nil {
		return fmt.Errorf("--dns-path: %w", err)
	}
	sockMode, err := parseSocketMode(pick(o.socketMode, fc.SocketMode, ""))
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("container-caller") {
		fc.ContainerCallers = o.containerCallers
	}
	cfg := daemon.Config{
		AllowlistPath:    pick(o.allowlist, fc.Allowlist, daemon.DefaultAllowlist),
		SocketPath:       pick(socketFlag, fc.Socket, api.SocketPath("")),
		SocketMode:       sockMode,
		StateDir:         stateDir,
		Upstreams:        ups,
		AuditLog:         pick(o.auditLog, fc.AuditLog, "/var/log/sluice/audit.jsonl"),
		MetricsAddr:      pick(o.metricsAddr, fc.MetricsAddr, ""),
		SessionGroup:     pick(o.sessionGroup, fc.Group, "sluice"),
		AdminGroup:       pick(o.adminGroup, fc.AdminGroup, ""),
		ContainerCallers: fc.ContainerCallers,
		// Only in the file: a policy per container is configuration, read
		// at start; its files are watched (a change applies at once).
		ContainerPolicies: fc.ContainerPolicies,
		// Both lists, the file's and the flags': each is the
		// administrator's, and a flag must not silently drop a path the
		// file protects.
		ReadOnlyPaths: append(slices.Clone(fc.ReadOnlyPaths), o.readOnly...),
		Version:       versionString(),
		AskTimeout:    o.askTimeout,
		AskMaxPending: o.askMaxPending,
		Log:           cmd.ErrOrStderr(),
		Enforcer:      ecfg,
		DNS: enforcer.DNSOptions{MinTTL: o.dnsTTLMin, MaxTTL: o.dnsTTLMax, Grace: o.dnsGrace,
			MaxIPsPerName: o.dnsMaxIPs, Path: dnsPath},
	}
	if cfg.AuditLog != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.AuditLog), 0o750); err != nil {
			return fmt.Errorf("audit log directory: %w", err)
		}
	}
	// Sessions inherit the daemon's cgroup v1 membership: out of a
	// container's v1 cgroups, they outlive a restart of the daemon's
	// container (cgroups.LeaveV1).
	if moved, err := cgroups.LeaveV1(); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "sluice daemon: warning: %v; sessions may die with this daemon's container or unit\n", err)
	} else if len(moved) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "sluice daemon: left the cgroup v1 hierarchies %s for their roots, so that sessions outlive this daemon's container\n", strings.Join(moved, " "))
	}
	if node != nil {
		cfg.PodPolicies = node.policies
		cfg.PodGuardFile = node.guardFile
	}
	srv, err := daemon.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	defer stop()
	if node != nil {
		if err := startNode(ctx, cmd, srv, *node); err != nil {
			return err
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, unix.SIGHUP)
	go func() {
		for range hup {
			if err := srv.ReopenAuditLog(); err != nil {
				fmt.Fprintln(os.Stderr, "sluice daemon:", err)
			}
		}
	}()
	fmt.Fprintf(cmd.ErrOrStderr(), "sluice daemon: listening on %s, allowlist %s\n", cfg.SocketPath, cfg.AllowlistPath)
	return srv.Serve(ctx)
}
