// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnixLine(t *testing.T) {
	for _, c := range []struct {
		line string
		ino  uint64
		path string
		ok   bool
	}{
		{"0000000000000000: 00000002 00000000 00010000 0001 01 4242 @own-1", 4242, "@own-1", true},
		{"0000000000000000: 00000002 00000000 00010000 0001 01    17 /run/a b.sock", 17, "/run/a b.sock", true},
		{"0000000000000000: 00000003 00000000 00000000 0001 03 99", 0, "", false},
		{"Num       RefCount Protocol Flags    Type St Inode Path", 0, "", false},
	} {
		ino, path, ok := unixLine(c.line)
		if ino != c.ino || path != c.path || ok != c.ok {
			t.Errorf("unixLine(%q) = %d, %q, %v; want %d, %q, %v", c.line, ino, path, ok, c.ino, c.path, c.ok)
		}
	}
}

// abstractInodes finds a socket this process bound, and heldBy finds it
// among this process's descriptors.
func TestAbstractInodesHeldBy(t *testing.T) {
	name := "@sluice-enforcer-test-" + t.Name()
	fd, err := unixListenAbstract(name[1:])
	if err != nil {
		t.Skip(err)
	}
	defer closeFD(fd)
	inodes := abstractInodes(name, nil)
	if len(inodes) != 1 {
		t.Fatalf("abstractInodes(%q) = %v, want one", name, inodes)
	}
	if !heldBy(inodes, []int{selfPID()}) {
		t.Errorf("heldBy: this process holds %v but was not found", inodes)
	}
	if heldBy(inodes, []int{1}) {
		t.Errorf("heldBy: pid 1 does not hold %v", inodes)
	}
}

func unixListenAbstract(name string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: "\x00" + name}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, unix.Listen(fd, 1)
}

func closeFD(fd int) { unix.Close(fd) }

func selfPID() int { return os.Getpid() }
