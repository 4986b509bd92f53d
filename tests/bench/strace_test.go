// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseStrace(t *testing.T) {
	in := `5635 bpf(BPF_PROG_LOAD, {prog_type=BPF_PROG_TYPE_CGROUP_SOCKOPT, prog_name="sluice_setsocko", prog_ifindex=0}, 168 <unfinished ...>
5636 futex(0x970aa0, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>
5637 openat(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY|O_CLOEXEC) = 3 <0.000020>
5635 <... bpf resumed>) = 26 <0.164527>
5636 <... futex resumed>) = 0 <0.162945>
5637 bpf(BPF_MAP_UPDATE_ELEM, {map_fd=5, key=0x1, value=0x2, flags=BPF_ANY}, 32) = 0 <0.000010>
5637 openat(AT_FDCWD, "/sys", O_RDONLY) = 4 <0.000030>
5637 --- SIGURG {si_signo=SIGURG, si_code=SI_TKILL} ---
`
	got, err := parseStrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []syscallCost{
		{"bpf BPF_PROG_LOAD sluice_setsocko", 1, 164527 * time.Microsecond},
		{"openat", 2, 50 * time.Microsecond},
		{"bpf BPF_MAP_UPDATE_ELEM", 1, 10 * time.Microsecond},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
