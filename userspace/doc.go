// SPDX-License-Identifier: Apache-2.0

// Package userspace is the room of the modes without BPF: where the
// cgroup datapath cannot load (no root, no cgroup v2, another OS), sluice
// points the command at its allowlist proxy (package proxy) and a backend
// here makes a program that ignores the proxy variables fail fast instead
// of going around it. This package holds no code; each backend is a
// subpackage named for the kernel mechanism it drives, so that a reader
// looking for "the macOS backend" finds it beside the others:
//
//   - landlock: Linux without BPF; the Landlock mode that puts the sandbox
//     room's primitives (sandbox.RestrictConnect, seccomp.TCPOnly) around
//     one command, started through the `sluice __confine` shim.
//   - seatbelt: macOS; a generated Seatbelt profile run by sandbox-exec.
//   - wfp: Windows; Windows Filtering Platform filters (behind the
//     sluice_wfp build tag).
//
// Why these stay here and not in sandbox/: sandbox/ holds what confines a
// session's processes on Linux in every mode (the Landlock domain, the
// seccomp filters, the mount namespace, the shim); the backends here are
// whole enforcement modes of their own, each the one thing standing
// between a command and the network on its platform, and the proxy they
// lean on serves every BPF session too, so it has its own room. A
// userspace session's lifecycle (the proxy started, the backend put around
// the command, the command supervised, its refusals reported) is the
// session service's (sessions.StartUserspace): a backend here only says
// how one command is confined.
package userspace
