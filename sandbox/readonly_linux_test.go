// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// roScript tries, as the user, every way of changing what is below dir
// (a directory with a file f and a directory sub in it) and prints one
// line per attempt: "NAME ok" or "NAME refused".
const roScript = `d=$1
try() { n=$1; shift; if "$@" 2>/dev/null; then echo "$n ok"; else echo "$n refused"; fi; }
try beside sh -c "echo x > $2/new"
try write sh -c "echo x >> $d/f"
try create sh -c "echo x > $d/new"
try mkdir mkdir $d/newdir
try chmod chmod 600 $d/f
try rename mv $d/f $d/f2
try unlink rm $d/sub/g
try rename-self mv $d $d.moved
try rename-parent mv $(dirname $d) $(dirname $d).moved
`

// inNamespace runs fn on a locked thread in a mount namespace of its own
// (all mounts private), thrown away afterwards.
func inNamespace(t *testing.T, fn func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // thrown away with its namespace: never unlocked
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// roTree makes base/parent/ro (f, sub/g in it) and base/parent/beside,
// all the user's, below a base the user can enter.
func roTree(t *testing.T) (ro, beside string) {
	t.Helper()
	base := t.TempDir()
	// The user must pass through t.TempDir's two directories (0700);
	// nothing above them is touched.
	_ = os.Chmod(filepath.Dir(base), 0o755)
	_ = os.Chmod(base, 0o755)
	parent := filepath.Join(base, "parent")
	ro, beside = filepath.Join(parent, "ro"), filepath.Join(parent, "beside")
	for _, d := range []string{parent, ro, filepath.Join(ro, "sub"), beside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(ro, "f"), filepath.Join(ro, "sub", "g")} {
		if err := os.WriteFile(f, []byte("orig\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// base itself is root's and 0755, so the user can rename parent only
	// if parent's own directory is the user's: make it so.
	if err := os.Chown(base, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{parent, ro, filepath.Join(ro, "sub"), beside, filepath.Join(ro, "f"), filepath.Join(ro, "sub", "g")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	return ro, beside
}

func runAsNobody(ro, beside string) (string, error) {
	c := exec.Command("sh", "-c", roScript, "sh", ro, beside)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := c.CombinedOutput()
	return string(out), err
}

// A read-only path refuses every change below it, and renaming it or a
// directory above it away (which would put a writable tree under its
// name), to its user; beside it, everything works. The unconfined twin:
// the same script by the same uid outside the namespace succeeds.
func TestMakeReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces, another uid)")
	}
	ro, beside := roTree(t)
	var inside string
	inNamespace(t, func() error {
		if err := makeReadOnly(ReadOnly{Session: []string{ro}}, 65534); err != nil {
			return err
		}
		var err error
		inside, err = runAsNobody(ro, beside)
		return err
	})
	for _, op := range []string{"write", "create", "mkdir", "rename", "unlink", "chmod", "rename-self", "rename-parent"} {
		if !strings.Contains(inside, op+" refused\n") {
			t.Errorf("inside: %s was not refused:\n%s", op, inside)
		}
	}
	if !strings.Contains(inside, "beside ok\n") {
		t.Errorf("inside: the directory beside the read-only one is not writable:\n%s", inside)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "f")); string(b) != "orig\n" {
		t.Errorf("the read-only file changed: %q", b)
	}
	// The twin, outside; renaming the parent last (the script's order).
	outside, err := runAsNobody(ro, beside)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"write", "create", "mkdir", "rename", "unlink", "chmod", "rename-self", "rename-parent", "beside"} {
		if !strings.Contains(outside, op+" ok\n") {
			t.Errorf("outside: %s failed, so the test proves nothing:\n%s", op, outside)
		}
	}
}

// A file can be read-only too; a symlink is followed (its target is what
// readers get).
func TestMakeReadOnlyFileAndSymlink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces, another uid)")
	}
	ro, beside := roTree(t)
	file := filepath.Join(ro, "f")
	link := filepath.Join(beside, "link")
	if err := os.Symlink(filepath.Join(ro, "sub"), link); err != nil {
		t.Fatal(err)
	}
	var out string
	inNamespace(t, func() error {
		if err := makeReadOnly(ReadOnly{Session: []string{file, link}}, 65534); err != nil {
			return err
		}
		c := exec.Command("sh", "-c", `echo x >> "$1" && echo file-ok; echo x > "$2/new" && echo sub-ok; echo x > "$3/n2" && echo dir-ok; true`, "sh", file, link, ro)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		b, err := c.CombinedOutput()
		out = string(b)
		return err
	})
	if strings.Contains(out, "file-ok") || strings.Contains(out, "sub-ok") {
		t.Errorf("a read-only file or a symlink's target was writable:\n%s", out)
	}
	if !strings.Contains(out, "dir-ok") {
		t.Errorf("the file's directory (not read-only itself) was not writable:\n%s", out)
	}
}

// A session's own path that does not exist is refused; a machine path
// that does not exist is skipped where the user cannot create it and
// refused where it can.
func TestMakeReadOnlyMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount namespaces)")
	}
	ro, _ := roTree(t)
	rootOnly := t.TempDir() // root's, 0700 or 0755: not the user's
	inNamespace(t, func() error {
		if err := makeReadOnly(ReadOnly{Session: []string{filepath.Join(rootOnly, "none")}}, 65534); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("a session's missing path: %v, want a refusal", err)
		}
		if err := makeReadOnly(ReadOnly{Machine: []string{filepath.Join(rootOnly, "none", "deeper")}}, 65534); err != nil {
			t.Errorf("a machine path the user cannot create: %v, want it skipped", err)
		}
		if err := makeReadOnly(ReadOnly{Machine: []string{filepath.Join(ro, "none")}}, 65534); err == nil || !strings.Contains(err.Error(), "could create it") {
			t.Errorf("a machine path the user could create: %v, want a refusal", err)
		}
		if err := makeReadOnly(ReadOnly{Session: []string{"relative"}}, 65534); err == nil {
			t.Error("a relative path was accepted")
		}
		return nil
	})
}
