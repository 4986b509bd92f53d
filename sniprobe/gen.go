// SPDX-License-Identifier: Apache-2.0

// Package sniprobe is a prototype (issue 18): it judges the TLS SNI of a
// checked connection in the kernel, on the client's own socket (sk_msg),
// so that the connection goes to the original address directly instead of
// through the user-space verifier. It loads its own object (bpf/sniprobe.c)
// and attaches to one cgroup; it is opt-in and not part of the datapath.
package sniprobe

//go:generate go tool bpf2go -cc clang-19 -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" -target bpfel -tags linux -type sp_name_key -type sp_state sniprobe ../bpf/sniprobe.c -- -I../bpf
