package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peer is who is on the other end of an API connection: SO_PEERCRED,
// SO_PEERGROUPS and SO_PEERPIDFD, all recorded by the kernel at connect.
//
// The rest (cgroup, namespaces) can only be read from /proc/<pid>, and a
// pid is reused once its process is reaped: a confined process could
// connect, hand the connection to a child and exit, and /proc/<pid> would
// then describe whichever process got the pid next. So every such read is
// confirmed with alive, through a pidfd that cannot be reused.
type peer struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32 // supplementary groups at connect time
	// pidfd is owned by the conn (nil if none could be had). An *os.File,
	// so that a use after the conn closed fails instead of signalling
	// whatever reused the descriptor number.
	pidfd *os.File
}

// alive reports whether the process that connected still exists, so that
// what /proc/<pid> said just before was about it.
func (p peer) alive() bool {
	if p.pidfd == nil {
		return false
	}
	rc, err := p.pidfd.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	if err := rc.Control(func(fd uintptr) { ok = unix.PidfdSendSignal(int(fd), 0, nil, 0) == nil }); err != nil {
		return false
	}
	return ok
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
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		p, err := peerOf(c)
		if err != nil {
			// One caller that cannot be identified is dropped; an error
			// returned here would stop http.Server serving everyone.
			c.Close()
			continue
		}
		return &conn{UnixConn: c, peer: p}, nil
	}
}

func peerOf(c *net.UnixConn) (peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var p peer
	var perr error
	if err := rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			perr = fmt.Errorf("peer credentials: %w", err)
			return
		}
		p.UID, p.GID, p.PID = cred.Uid, cred.Gid, cred.Pid
		if p.Groups, err = peerGroups(int(fd)); err != nil {
			perr = fmt.Errorf("peer groups: %w", err)
			return
		}
		if pidfd := peerPidfd(int(fd), int(cred.Pid)); pidfd >= 0 {
			p.pidfd = os.NewFile(uintptr(pidfd), "peer-pidfd")
		}
	}); err != nil {
		return peer{}, err
	}
	return p, perr
}

// peerGroups is SO_PEERGROUPS: the supplementary groups the peer had when
// it connected (what it ran with, not what /etc/group says).
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case errno == unix.ERANGE && int(n/4) > len(buf):
			buf = make([]uint32, n/4)
			continue
		case errno != 0:
			return nil, errno
		}
		return buf[:n/4], nil
	}
}

// peerPidfd is a pidfd for the process that connected: SO_PEERPIDFD (Linux
// 6.5) is the kernel's record from connect time. Before 6.5, pidfd_open at
// accept leaves a window (the peer exits and its pid is reused before
// the daemon accepts) that the daemon cannot close. -1: the peer is gone,
// or outside the daemon's pid namespace.
func peerPidfd(fd, pid int) int {
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err == nil {
		unix.CloseOnExec(pidfd)
		return pidfd
	}
	if !errors.Is(err, unix.ENOPROTOOPT) || pid <= 0 {
		return -1
	}
	if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		return -1
	}
	unix.CloseOnExec(pidfd)
	return pidfd
}

// Read keeps any descriptors passed with the data.
func (c *conn) Read(b []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*8))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if n < 0 {
		// recvmsg's -1 after a deadline or a close: an io.Reader never
		// returns a negative count (bufio panics on one).
		n = 0
	}
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

// Close closes descriptors nobody claimed, and the peer's pidfd.
func (c *conn) Close() error {
	for _, fd := range c.takeFDs() {
		unix.Close(fd)
	}
	if c.peer.pidfd != nil {
		c.peer.pidfd.Close()
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
