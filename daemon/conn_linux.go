package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// peer is who is on the other end of an API connection, from SO_PEERCRED.
type peer struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32 // supplementary groups of the peer process
}

func (p peer) in(gid uint32, ok bool) bool {
	if !ok {
		return false
	}
	if p.GID == gid {
		return true
	}
	for _, g := range p.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// conn is an accepted API connection: it knows its peer and collects the
// file descriptors that arrive with the request (SCM_RIGHTS).
type conn struct {
	*net.UnixConn
	peer peer

	mu  sync.Mutex
	fds []int
}

type connKey struct{}

// listener accepts conns on a unix socket.
type listener struct{ *net.UnixListener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.AcceptUnix()
	if err != nil {
		return nil, err
	}
	p, err := peerOf(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &conn{UnixConn: c, peer: p}, nil
}

func peerOf(c *net.UnixConn) (peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if cerr != nil {
		return peer{}, fmt.Errorf("peer credentials: %w", cerr)
	}
	p := peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}
	p.Groups = procGroups(int(cred.Pid))
	return p, nil
}

// procGroups reads a process's supplementary groups: what it runs with now,
// not what /etc/group says.
func procGroups(pid int) []uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			var gs []uint32
			for _, f := range strings.Fields(rest) {
				if g, err := strconv.ParseUint(f, 10, 32); err == nil {
					gs = append(gs, uint32(g))
				}
			}
			return gs
		}
	}
	return nil
}

// Read keeps any descriptors passed with the data.
func (c *conn) Read(b []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*8))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if fds, ferr := unix.ParseUnixRights(&m); ferr == nil {
					for _, fd := range fds {
						unix.CloseOnExec(fd)
					}
					c.mu.Lock()
					c.fds = append(c.fds, fds...)
					c.mu.Unlock()
				}
			}
		}
	}
	return n, err
}

// takeFDs hands the received descriptors to the caller, who must close them.
func (c *conn) takeFDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	fds := c.fds
	c.fds = nil
	return fds
}

// Close closes descriptors nobody claimed.
func (c *conn) Close() error {
	for _, fd := range c.takeFDs() {
		unix.Close(fd)
	}
	return c.UnixConn.Close()
}

func connFrom(ctx context.Context) (*conn, error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return nil, errors.New("no connection in request context")
	}
	return c, nil
}
