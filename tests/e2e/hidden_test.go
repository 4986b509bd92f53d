// SPDX-License-Identifier: Apache-2.0

//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/needs"
)

// Issue 9, the file half: credential paths are hidden in a session. Every
// secret file holds a known marker; a session must never print one, while
// the same read without sluice (the twin) and with --show-path does.

const secretMarker = "SLUICE-SECRET-"

// plant writes a file holding secretMarker+name under dir, readable by
// everyone (the command runs as uid 65534), and returns its path.
func plant(t *testing.T, dir, rel string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(secretMarker+rel+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(p); d != dir; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	return p
}

// catAll is a script that prints every file under the paths, and tries to
// overwrite the first one.
func catAll(paths ...string) string {
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "find %s -type f -exec cat {} + 2>&1; cat %s 2>&1; ", shq(p), shq(p))
	}
	fmt.Fprintf(&b, "echo overwrite >%s 2>&1 || echo WRITE-REFUSED", shq(paths[0]))
	return b.String()
}

// TestHiddenPathsFromAllowlist: "hidden_paths" in the allowlist file
// hides a file, a directory and a glob's matches; --show-path exempts one.
func TestHiddenPathsFromAllowlist(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	file := plant(t, dir, "app/token")
	sub := plant(t, dir, "vault/inner/secret")
	globbed := plant(t, dir, "keys/one.key")
	kept := plant(t, dir, "keys/readme")
	al := filepath.Join(dir, "al.json")
	doc := fmt.Sprintf(`{"allowed_hosts": [], "hidden_paths": [%q, %q, %q]}`, file, filepath.Join(dir, "vault"), filepath.Join(dir, "keys/*.key"))
	if err := os.WriteFile(al, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	script := catAll(file, sub, globbed, kept)

	run := runSluice(t, nil, runArgs(nil, []string{"--allowlist", al}, "sh", "-c", script)...)
	for _, p := range []string{"app/token", "vault/inner/secret", "keys/one.key"} {
		if strings.Contains(run.Stdout, secretMarker+p) {
			t.Errorf("the session read the hidden %s: %v", p, run)
		}
	}
	if !strings.Contains(run.Stdout, secretMarker+"keys/readme") {
		t.Errorf("a file the glob does not match was hidden too: %v", run)
	}
	if !strings.Contains(run.Stdout, "WRITE-REFUSED") {
		t.Errorf("the hidden file could be overwritten: %v", run)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), secretMarker) {
		t.Errorf("the secret on disk changed: %q", b)
	}

	twin := exec.Command("sh", "-c", script)
	twin.SysProcAttr = nobody
	out, _ := twin.CombinedOutput()
	for _, p := range []string{"app/token", "vault/inner/secret", "keys/one.key"} {
		if !strings.Contains(string(out), secretMarker+p) {
			t.Fatalf("without sluice %s is not readable either, so the test proves nothing: %s", p, out)
		}
	}

	// Started from inside a hidden directory, the command's working
	// directory is the cover too, not the directory underneath.
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	inside := sluiceCmd(ctx, nil, runArgs(nil, []string{"--allowlist", al}, "sh", "-c", "cat inner/secret 2>/dev/null; echo ---; ls -A")...)
	inside.Dir = filepath.Join(dir, "vault")
	if out, _ := inside.Output(); strings.Contains(string(out), secretMarker) || strings.TrimSpace(string(out)) != "---" {
		t.Errorf("from inside the hidden directory, the command read %q", out)
	}

	shown := runSluice(t, nil, runArgs(nil, []string{"--allowlist", al, "--show-path", filepath.Join(dir, "vault")}, "sh", "-c", script)...)
	if !strings.Contains(shown.Stdout, secretMarker+"vault/inner/secret") {
		t.Errorf("--show-path did not exempt the directory: %v", shown)
	}
	if strings.Contains(shown.Stdout, secretMarker+"app/token") {
		t.Errorf("--show-path of one path exempted another: %v", shown)
	}
}

// fakeHome runs sluice args with a private /etc/passwd in which uid 65534
// has home, as if the invoking user were someone with credentials.
func sluiceWithHome(t *testing.T, home string, args ...string) runResult {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		needs.Skip(t, "unshare(1) not installed: apt-get install util-linux")
	}
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, fmt.Appendf(nil, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:%s:/bin/sh\n", home), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/passwd && exec "$@"`, passwd, sluiceBin}, args...)...)
	cmd.Env = sluiceEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r := runResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sluice %v: %v", args, err)
	}
	t.Logf("sluice %s\n%v", strings.Join(args, " "), r)
	return r
}

// defaultSecrets plants a file for every entry of the default list under
// home and returns their paths relative to it.
func defaultSecrets(t *testing.T, home string) []string {
	rels := []string{".ssh/id_ed25519", ".ssh/id_rsa", ".aws/credentials", ".config/gcloud/application_default_credentials.json",
		".azure/msal_token_cache.json", ".kube/config", ".docker/config.json", ".npmrc", ".netrc", ".git-credentials", ".config/gh/hosts.yml"}
	for _, r := range rels {
		plant(t, home, r)
	}
	return rels
}

// TestHiddenPathsDefault: the built-in list hides the user's credential
// files under their home (from the account database), and --show-path
// exempts one of them.
func TestHiddenPathsDefault(t *testing.T) {
	requireSluice(t)
	home := sharedDir(t)
	rels := defaultSecrets(t, home)
	plant(t, home, ".ssh/known_hosts")
	var paths []string
	for _, r := range rels {
		paths = append(paths, filepath.Join(home, r))
	}
	script := catAll(append(paths, filepath.Join(home, ".ssh/known_hosts"))...)

	run := sluiceWithHome(t, home, runArgs(nil, nil, "sh", "-c", script)...)
	for _, r := range rels {
		if strings.Contains(run.Stdout, secretMarker+r) {
			t.Errorf("the session read ~/%s: %v", r, run)
		}
	}
	if !strings.Contains(run.Stdout, secretMarker+".ssh/known_hosts") {
		t.Errorf("~/.ssh/known_hosts, not on the list, was hidden: %v", run)
	}
	twin := exec.Command("sh", "-c", script)
	twin.SysProcAttr = nobody
	if out, _ := twin.CombinedOutput(); !strings.Contains(string(out), secretMarker+".netrc") {
		t.Fatalf("without sluice ~/.netrc is not readable either: %s", out)
	}

	shown := sluiceWithHome(t, home, runArgs(nil, []string{"--show-path", "~/.netrc"}, "sh", "-c", script)...)
	if !strings.Contains(shown.Stdout, secretMarker+".netrc") || strings.Contains(shown.Stdout, secretMarker+".aws/credentials") {
		t.Errorf("--show-path ~/.netrc should show ~/.netrc and only it: %v", shown)
	}
}

// TestScrubEnv: --scrub-env removes secret-looking variables; without it
// they pass (the default, for agents that need their own API key).
func TestScrubEnv(t *testing.T) {
	requireSluice(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	for _, scrub := range []bool{false, true} {
		var flags []string
		if scrub {
			flags = []string{"--scrub-env"}
		}
		cmd := sluiceCmd(ctx, nil, runArgs(nil, flags, "sh", "-c", `echo "t=$GH_TOKEN p=$DB_PASSWORD k=$KEYBOARD"`)...)
		cmd.Env = append(cmd.Env, "GH_TOKEN=tok", "DB_PASSWORD=pw", "KEYBOARD=us")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("--scrub-env=%v: %v", scrub, err)
		}
		want := "t=tok p=pw k=us"
		if scrub {
			want = "t= p= k=us"
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("--scrub-env=%v: the command saw %q, want %q", scrub, got, want)
		}
	}
}

// TestHiddenPathThroughSymlink: a hidden path that is a symbolic link
// hides what it points to, under both names.
func TestHiddenPathThroughSymlink(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	real := plant(t, dir, "store/real-token")
	link := filepath.Join(dir, "link-token")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	al := filepath.Join(dir, "al.json")
	if err := os.WriteFile(al, fmt.Appendf(nil, `{"hidden_paths": [%q]}`, link), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("cat %s %s 2>&1; true", shq(link), shq(real))
	if run := runSluice(t, nil, runArgs(nil, []string{"--allowlist", al}, "sh", "-c", script)...); strings.Contains(run.Stdout, secretMarker) {
		t.Errorf("the secret behind a hidden link was read: %v", run)
	}
	twin := exec.Command("sh", "-c", script)
	twin.SysProcAttr = nobody
	if out, _ := twin.CombinedOutput(); strings.Count(string(out), secretMarker) != 2 {
		t.Fatalf("without sluice the secret is not readable under both names: %s", out)
	}
}

// TestHiddenPathThroughAnotherMount: a hidden file, and a file in a hidden
// directory, stay hidden where the same files are reachable through
// another mount of their file system (a bind-mounted home or workspace):
// hidden by file identity, not by the path the allowlist named.
func TestHiddenPathThroughAnotherMount(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	token := plant(t, dir, "home/app/token")
	inDir := plant(t, dir, "home/vault/key")
	alias := filepath.Join(dir, "workspaces")
	if err := os.Mkdir(alias, 0o755); err != nil {
		t.Fatal(err)
	}
	// The bind is made in a mount namespace of its own for the session's
	// view and this test only: the host's table is never touched.
	al := filepath.Join(dir, "al.json")
	if err := os.WriteFile(al, fmt.Appendf(nil, `{"hidden_paths": [%q, %q]}`, token, filepath.Join(dir, "home/vault")), 0o644); err != nil {
		t.Fatal(err)
	}
	viaAlias := []string{filepath.Join(alias, "app/token"), filepath.Join(alias, "vault/key")}
	script := fmt.Sprintf("cat %s %s %s %s 2>&1; true", shq(token), shq(inDir), shq(viaAlias[0]), shq(viaAlias[1]))
	bind := fmt.Sprintf("mount --make-rprivate / && mount --bind %s %s && exec \"$@\"", shq(filepath.Join(dir, "home")), shq(alias))

	// The twin: without sluice, the bind shows both secrets again.
	twin := exec.Command("unshare", "--mount", "sh", "-c", bind, "sh", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
	if out, err := twin.CombinedOutput(); strings.Count(string(out), secretMarker) != 4 {
		t.Fatalf("without sluice the secrets are not readable under both mounts (%v): %s", err, out)
	}
	args := append([]string{"unshare", "--mount", "sh", "-c", bind, "sh", sluiceBin}, runArgs(nil, []string{"--allowlist", al}, "sh", "-c", script)...)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = sluiceEnv()
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), secretMarker) {
		t.Errorf("a hidden file was read through another mount: %s", out)
	}
	if err != nil || !strings.Contains(string(out), "workspaces/app/token") {
		t.Errorf("the session did not run, or its notice does not name the alias it hid (%v): %s", err, out)
	}
}

// TestCheckReportsSandboxLayers: `sluice check` names each layer of the
// sandbox and whether this machine has it.
func TestCheckReportsSandboxLayers(t *testing.T) {
	requireSluice(t)
	run := runSluice(t, nil, "check")
	for _, layer := range []string{"process isolation", "path hiding"} {
		found := false
		for l := range strings.SplitSeq(run.Stdout, "\n") {
			if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(strings.Join(f[1:], " "), layer) {
				found = true
			}
		}
		if !found {
			t.Errorf("sluice check has no %q line:\n%s", layer, run.Stdout)
		}
	}
	if !strings.Contains(run.Stdout, "ok    path hiding") {
		t.Errorf("path hiding should be available to root on this kernel:\n%s", run.Stdout)
	}
}

// TestHiddenFileHardLinks: a hidden file is the same file under its other
// names (hard links: a backup made with ln, a copy in another project),
// which covering its path alone leaves readable. Without sluice both
// names read as the secret; in a session neither does, and the notice
// names the links it hid.
func TestHiddenFileHardLinks(t *testing.T) {
	requireSluice(t)
	dir := sharedDir(t)
	token := plant(t, dir, "home/app/token")
	near := filepath.Join(dir, "home/app/backup/token.bak")
	far := filepath.Join(dir, "projects/x/deep/copy")
	for _, l := range []string{near, far} {
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(token, l); err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(l); d != dir; d = filepath.Dir(d) {
			_ = os.Chmod(d, 0o755)
		}
	}
	al := filepath.Join(dir, "al.json")
	if err := os.WriteFile(al, fmt.Appendf(nil, `{"hidden_paths": [%q]}`, token), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("cat %s %s %s 2>&1; true", shq(token), shq(near), shq(far))
	twin := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script)
	if out, err := twin.CombinedOutput(); strings.Count(string(out), secretMarker) != 3 {
		t.Fatalf("without sluice the secret is not readable under its three names (%v): %s", err, out)
	}
	run := runSluice(t, nil, runArgs(nil, []string{"--allowlist", al}, "sh", "-c", script)...)
	out := run.Stdout + run.Stderr
	if strings.Contains(out, secretMarker) {
		t.Errorf("a hidden file was read under another name: %s", out)
	}
	if !strings.Contains(out, "backup/token.bak") || !strings.Contains(out, "deep/copy") {
		t.Errorf("the session's notice does not name the links it hid: %s", out)
	}
}
