// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"strings"
	"testing"
)

// Adopted sessions' cgroups are told apart from sluice run's, containers'
// and anything else under the root by their base name.
func TestAdoptedBase(t *testing.T) {
	for name, want := range map[string]bool{
		"adopt-4242-0123456789ab":       true,
		"adopt-4242-0123456789a":        false,
		"adopt-4242-0123456789abc":      false,
		"adopt--0123456789ab":           false,
		"adopt-4242-0123456789AB":       false,
		"run-4242-0123456789ab":         false,
		"xadopt-4242-0123456789ab":      false,
		"adopt-4242-0123456789ab.scope": false,
		"sluice-adopt-1-0123456789ab":   false,
		strings.Repeat("a", 64):         false,
	} {
		if got := adoptedBase.MatchString(name); got != want {
			t.Errorf("adoptedBase(%q) = %v, want %v", name, got, want)
		}
	}
}

// A comm may hold spaces and parentheses; the fields after it are found
// from the last ')'.
func TestParseStat(t *testing.T) {
	comm, ppid, flags, err := parseStat([]byte("4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0\n"))
	if err != nil || comm != "a (b) c" || ppid != 17 || flags != 4194560 {
		t.Errorf("parseStat = %q %d %d %v", comm, ppid, flags, err)
	}
	for _, bad := range []string{"", "4242 no parens", "4242 (x) S 1"} {
		if _, _, _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
	// This very process: its parent is the one that started the test.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skip(err)
	}
	if _, ppid, flags, err := parseStat(b); err != nil || ppid != os.Getppid() || flags&pfKthread != 0 {
		t.Errorf("own stat: ppid %d flags %#x %v, want ppid %d and no PF_KTHREAD", ppid, flags, err, os.Getppid())
	}
}

func TestDaemonAncestor(t *testing.T) {
	if _, ok := daemonAncestor(os.Getppid()); !ok {
		t.Errorf("the parent of this process is not found as its ancestor")
	}
	if _, ok := daemonAncestor(os.Getpid()); ok {
		t.Errorf("this process is its own ancestor")
	}
}

func TestAdoptLabel(t *testing.T) {
	for _, ok := range []string{"", "job", "build #12 (linux)", "déjà vu"} {
		if _, err := adoptLabel(ok); err != nil {
			t.Errorf("adoptLabel(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"a\nb", "a\x1b[31m", strings.Repeat("x", maxAdoptLabel+1), "\xff"} {
		if _, err := adoptLabel(bad); err == nil {
			t.Errorf("adoptLabel(%q): no error", bad)
		}
	}
}

func TestStatusUID(t *testing.T) {
	if uid, ok := statusUID([]byte("Name:\tx\nUid:\t1001\t0\t0\t0\nGid:\t5\n")); !ok || uid != 1001 {
		t.Errorf("statusUID = %d %v, want the real uid 1001", uid, ok)
	}
	if _, ok := statusUID([]byte("Name:\tx\n")); ok {
		t.Errorf("statusUID of a file without Uid: ok")
	}
}
