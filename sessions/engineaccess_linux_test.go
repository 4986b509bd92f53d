// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineAccess reads the permission bits of a real socket and the
// directories above it as the kernel would apply them to each caller.
func TestEngineAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown of the test socket")
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "run")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(sub, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chown(sock, 0, 998); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o660); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(sock, link); err != nil {
		t.Fatal(err)
	}
	member := Caller{UID: 1000, GID: 1000, Groups: []uint32{998}}
	primary := Caller{UID: 1000, GID: 998}
	other := Caller{UID: 1001, GID: 1001}
	for _, tc := range []struct {
		name string
		path string
		c    Caller
		ok   bool
	}{
		{"root", sock, Caller{}, true},
		{"a member of the socket's group", sock, member, true},
		{"its primary group", sock, primary, true},
		{"through a link", link, member, true},
		{"another user", sock, other, false},
		{"no such socket", filepath.Join(sub, "none.sock"), member, false},
		{"not a socket", sub, member, false},
	} {
		if err := EngineAccess(tc.path, tc.c); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	// The owner's class decides for the owner, even when the group's
	// would allow more.
	if err := os.Chown(sock, 1000, 998); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o060); err != nil {
		t.Fatal(err)
	}
	if err := EngineAccess(sock, member); err == nil {
		t.Error("the owner without write permission: allowed")
	}
	// A socket of the user's own, which it could later replace with a
	// link to the engine: refused, whatever its bits.
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EngineAccess(sock, member); err == nil || !strings.Contains(err.Error(), "not root") {
		t.Errorf("the user's own socket: %v", err)
	}
	if err := os.Chown(sock, 0, 998); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o660); err != nil {
		t.Fatal(err)
	}
	// A directory on the way the user may write: it could swap the name.
	if err := os.Chmod(sub, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := EngineAccess(sock, member); err == nil || !strings.Contains(err.Error(), "may replace") {
		t.Errorf("a socket in a directory the user may write: %v", err)
	}
	// With the sticky bit, only root may rename root's entries there.
	if err := os.Chmod(sub, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := EngineAccess(sock, member); err != nil {
		t.Errorf("a root socket in a sticky directory: %v", err)
	}
	// A link the user owns, to the engine's socket.
	own := filepath.Join(t.TempDir(), "mine.sock")
	if err := os.Symlink(sock, own); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(own, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if err := EngineAccess(own, member); err == nil {
		t.Error("a link of the user's to the engine: allowed")
	}
	if err := os.Chmod(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory on the way that the user may not search.
	if err := os.Chmod(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := EngineAccess(sock, Caller{UID: 1001, GID: 1001, Groups: []uint32{998}}); err == nil {
		t.Error("a socket below a directory the user may not search: allowed")
	}
}
