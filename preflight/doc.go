// SPDX-License-Identifier: Apache-2.0

// Package preflight is what this machine has for sluice: the checks
// behind `sluice check` (privileges, the bpf syscall, BTF, cgroup v2 and
// where sessions' cgroups live, the container flag and misplaced
// containers, bpffs, a trial load of the datapath, unix-socket hooks,
// Landlock and the sandbox's layers, and which modes and DNS path
// `sluice run` gets here). Each check is one Result with a status, what
// was found and, when it is not ok, how to fix it.
//
// The package only looks: it reads the kernel's and the engines' state
// and probes what the kernel will load (the datapath check attaches the
// programs to a throwaway cgroup and removes it). It starts no session
// and prints nothing; the command prints the results, so that their form
// (which scripts grep) is the command's alone. The machine-facing code is
// in _linux.go files; the decisions that need no machine (Docker's cgroup
// driver, the flag that confines a container, the DNS path's wording,
// which statuses a mode gets) are platform-free and tested without root.
package preflight
