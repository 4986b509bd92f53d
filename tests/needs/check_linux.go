// SPDX-License-Identifier: Apache-2.0

//go:build linux

package needs

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// capability is one capability the suites use and why.
type capability struct {
	bit  uint
	name string // as docker's --cap-add spells it
	why  string
}

// The capabilities the kernel suites use. Docker's default set has all
// but SYS_ADMIN, NET_ADMIN and SYS_PTRACE.
var capabilities = []capability{
	{21, "SYS_ADMIN", "load BPF programs, create namespaces and cgroups, mount bpffs"},
	{12, "NET_ADMIN", "attach cgroup programs, create veth pairs, addresses and routes"},
	{13, "NET_RAW", "the world's sniffer (AF_PACKET)"},
	{19, "SYS_PTRACE", "read other processes' /proc entries and descriptors (pidfd_getfd)"},
	{6, "SETGID", "run confined commands as 65534"},
	{7, "SETUID", "run confined commands as 65534"},
	{5, "KILL", "kill sessions of other users"},
	{1, "DAC_OVERRIDE", "reach files of the confined user"},
	{18, "SYS_CHROOT", "the daemon's chroot caller test"},
}

// tools are the programs the suites run, with the Debian package of each.
var tools = []struct{ name, pkg string }{
	{"nsenter", "util-linux"},
	{"unshare", "util-linux"},
	{"setpriv", "util-linux"},
	{"ip", "iproute2"},
	{"sysctl", "procps"},
	{"go", "Go 1.26 from go.dev/dl (in PATH)"},
}

func check(n Need) []Missing {
	switch n {
	case Root:
		if os.Geteuid() != 0 {
			return []Missing{{"not root (euid " + strconv.Itoa(os.Geteuid()) + ")",
				"run as root: sudo make test (the suites load BPF programs, create cgroups and namespaces)"}}
		}
	case Caps:
		return checkCaps()
	case Cgroup2:
		return checkCgroup2()
	case IPv6:
		return checkIPv6()
	case ProcSys:
		var st unix.Statfs_t
		if err := unix.Statfs("/proc/sys", &st); err != nil {
			return []Missing{{"no /proc/sys: " + err.Error(), "mount -t proc proc /proc"}}
		}
		if st.Flags&unix.ST_RDONLY != 0 {
			return []Missing{{"/proc/sys is read-only (the tests set per-namespace sysctls and kernel.ns_last_pid)",
				"in docker: --security-opt systempaths=unconfined; elsewhere: mount -o remount,rw /proc/sys"}}
		}
	case HostPID:
		// kthreadd is pid 2 in the initial PID namespace only.
		if b, err := os.ReadFile("/proc/2/comm"); err != nil || strings.TrimSpace(string(b)) != "kthreadd" {
			return []Missing{{"not in the host's PID namespace (the kernel's events carry host pids, which the tests compare with their children's)",
				"in docker: --pid=host"}}
		}
	case Tools:
		var out []Missing
		for _, tl := range tools {
			if _, err := exec.LookPath(tl.name); err != nil {
				out = append(out, Missing{tl.name + " not in PATH", "install " + tl.pkg})
			}
		}
		return out
	}
	return nil
}

func checkCaps() []Missing {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return []Missing{{"cannot read /proc/self/status: " + err.Error(), "mount -t proc proc /proc"}}
	}
	eff, ok := capEff(string(b))
	if !ok {
		return []Missing{{"no CapEff line in /proc/self/status", "run on Linux with procfs mounted"}}
	}
	var lacking []string
	var add []string
	for _, c := range capabilities {
		if eff&(1<<c.bit) == 0 {
			lacking = append(lacking, "CAP_"+c.name+" ("+c.why+")")
			add = append(add, "--cap-add "+c.name)
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	return []Missing{{"capabilities: " + strings.Join(lacking, ", "),
		"run as root with them; in docker: " + strings.Join(add, " ") + " (--privileged is not needed)"}}
}

// capEff parses the effective capability mask out of /proc/self/status.
func capEff(status string) (uint64, bool) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

func checkCgroup2() []Missing {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []Missing{{"cannot read /proc/self/mountinfo: " + err.Error(), "mount -t proc proc /proc"}}
	}
	mnt, rw := cgroup2Mount(string(b))
	fix := "mount -t cgroup2 none /sys/fs/cgroup (where /sys/fs/cgroup holds v1 hierarchies: mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 none /sys/fs/cgroup/unified); in docker: --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw"
	switch {
	case mnt == "":
		return []Missing{{"no cgroup2 mount in /proc/self/mountinfo", fix}}
	case !rw:
		return []Missing{{"the cgroup2 mount at " + mnt + " is read-only", "mount -o remount,rw " + mnt + "; in docker: -v /sys/fs/cgroup:/sys/fs/cgroup:rw"}}
	}
	return nil
}

// cgroup2Mount finds the first cgroup2 mount in a mountinfo text and
// whether it is writable.
func cgroup2Mount(mountinfo string) (dir string, rw bool) {
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 5 {
				rw = true
				for _, o := range strings.Split(f[5], ",") {
					if o == "ro" {
						rw = false
					}
				}
				return unescapeMount(f[4]), rw
			}
		}
	}
	return "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func checkIPv6() []Missing {
	if _, err := os.Stat("/proc/sys/net/ipv6/conf/all/disable_ipv6"); err != nil {
		return []Missing{{"no IPv6 in this kernel (" + err.Error() + ")",
			"boot without ipv6.disable=1 (or load the ipv6 module)"}}
	}
	var out []Missing
	for _, conf := range []string{"all", "default"} {
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + conf + "/disable_ipv6")
		if err == nil && strings.TrimSpace(string(b)) != "0" {
			out = append(out, Missing{fmt.Sprintf("IPv6 is off in this network namespace (net.ipv6.conf.%s.disable_ipv6=%s)", conf, strings.TrimSpace(string(b))),
				fmt.Sprintf("sysctl -w net.ipv6.conf.%[1]s.disable_ipv6=0; in docker: --sysctl net.ipv6.conf.%[1]s.disable_ipv6=0", conf)})
		}
	}
	return out
}
