// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/sandbox/shim"
)

const testShim = "/usr/lib/sluice/sluice"

func TestBuildRunsThroughTheFamiliesShim(t *testing.T) {
	spec := CommandSpec{Path: "/usr/bin/curl", Argv: []string{"curl", "-s", "https://example.test"}, Dir: "/work"}
	cmd, err := spec.build(testShim, "run-1-abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != testShim {
		t.Errorf("Path = %q, want the shim %q", cmd.Path, testShim)
	}
	want := []string{testShim, shim.Name, "--path", "/usr/bin/curl", "--", "curl", "-s", "https://example.test"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("Args = %q, want %q", cmd.Args, want)
	}
	if cmd.Dir != "/work" {
		t.Errorf("Dir = %q, want /work", cmd.Dir)
	}
	if cmd.SysProcAttr != nil {
		t.Errorf("SysProcAttr = %+v: the spawner sets credentials and the cgroup, build must leave it to them", cmd.SysProcAttr)
	}
}

// The argv[0] the program sees may differ from its path (a login shell's
// "-bash", a busybox applet): the shim must pass it on untouched.
func TestBuildKeepsArgv0(t *testing.T) {
	spec := CommandSpec{Path: "/bin/busybox", Argv: []string{"wget", "-q"}}
	cmd, err := spec.build(testShim, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(cmd.Args, "--"); i < 0 || cmd.Args[i-1] != "/bin/busybox" || !slices.Equal(cmd.Args[i+1:], []string{"wget", "-q"}) {
		t.Errorf("Args = %q: want --path /bin/busybox -- wget -q", cmd.Args)
	}
}

func TestBuildEnvironment(t *testing.T) {
	proxyEnv := []string{"HTTP_PROXY=http://127.0.0.1:4000", "NO_PROXY=localhost"}
	base := []string{"HOME=/home/u", "HTTP_PROXY=http://stale:1", SessionEnv + "=outer"}
	for _, tc := range []struct {
		name       string
		noProxyEnv bool
		proxyEnv   []string
		want       []string
	}{
		{"proxy", false, proxyEnv, append(append(slices.Clone(base), proxyEnv...), SessionEnv+"=run-7")},
		{"no proxy env asked", true, proxyEnv, append(slices.Clone(base), SessionEnv+"=run-7")},
		{"session without a proxy", false, nil, append(slices.Clone(base), SessionEnv+"=run-7")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := CommandSpec{Path: "/bin/true", Argv: []string{"true"}, Env: base, NoProxyEnv: tc.noProxyEnv}
			cmd, err := spec.build(testShim, "run-7", tc.proxyEnv)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cmd.Env, tc.want) {
				t.Errorf("Env = %q, want %q", cmd.Env, tc.want)
			}
			// exec keeps the last of duplicate keys: what the command sees.
			if got := lastValue(cmd.Env, SessionEnv); got != "run-7" {
				t.Errorf("%s seen by the command = %q, want run-7", SessionEnv, got)
			}
			if !tc.noProxyEnv && tc.proxyEnv != nil {
				if got := lastValue(cmd.Env, "HTTP_PROXY"); got != "http://127.0.0.1:4000" {
					t.Errorf("HTTP_PROXY seen by the command = %q, want the session's proxy", got)
				}
			}
		})
	}
	if base[1] != "HTTP_PROXY=http://stale:1" || len(base) != 3 {
		t.Errorf("build changed the caller's Env slice: %q", base)
	}
}

// A nil Env must stay empty apart from sluice's variables: exec.Cmd reads
// a nil Env as "inherit the caller's", which in the daemon would hand the
// daemon's environment to a client's command.
func TestBuildNilEnvIsNotTheCallersEnvironment(t *testing.T) {
	t.Setenv("SLUICE_TEST_SECRET", "daemon-only")
	cmd, err := CommandSpec{Path: "/bin/true", Argv: []string{"true"}, NoProxyEnv: true}.build(testShim, "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{SessionEnv + "=s1"}; !slices.Equal(cmd.Env, want) {
		t.Errorf("Env = %q, want %q", cmd.Env, want)
	}
	if slices.ContainsFunc(cmd.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SLUICE_TEST_SECRET=") }) {
		t.Error("the command inherits the caller's environment")
	}
}

func TestBuildRefusesBadSpecs(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec CommandSpec
		shim string
		want string
	}{
		{"no argv", CommandSpec{Path: "/bin/true"}, testShim, "a command is required"},
		{"empty argv0", CommandSpec{Path: "/bin/true", Argv: []string{""}}, testShim, "a command is required"},
		{"no path", CommandSpec{Argv: []string{"true"}}, testShim, "no executable path"},
		{"bare name", CommandSpec{Path: "true", Argv: []string{"true"}}, testShim, "not looked up in PATH"},
		{"no shim", CommandSpec{Path: "/bin/true", Argv: []string{"true"}}, "", "shim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := tc.spec.build(tc.shim, "s", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("build = %v, %v; want an error containing %q", cmd, err, tc.want)
			}
		})
	}
}

// fakeSpawner records what startCommand asks of the machine.
type fakeSpawner struct {
	verifyErr, spawnErr error
	verified            bool
	spawned             *exec.Cmd
	user                cgroups.SpawnOptions
}

func (f *fakeSpawner) Verify() error { f.verified = true; return f.verifyErr }

func (f *fakeSpawner) Spawn(cmd *exec.Cmd, user cgroups.SpawnOptions) error {
	if !f.verified {
		return errors.New("spawned before the datapath was verified")
	}
	f.spawned, f.user = cmd, user
	return f.spawnErr
}

func TestStartCommandSpawnsTheBuiltCommandAsTheUser(t *testing.T) {
	user := cgroups.SpawnOptions{UID: 1000, GID: 1000, Groups: []uint32{27}}
	spec := CommandSpec{Path: "/bin/sh", Argv: []string{"sh", "-c", "true"}, Env: []string{"A=1"}, User: user, Stdout: os.Stderr}
	f := &fakeSpawner{}
	cmd, err := startCommand(f, spec, testShim, "run-2", []string{"HTTP_PROXY=http://127.0.0.1:9"})
	if err != nil {
		t.Fatal(err)
	}
	if f.spawned != cmd {
		t.Fatal("startCommand returned a command other than the one it spawned")
	}
	if f.user.UID != 1000 || f.user.GID != 1000 || !slices.Equal(f.user.Groups, []uint32{27}) {
		t.Errorf("spawned as %+v, want %+v", f.user, user)
	}
	if cmd.Path != testShim || cmd.Stdout != os.Stderr || lastValue(cmd.Env, SessionEnv) != "run-2" {
		t.Errorf("spawned %q env %q: not the command build makes", cmd.Args, cmd.Env)
	}
}

func TestStartCommandRefusesWhenTheDatapathIsNotInForce(t *testing.T) {
	f := &fakeSpawner{verifyErr: errors.New("connect4 not attached")}
	cmd, err := startCommand(f, CommandSpec{Path: "/bin/true", Argv: []string{"true"}}, testShim, "s", nil)
	if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), "connect4 not attached") {
		t.Fatalf("startCommand = %v, %v; want a refusal naming the verification error", cmd, err)
	}
	if f.spawned != nil {
		t.Fatal("the command was spawned although the datapath is not in force")
	}
}

func TestStartCommandBadSpecTouchesNothing(t *testing.T) {
	f := &fakeSpawner{}
	if _, err := startCommand(f, CommandSpec{Argv: []string{"x"}}, testShim, "s", nil); err == nil {
		t.Fatal("a spec without a path started")
	}
	if f.verified || f.spawned != nil {
		t.Fatal("a bad spec reached the machine")
	}
}

func TestStartCommandPassesSpawnErrors(t *testing.T) {
	f := &fakeSpawner{spawnErr: os.ErrPermission}
	if _, err := startCommand(f, CommandSpec{Path: "/bin/true", Argv: []string{"true"}}, testShim, "s", nil); !errors.Is(err, os.ErrPermission) {
		t.Fatalf("err = %v, want one wrapping os.ErrPermission (the CLI maps it to exit 126)", err)
	}
}

// lastValue is the value exec gives the command for key: the last one.
func lastValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// The zero SandboxSpec is the safe one: the shim isolates unless told not
// to, so a caller that forgets the field gets every layer.
func TestBuildDefaultsToTheSandbox(t *testing.T) {
	cmd, err := CommandSpec{Path: "/bin/true", Argv: []string{"true"}}.build(testShim, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := shim.Parse(cmd.Args[2:])
	if err != nil || o.ShareProcesses || o.AbstractUnix || o.AllowUserNamespaces {
		t.Errorf("default shim args %q: %+v %v", cmd.Args, o, err)
	}
}

// A session with an exit-status file runs its command under the shim's
// supervisor, which gets the file as descriptor 3 and names it before the
// shim's own arguments, which it passes on to its child.
func TestBuildPassesTheExitStatusFile(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "exit")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spec := CommandSpec{Path: "/bin/true", Argv: []string{"true"}, ExitStatus: f}
	cmd, err := spec.build(testShim, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmd.Args) < 4 || cmd.Args[2] != shim.FlagExitFD || cmd.Args[3] != "3" {
		t.Fatalf("Args = %q, want %s 3 first", cmd.Args, shim.FlagExitFD)
	}
	if o, err := shim.Parse(cmd.Args[4:]); err != nil || o.Path != "/bin/true" || !slices.Equal(o.Argv, []string{"true"}) {
		t.Errorf("the supervisor's child gets %q: %+v %v", cmd.Args[4:], o, err)
	}
	if len(cmd.ExtraFiles) != 1 || cmd.ExtraFiles[0] != f {
		t.Errorf("ExtraFiles = %v, want the exit-status file as descriptor 3", cmd.ExtraFiles)
	}
}
