// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/kaudit"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/sandbox"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

func runChecks() []checkResult {
	var rs []checkResult
	root := os.Geteuid() == 0
	if root {
		rs = append(rs, checkResult{name: "privileges", status: checkPass, detail: "running as root"})
	} else {
		rs = append(rs, checkResult{name: "privileges", status: checkFail, detail: "not root: loading BPF and creating cgroups need it",
			fix: "run `sudo sluice check` / `sudo sluice run ...`"})
	}

	bpfOK := false
	if m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		rs = append(rs, checkResult{name: "bpf syscall", status: checkFail, detail: err.Error(),
			fix: "run as root (CAP_BPF and CAP_NET_ADMIN); in a container add --cap-add BPF --cap-add NET_ADMIN or --privileged; a kernel built with CONFIG_BPF_SYSCALL"})
	} else {
		m.Close()
		bpfOK = true
		rs = append(rs, checkResult{name: "bpf syscall", status: checkPass, detail: "maps can be created"})
	}

	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		rs = append(rs, checkResult{name: "BTF", status: checkWarn, detail: "no /sys/kernel/btf/vmlinux (sluice's programs do not need CO-RE)",
			fix: "a kernel built with CONFIG_DEBUG_INFO_BTF=y"})
	} else {
		rs = append(rs, checkResult{name: "BTF", status: checkPass, detail: "/sys/kernel/btf/vmlinux"})
	}

	mount, err := cgroups.Mount()
	if err != nil {
		rs = append(rs, checkResult{name: "cgroup2", status: checkFail, detail: err.Error(),
			fix: "mount the unified hierarchy: mount -t cgroup2 none /sys/fs/cgroup (or /sys/fs/cgroup/unified on a hybrid layout)"})
	} else {
		rs = append(rs, checkResult{name: "cgroup2", status: checkPass, detail: "mounted at " + mount})
		rs = append(rs, placementCheck(mount))
		rs = append(rs, containerChecks(mount)...)
	}

	var st unix.Statfs_t
	bpffs := filepath.Dir(loader.DefaultPinDir)
	switch err := unix.Statfs(bpffs, &st); {
	case err == nil && st.Type == unix.BPF_FS_MAGIC:
		rs = append(rs, checkResult{name: "bpffs", status: checkPass, detail: "mounted at " + bpffs})
	case root:
		rs = append(rs, checkResult{name: "bpffs", status: checkWarn, detail: "not mounted at " + bpffs + "; sluice mounts it when it starts",
			fix: "mount -t bpf bpf " + bpffs})
	default:
		rs = append(rs, checkResult{name: "bpffs", status: checkFail, detail: "not mounted at " + bpffs,
			fix: "mount -t bpf bpf " + bpffs})
	}

	switch {
	case !bpfOK || mount == "":
		rs = append(rs, checkResult{name: "datapath", status: checkFail, detail: "not tried: needs the bpf syscall and cgroup2"})
	default:
		rs = append(rs, probeDatapath(mount))
	}
	if bpfOK {
		rs = append(rs, unixCheck(), checkResult{name: "loopback policy", status: checkPass,
			detail: `"loopback": "session" in an allowlist limits loopback to the session's own listeners (post_bind4/6), loopback_ports and its sluice resolver and proxy; the default "all" leaves loopback open`})
	}

	if abi, err := sandbox.ProbeLandlock(); err != nil {
		rs = append(rs, checkResult{name: "landlock", status: checkWarn, detail: "unavailable: " + err.Error(),
			fix: "boot with lsm=...,landlock (only needed for the unprivileged fallback)"})
	} else {
		rs = append(rs, checkResult{name: "landlock", status: checkPass, detail: fmt.Sprintf("ABI version %d", abi)})
	}

	rs = append(rs, sandboxChecks()...)

	// The modes `sluice run` can use here, strongest first.
	bpfMode := "unavailable"
	for _, r := range rs {
		if r.name == "datapath" && r.status == checkPass {
			bpfMode = "available (as root, or through `sluice daemon`)"
		}
	}
	if client().Available(context.Background()) {
		bpfMode = "available through the daemon at " + api.SocketPath(socketFlag)
	}
	rs = append(rs, checkResult{name: "mode bpf", status: modeStatus(bpfMode), detail: bpfMode})
	rs = append(rs, dnsPathCheck(bpfMode))
	llMode := "available (Landlock TCP rules and seccomp)"
	if err := landlock.Available(); err != nil {
		llMode = "unavailable: " + err.Error()
	}
	rs = append(rs, checkResult{name: "mode landlock", status: modeStatus(llMode), detail: llMode})
	rs = append(rs, checkResult{name: "mode proxy", status: checkPass, detail: "available (contains only programs that honour HTTP_PROXY)"})
	return rs
}

// sandboxChecks are the sandbox's layers (package sandbox): what a
// session's processes may touch besides the network. A missing layer is a
// warning: the network enforcement still works without it.
func sandboxChecks() []checkResult {
	var rs []checkResult
	for _, l := range sandbox.Check() {
		st := checkPass
		if l.Level != sandbox.Full {
			st = checkWarn
		}
		detail := l.Detail
		if l.Name == "process isolation" && l.Level == sandbox.Missing {
			detail += " (sluice run --share-processes)"
		}
		rs = append(rs, checkResult{name: l.Name, status: st, detail: detail, fix: l.Fix})
	}
	if abi := sandbox.LandlockABI(); abi >= 1 {
		if why, fix, ok := kaudit.Explained(abi); ok {
			rs = append(rs, checkResult{name: "sandbox refusals", status: checkPass,
				detail: "explained: the kernel's Landlock audit records are read, and each refusal of a session's domain (ptrace, pidfd_getfd, process_vm_*, /proc/PID/mem, signals) becomes a sluice line and a sandbox_denied audit event"})
		} else {
			rs = append(rs, checkResult{name: "sandbox refusals", status: checkWarn,
				detail: "silent: refused with EPERM/EACCES but not explained, because " + why, fix: fix})
		}
	}
	return rs
}

// modeStatus: a missing mode is a warning, not a failure; the bpf checks
// above already fail when kernel enforcement is impossible.
func modeStatus(detail string) checkStatus {
	if strings.HasPrefix(detail, "unavailable") {
		return checkWarn
	}
	return checkPass
}

// probeDatapath loads sluice's programs and attaches them with bpf_link to
// a throwaway cgroup, then removes it again.
func probeDatapath(mount string) checkResult {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(mount, "sluice-check-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return checkResult{name: "datapath", status: checkFail, detail: "create a test cgroup: " + err.Error(),
			fix: "run as root with a writable cgroup2 mount"}
	}
	defer os.Remove(dir)
	if err := loader.Probe(dir); err != nil {
		detail := err.Error()
		if i := strings.IndexByte(detail, '\n'); i > 0 {
			detail = detail[:i]
		}
		return checkResult{name: "datapath", status: checkFail, detail: detail,
			fix: "a kernel >= 6.1 with cgroup sock_addr, sockopt and skb programs and bpf_link (CONFIG_CGROUP_BPF=y)"}
	}
	return checkResult{name: "datapath", status: checkPass, detail: "programs verified and attached with bpf_link (connect4/6, sendmsg4/6, sock_create, setsockopt, egress, post_bind4/6, connect_unix and sendmsg_unix where the kernel has them)"}
}

// unixCheck says how the sessions' unix sockets are judged on this kernel.
func unixCheck() checkResult {
	if err := loader.ProbeUnix(); err != nil {
		return checkResult{name: "unix sockets", status: checkWarn,
			detail: "not judged: " + err.Error() + "; no fallback is in force: pathname and abstract unix sockets are open to sessions (a sandbox with Landlock ABI 6 scopes still refuses abstract sockets outside the session, without an explanation)",
			fix:    "Linux >= 6.7 (cgroup connect_unix and sendmsg_unix hooks)"}
	}
	return checkResult{name: "unix sockets", status: checkPass,
		detail: "judged in the kernel (cgroup connect_unix, sendmsg_unix): a session reaches only the unix sockets its allowlist lists (unix_sockets), the built-in list and the sluice API socket"}
}

// placementCheck says where sessions' cgroups live on this machine, and
// what that means with systemd and with a hybrid layout.
func placementCheck(mount string) checkResult {
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return checkResult{name: "session cgroups", status: checkFail, detail: err.Error()}
	}
	instance := cfg.WithDefaults().CgroupName
	if enforcer.SystemdScopes() {
		slice := cgroups.SliceName(instance)
		detail := "systemd: each session is a transient scope " + strings.TrimSuffix(slice, ".slice") + "-run-*.scope in " + slice +
			" (" + filepath.Join(mount, slice) + "), created over D-Bus with Delegate=yes; see systemctl status " + slice +
			"; --memory-max and --pids-max work where systemd offers the controllers to " + slice
		if !cgroups.SystemdIsInit() {
			detail += " (forced by " + enforcer.CgroupManagerEnv + "=systemd, but PID 1 is not systemd)"
			return checkResult{name: "session cgroups", status: checkWarn, detail: detail}
		}
		return checkResult{name: "session cgroups", status: checkPass, detail: detail + " (" + enforcer.CgroupManagerEnv + "=cgroupfs: sluice's own subtree instead)"}
	}
	where := filepath.Join(mount, instance)
	var detail string
	if cgroups.SystemdIsInit() {
		detail = "PID 1 is systemd, but " + enforcer.CgroupManagerEnv + "=cgroupfs: sessions live in " + where + ", outside systemd's units " +
			"(unset it for transient scopes in " + cgroups.SliceName(instance) + ")"
	} else {
		detail = "PID 1 is not systemd; sessions live in " + where + " at the top of the cgroup2 tree"
	}
	if v1 := cgroups.V1Hierarchies(); len(v1) > 0 {
		detail += fmt.Sprintf("; hybrid layout (%d cgroup v1 hierarchies): the daemon moves itself to their roots at start, "+
			"so that its sessions outlive its container or unit", len(v1))
	}
	return checkResult{name: "session cgroups", status: checkPass, detail: detail}
}

// dnsPathCheck says which DNS path bpf-mode sessions take here: the
// daemon's when one answers (its flag or config may differ from the
// built-in default), else the one `sluice run` takes without a daemon.
func dnsPathCheck(bpfMode string) checkResult {
	if strings.HasPrefix(bpfMode, "unavailable") {
		return checkResult{name: "DNS path", status: checkPass, detail: "none: bpf mode is unavailable (the session's proxy resolves)"}
	}
	path, where := dnsPathDefault, "sessions of `sluice run` without a daemon"
	if strings.Contains(bpfMode, "through the daemon") {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := client().Status(ctx)
		cancel()
		if err == nil && st.DNSPath != "" {
			path, where = st.DNSPath, "the daemon's sessions"
		}
	}
	if err := loader.ProbeKDNS(); err != nil {
		return checkResult{name: "DNS path", status: checkWarn, detail: "resolver, for " + where + ": " + firstLineOf(err.Error()),
			fix: "a kernel whose verifier runs bpf_loop callbacks (6.1 or later); DNS works on the resolver path meanwhile"}
	}
	var detail string
	switch path {
	case "kernel":
		detail = "kernel: UDP DNS goes straight to the upstream, judged and learned by the datapath; the resolver answers the rest"
	case "resolver":
		detail = "resolver: every query goes through the session's local resolver; none resolves while it is down"
	default:
		detail = path + ": queries go through the session's local resolver (and its cache); while it is down (its daemon restarting), " +
			"UDP DNS goes straight to the upstream, judged and learned by the datapath"
	}
	return checkResult{name: "DNS path", status: checkPass, detail: detail + " (in force for " + where + "; --dns-path auto|kernel|resolver)"}
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
