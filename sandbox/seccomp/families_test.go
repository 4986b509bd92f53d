// SPDX-License-Identifier: Apache-2.0

package seccomp

import "testing"

// TestFamiliesFilter: BPF mode's filter refuses socket families the
// datapath cannot see, and io_uring (which creates sockets without
// socket(2)); UDP and raw (for capable users) stay to the datapath.
func TestFamiliesFilter(t *testing.T) {
	for goarch, a := range arches {
		sock := func(args ...uint64) call {
			c := call{arch: a.audit, nr: a.socket}
			copy(c.args[:], args)
			return c
		}
		cases := []filterCase{
			{"tcp4", sock(afInet, sockStream, 0), "allow"},
			{"udp6", sock(afInet6, sockDgram, 0), "allow"},
			{"icmp ping socket (the datapath refuses it)", sock(afInet, sockDgram, ipprotoICMP), "allow"},
			{"unix", sock(afUnix, sockStream, 0), "allow"},
			{"netlink", sock(afNetlink, sockRaw, 0), "allow"},
			{"vsock", sock(afVsock, sockStream, 0), "EAFNOSUPPORT"},
			{"packet", sock(afPacket, sockRaw, 0x0300), "EAFNOSUPPORT"},
			{"vsock with high garbage", sock(0x1_0000_0000|afVsock, sockStream, 0), "EAFNOSUPPORT"},
			{"io_uring_setup", call{arch: a.audit, nr: a.ioUringSetup}, "EPERM"},
			{"sendto fastopen", call{arch: a.audit, nr: a.sendto, args: [6]uint64{3, 0, 10, msgFastopen}}, "allow"},
			{"foreign arch", call{arch: auditArchI386, nr: 359, args: [6]uint64{afVsock}}, "kill"},
		}
		if a.x32 {
			cases = append(cases, filterCase{"x32 socket", call{arch: a.audit, nr: x32SyscallBit | a.socket, args: [6]uint64{afVsock}}, "kill"})
		}
		for _, tc := range cases {
			t.Run(goarch+"/"+tc.name, func(t *testing.T) {
				if got := verdictOfProgram(t, Families, goarch, tc.c); got != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
			})
		}
	}
}
