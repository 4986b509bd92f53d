// SPDX-License-Identifier: Apache-2.0

package needs

import (
	"strings"
	"testing"
)

func TestRequired(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		t.Setenv(Env, v)
		if got := Required(); got != want {
			t.Errorf("%s=%q: Required() = %v, want %v", Env, v, got, want)
		}
	}
}

func TestAttempts(t *testing.T) {
	t.Setenv(Env, "")
	if Attempts() != 1 {
		t.Errorf("without the switch: %d attempts, want 1", Attempts())
	}
	t.Setenv(Env, "1")
	if Attempts() < 2 {
		t.Errorf("with the switch: %d attempts, want a retry", Attempts())
	}
}

func TestMessageNamesEveryMissingPieceAndItsFix(t *testing.T) {
	missing := []Missing{
		{"no cgroup2 mount", "mount -t cgroup2 none /sys/fs/cgroup"},
		{"/proc/sys is read-only", "--security-opt systempaths=unconfined"},
	}
	t.Setenv(Env, "1")
	msg := Message("e2e", missing)
	for _, want := range []string{"e2e:", "no cgroup2 mount", "fix: mount -t cgroup2", "read-only", "systempaths=unconfined", "failing instead of skipping"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	t.Setenv(Env, "")
	if msg := Message("e2e", missing); !strings.Contains(msg, "skips") {
		t.Errorf("without the switch the message should say the tests skip:\n%s", msg)
	}
}

// The switch decides: a Skip under it is a failure, an Absent never is.
// Run in subprocess-free form: a fake TB records what was called.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = format }
func (f *fakeTB) Skip(args ...any)                  { f.skip = "skip" }
func (f *fakeTB) Skipf(format string, args ...any)  { f.skip = format }

func TestSkipFailsUnderTheSwitch(t *testing.T) {
	t.Setenv(Env, "1")
	f := &fakeTB{}
	Skip(f, "needs root")
	if f.fatal == "" || f.skip != "" {
		t.Errorf("Skip under the switch: fatal %q skip %q, want a failure", f.fatal, f.skip)
	}
	f = &fakeTB{}
	Absent(f, "no SCTP")
	if f.fatal != "" || f.skip == "" {
		t.Errorf("Absent under the switch: fatal %q skip %q, want a skip", f.fatal, f.skip)
	}
	t.Setenv(Env, "")
	f = &fakeTB{}
	Skip(f, "needs root")
	if f.fatal != "" || f.skip == "" {
		t.Errorf("Skip without the switch: fatal %q skip %q, want a skip", f.fatal, f.skip)
	}
}
