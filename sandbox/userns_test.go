// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
)

// seccompData is struct seccomp_data for nr, arch and a first argument,
// laid out for x/net/bpf's VM: it loads words in network byte order,
// where the kernel loads them in the machine's, so each 32-bit word is
// written big-endian at the offset the kernel reads it from.
func seccompData(nr, arch uint32, arg0 uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	binary.BigEndian.PutUint32(b[offArg0:], uint32(arg0))
	binary.BigEndian.PutUint32(b[offArg0+4:], uint32(arg0>>32))
	return b
}

func TestUsernsProgram(t *testing.T) {
	for goarch, a := range usernsArches {
		prog, err := usernsProgram(goarch)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatalf("%s: %v", goarch, err)
		}
		const sigchld, thread, newns = 17, 0x50f00, 0x20000
		for _, tc := range []struct {
			name     string
			nr, arch uint32
			arg0     uint64
			want     uint32
		}{
			{"unshare(CLONE_NEWUSER)", a.unshare, a.audit, cloneNewUser, seccompRetErrno | errnoEPERM},
			{"unshare(CLONE_NEWUSER|CLONE_NEWNS)", a.unshare, a.audit, cloneNewUser | newns, seccompRetErrno | errnoEPERM},
			{"unshare(CLONE_NEWNS)", a.unshare, a.audit, newns, seccompRetAllow},
			{"clone(CLONE_NEWUSER|SIGCHLD)", a.clone, a.audit, cloneNewUser | sigchld, seccompRetErrno | errnoEPERM},
			{"clone(SIGCHLD)", a.clone, a.audit, sigchld, seccompRetAllow},
			{"clone(thread)", a.clone, a.audit, thread, seccompRetAllow},
			{"clone3", nrClone3, a.audit, 0, seccompRetErrno | errnoENOSYS},
			{"another call with CLONE_NEWUSER's bit", 0, a.audit, cloneNewUser, seccompRetAllow},
			{"another ABI", a.unshare, 0x40000003, cloneNewUser, seccompRetKillProcess},
		} {
			got, err := vm.Run(seccompData(tc.nr, tc.arch, tc.arg0))
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != tc.want {
				t.Errorf("%s %s: %#x, want %#x", goarch, tc.name, got, tc.want)
			}
		}
		if a.x32 {
			got, _ := vm.Run(seccompData(x32Bit|a.unshare, a.audit, 0))
			if uint32(got) != seccompRetKillProcess {
				t.Errorf("%s x32 unshare: %#x, want kill", goarch, got)
			}
		}
	}
	if _, err := usernsProgram("riscv64"); err == nil {
		t.Error("a filter for an arch without numbers")
	}
}
