// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/preflight"
)

// printChecks' columns and last line are what scripts grep: the status
// in five columns, the name in 22, a fix line only for a check that is
// not ok, and the verdict.
func TestPrintChecks(t *testing.T) {
	var b strings.Builder
	failed := printChecks(&b, []preflight.Result{
		{Name: "bpf syscall", Status: preflight.Pass, Detail: "maps can be created", Fix: "never shown"},
		{Name: "BTF", Status: preflight.Warn, Detail: "no BTF", Fix: "a kernel with BTF"},
		{Name: "mode bpf", Status: preflight.Warn, Detail: "unavailable"},
	})
	want := "ok    bpf syscall            maps can be created\n" +
		"warn  BTF                    no BTF\n" +
		"                             fix: a kernel with BTF\n" +
		"warn  mode bpf               unavailable\n" +
		"kernel enforcement is possible on this machine\n"
	if failed || b.String() != want {
		t.Errorf("failed %v, printed\n%s\nwant\n%s", failed, b.String(), want)
	}

	b.Reset()
	failed = printChecks(&b, []preflight.Result{{Name: "cgroup2", Status: preflight.Fail, Detail: "not mounted", Fix: "mount it"}})
	want = "FAIL  cgroup2                not mounted\n" +
		"                             fix: mount it\n" +
		"kernel enforcement is NOT possible on this machine\n"
	if !failed || b.String() != want {
		t.Errorf("failed %v, printed\n%s\nwant\n%s", failed, b.String(), want)
	}
}
