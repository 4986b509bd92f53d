// SPDX-License-Identifier: Apache-2.0

package preflight

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

// Run runs every check on this machine, in the order `sluice check`
// prints them. Only the datapath check changes anything: it creates a
// throwaway cgroup, attaches the programs there and removes it again.
func Run(o Options) []Result {
	var rs []Result
	root := os.Geteuid() == 0
	if root {
		rs = append(rs, Result{Name: "privileges", Status: Pass, Detail: "running as root"})
	} else {
		rs = append(rs, Result{Name: "privileges", Status: Fail, Detail: "not root: loading BPF and creating cgroups need it",
			Fix: "run `sudo sluice check` / `sudo sluice run ...`"})
	}

	bpfOK := false
	if m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		rs = append(rs, Result{Name: "bpf syscall", Status: Fail, Detail: err.Error(),
			Fix: "run as root (CAP_BPF and CAP_NET_ADMIN); in a container add --cap-add BPF --cap-add NET_ADMIN or --privileged; a kernel built with CONFIG_BPF_SYSCALL"})
	} else {
		m.Close()
		bpfOK = true
		rs = append(rs, Result{Name: "bpf syscall", Status: Pass, Detail: "maps can be created"})
	}

	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		rs = append(rs, Result{Name: "BTF", Status: Warn, Detail: "no /sys/kernel/btf/vmlinux (sluice's programs do not need CO-RE)",
			Fix: "a kernel built with CONFIG_DEBUG_INFO_BTF=y"})
	} else {
		rs = append(rs, Result{Name: "BTF", Status: Pass, Detail: "/sys/kernel/btf/vmlinux"})
	}

	mount, err := cgroups.Mount()
	if err != nil {
		rs = append(rs, Result{Name: "cgroup2", Status: Fail, Detail: err.Error(),
			Fix: "mount the unified hierarchy: mount -t cgroup2 none /sys/fs/cgroup (or /sys/fs/cgroup/unified on a hybrid layout)"})
	} else {
		rs = append(rs, Result{Name: "cgroup2", Status: Pass, Detail: "mounted at " + mount})
		rs = append(rs, placementCheck(mount))
		rs = append(rs, containerChecks(mount)...)
	}

	var st unix.Statfs_t
	bpffs := filepath.Dir(loader.DefaultPinDir)
	switch err := unix.Statfs(bpffs, &st); {
	case err == nil && st.Type == unix.BPF_FS_MAGIC:
		rs = append(rs, Result{Name: "bpffs", Status: Pass, Detail: "mounted at " + bpffs})
	case root:
		rs = append(rs, Result{Name: "bpffs", Status: Warn, Detail: "not mounted at " + bpffs + "; sluice mounts it when it starts",
			Fix: "mount -t bpf bpf " + bpffs})
	default:
		rs = append(rs, Result{Name: "bpffs", Status: Fail, Detail: "not mounted at " + bpffs,
			Fix: "mount -t bpf bpf " + bpffs})
	}

	switch {
	case !bpfOK || mount == "":
		rs = append(rs, Result{Name: "datapath", Status: Fail, Detail: "not tried: needs the bpf syscall and cgroup2"})
	default:
		rs = append(rs, probeDatapath(mount))
	}
	if bpfOK {
		rs = append(rs, unixCheck(), Result{Name: "loopback policy", Status: Pass,
			Detail: `"loopback": "session" in an allowlist limits loopback to the session's own listeners (post_bind4/6), loopback_ports and its sluice resolver and proxy; the default "all" leaves loopback open`})
	}

	if abi, err := sandbox.ProbeLandlock(); err != nil {
		rs = append(rs, Result{Name: "landlock", Status: Warn, Detail: "unavailable: " + err.Error(),
			Fix: "boot with lsm=...,landlock (only needed for the unprivileged fallback)"})
	} else {
		rs = append(rs, Result{Name: "landlock", Status: Pass, Detail: fmt.Sprintf("ABI version %d", abi)})
	}

	rs = append(rs, sandboxChecks()...)

	// The modes `sluice run` can use here, strongest first.
	bpfMode := "unavailable"
	for _, r := range rs {
		if r.Name == "datapath" && r.Status == Pass {
			bpfMode = "available (as root, or through `sluice daemon`)"
		}
	}
	daemon := api.NewClient(o.Socket)
	if daemon.Available(context.Background()) {
		bpfMode = "available through the daemon at " + o.Socket
	}
	rs = append(rs, Result{Name: "mode bpf", Status: modeStatus(bpfMode), Detail: bpfMode})
	rs = append(rs, dnsPathCheck(daemon, o.DNSPathDefault, bpfMode))
	llMode := "available (Landlock TCP rules and seccomp)"
	if err := landlock.Available(); err != nil {
		llMode = "unavailable: " + err.Error()
	}
	rs = append(rs, Result{Name: "mode landlock", Status: modeStatus(llMode), Detail: llMode})
	rs = append(rs, Result{Name: "mode proxy", Status: Pass, Detail: "available (contains only programs that honour HTTP_PROXY)"})
	return rs
}

// sandboxChecks are the sandbox's layers (package sandbox): what a
// session's processes may touch besides the network. A missing layer is a
// warning: the network enforcement still works without it.
func sandboxChecks() []Result {
	var rs []Result
	for _, l := range sandbox.Check() {
		st := Pass
		if l.Level != sandbox.Full {
			st = Warn
		}
		detail := l.Detail
		if l.Name == "process isolation" && l.Level == sandbox.Missing {
			detail += " (sluice run --share-processes)"
		}
		rs = append(rs, Result{Name: l.Name, Status: st, Detail: detail, Fix: l.Fix})
	}
	if abi := sandbox.LandlockABI(); abi >= 1 {
		if why, fix, ok := kaudit.Explained(abi); ok {
			rs = append(rs, Result{Name: "sandbox refusals", Status: Pass,
				Detail: "explained: the kernel's Landlock audit records are read, and each refusal of a session's domain (ptrace, pidfd_getfd, process_vm_*, /proc/PID/mem, signals) becomes a sluice line and a sandbox_denied audit event"})
		} else {
			rs = append(rs, Result{Name: "sandbox refusals", Status: Warn,
				Detail: "silent: refused with EPERM/EACCES but not explained, because " + why, Fix: fix})
		}
	}
	return rs
}

// probeDatapath loads sluice's programs and attaches them with bpf_link to
// a throwaway cgroup, then removes it again.
func probeDatapath(mount string) Result {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(mount, "sluice-check-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return Result{Name: "datapath", Status: Fail, Detail: "create a test cgroup: " + err.Error(),
			Fix: "run as root with a writable cgroup2 mount"}
	}
	defer os.Remove(dir)
	if err := loader.Probe(dir); err != nil {
		detail := err.Error()
		if i := strings.IndexByte(detail, '\n'); i > 0 {
			detail = detail[:i]
		}
		return Result{Name: "datapath", Status: Fail, Detail: detail,
			Fix: "a kernel >= 6.1 with cgroup sock_addr, sockopt and skb programs and bpf_link (CONFIG_CGROUP_BPF=y)"}
	}
	return Result{Name: "datapath", Status: Pass, Detail: "programs verified and attached with bpf_link (connect4/6, sendmsg4/6, sock_create, setsockopt, egress, post_bind4/6, connect_unix and sendmsg_unix where the kernel has them)"}
}

// unixCheck says how the sessions' unix sockets are judged on this kernel.
func unixCheck() Result {
	if err := loader.ProbeUnix(); err != nil {
		return Result{Name: "unix sockets", Status: Warn,
			Detail: "not judged: " + err.Error() + "; no fallback is in force: pathname and abstract unix sockets are open to sessions (a sandbox with Landlock ABI 6 scopes still refuses abstract sockets outside the session, without an explanation)",
			Fix:    "Linux >= 6.7 (cgroup connect_unix and sendmsg_unix hooks)"}
	}
	return Result{Name: "unix sockets", Status: Pass,
		Detail: "judged in the kernel (cgroup connect_unix, sendmsg_unix): a session reaches only the unix sockets its allowlist lists (unix_sockets), the built-in list and the sluice API socket"}
}

// placementCheck says where sessions' cgroups live on this machine, and
// what that means with systemd and with a hybrid layout.
func placementCheck(mount string) Result {
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return Result{Name: "session cgroups", Status: Fail, Detail: err.Error()}
	}
	instance := cfg.WithDefaults().CgroupName
	if enforcer.SystemdScopes() {
		slice := cgroups.SliceName(instance)
		detail := "systemd: each session is a transient scope " + strings.TrimSuffix(slice, ".slice") + "-run-*.scope in " + slice +
			" (" + filepath.Join(mount, slice) + "), created over D-Bus with Delegate=yes; see systemctl status " + slice +
			"; --memory-max and --pids-max work where systemd offers the controllers to " + slice
		if !cgroups.SystemdIsInit() {
			detail += " (forced by " + enforcer.CgroupManagerEnv + "=systemd, but PID 1 is not systemd)"
			return Result{Name: "session cgroups", Status: Warn, Detail: detail}
		}
		return Result{Name: "session cgroups", Status: Pass, Detail: detail + " (" + enforcer.CgroupManagerEnv + "=cgroupfs: sluice's own subtree instead)"}
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
	return Result{Name: "session cgroups", Status: Pass, Detail: detail}
}

// dnsPathCheck says which DNS path bpf-mode sessions take here: the
// daemon's when one answers (its flag or config may differ from the
// built-in default), else the one `sluice run` takes without a daemon.
func dnsPathCheck(daemon *api.Client, dnsPathDefault, bpfMode string) Result {
	if strings.HasPrefix(bpfMode, "unavailable") {
		return Result{Name: "DNS path", Status: Pass, Detail: "none: bpf mode is unavailable (the session's proxy resolves)"}
	}
	path, where := dnsPathDefault, "sessions of `sluice run` without a daemon"
	if strings.Contains(bpfMode, "through the daemon") {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := daemon.Status(ctx)
		cancel()
		if err == nil && st.DNSPath != "" {
			path, where = st.DNSPath, "the daemon's sessions"
		}
	}
	if err := loader.ProbeKDNS(); err != nil {
		return Result{Name: "DNS path", Status: Warn, Detail: "resolver, for " + where + ": " + firstLineOf(err.Error()),
			Fix: "a kernel whose verifier runs bpf_loop callbacks (6.1 or later); DNS works on the resolver path meanwhile"}
	}
	return Result{Name: "DNS path", Status: Pass, Detail: dnsPathDetail(path) + " (in force for " + where + "; --dns-path auto|kernel|resolver)"}
}
