// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/podpolicy"
)

// nodeOptions are the flags of `sluice node` beside the daemon's.
type nodeOptions struct {
	nriSocket string
	policies  string
	hookDir   string
	guardFile string
}

func newNodeCmd() *cobra.Command {
	var o daemonOptions
	var n nodeOptions
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run the Kubernetes node agent: confine pods of guarded namespaces through containerd's NRI",
		Long: `Run sluice as a Kubernetes node agent (a DaemonSet's pod: host PID, bpffs,
the cgroup2 root, the runtime's NRI socket). It is the daemon with one more
front door: an NRI plugin through which containerd hands it each pod as it
starts and asks before each container is created. A pod of a namespace the
policies' guard (namespaces.json) names gets its namespace's default policy
or the one its annotation sluice.dev/policy names where the guard lets it,
narrowed to the node's allowlist, attached at the pod's own cgroup (the
kubelet's; nothing is moved). A guarded pod with no policy is refused: its
containers are not created. Pods stay confined while the agent is down;
` + "`sluice node hook`" + ` refuses new containers of guarded namespaces then
(docs/kubernetes.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNode(cmd, o, n) },
	}
	f := cmd.Flags()
	f.StringVar(&n.nriSocket, "nri-socket", "/var/run/nri/nri.sock", "the runtime's NRI socket")
	f.StringVar(&n.policies, "policies", "/etc/sluice/node", "the pod policies: a mounted ConfigMap, NAME.json policies and the guard namespaces.json (watched; a malformed change keeps the last good one)")
	f.StringVar(&n.hookDir, "hook-dir", "/opt/sluice/bin", "copy this binary here at start, for the runtime's fail-closed OCI hook (`sluice node hook`); empty: do not")
	f.StringVar(&n.guardFile, "guard-file", podpolicy.DefaultGuardFile, "keep the copy of the guard in force here, for the fail-closed hook (`sluice node hook --guard-file`); on disk, so that it outlives a reboot")
	f.StringVar(&o.config, "config", "/etc/sluice/sluice.json", "configuration file (flags override it; a missing default file is fine; an unknown key is an error)")
	f.StringVar(&o.allowlist, "allowlist", "", "the node allowlist every pod policy is narrowed to (default /etc/sluice/network_allowlist.json)")
	f.StringVar(&o.stateDir, "state-dir", "", "state directory (default /run/sluice)")
	f.StringVar(&o.auditLog, "audit-log", "", "audit log file, JSON lines (default /var/log/sluice/audit.jsonl)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this loopback address, e.g. 127.0.0.1:9469 (default off)")
	o.addDNSFlags(f, "DNS server for allowed names, ADDR[:PORT] (repeatable; default: the host's resolv.conf)",
		"where pods' UDP DNS goes: auto, kernel or resolver (as for `sluice daemon`); default: the config's dns_path, else "+dnsPathDefault)
	cmd.AddCommand(newNodeHookCmd())
	return cmd
}

// hookOptions are the flags of `sluice node hook`.
type hookOptions struct {
	guardFile string
	exempt    []string
}

func newNodeHookCmd() *cobra.Command {
	var o hookOptions
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "The runtime's OCI createRuntime hook: refuse a guarded pod's container that sluice does not confine",
		Long: `Run by the container runtime (containerd's base_runtime_spec hooks) for every
container, with the OCI state on standard input. A container of a namespace
the node's guard names (the copy ` + "`sluice node`" + ` keeps on disk, so that it
outlives a reboot, when the kubelet may start pods before the agent) whose pod cgroup has no sluice datapath attached is refused: the
hook exits 1 and the runtime fails the container, so a pod created while the
agent is down never runs unconfined. Sandboxes (pause) and namespaces not
guarded pass; before the agent ever ran (no guard copy) everything passes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNodeHook(cmd, o) },
	}
	cmd.Flags().StringVar(&o.guardFile, "guard-file", podpolicy.DefaultGuardFile, "the agent's copy of its guard (`sluice node --guard-file`)")
	cmd.Flags().StringArrayVar(&o.exempt, "exempt", []string{"kube-system", "sluice-system"}, "a namespace never refused, whatever the guard says: the agent's own, and what the node needs to start it (repeatable)")
	return cmd
}
