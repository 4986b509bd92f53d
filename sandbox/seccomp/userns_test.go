// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"testing"

	"golang.org/x/net/bpf"
)

// seccompData is struct seccomp_data for nr, arch and a first argument.
func seccompData(nr, arch uint32, arg0 uint64) []byte {
	return call{arch: arch, nr: nr, args: [6]uint64{arg0}}.bytes()
}

func TestUsernsProgram(t *testing.T) {
	for goarch, a := range arches {
		prog, err := NoUserNamespaces(goarch)
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
			{"clone3", a.clone3, a.audit, 0, seccompRetErrno | errnoENOSYS},
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
			got, _ := vm.Run(seccompData(x32SyscallBit|a.unshare, a.audit, 0))
			if uint32(got) != seccompRetKillProcess {
				t.Errorf("%s x32 unshare: %#x, want kill", goarch, got)
			}
		}
		if got, _ := vm.Run(seccompData(0xffffffff, a.audit, 0)); uint32(got) != seccompRetKillProcess {
			t.Errorf("%s system call -1: %#x, want kill", goarch, got)
		}
	}
	if _, err := NoUserNamespaces("riscv64"); err == nil {
		t.Error("a filter for an arch without numbers")
	}
}
