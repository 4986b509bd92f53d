// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/api"
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

// conn is an accepted API connection: it knows its peer and holds the
// file descriptors that came with the connection's first bytes
// (SCM_RIGHTS), at most maxFDs of them.
//
// Descriptors are the one thing a caller can make the daemon keep: every
// one received is a slot of the daemon's own descriptor table. So they are
// taken only where the API needs them (a session's stdin, stdout and
// stderr, sent with the first bytes of the request that creates it, on a
// connection of its own) and only as many as that needs. Descriptors
// anywhere else, or more than maxFDs, are closed the moment they arrive,
// and the request they came with is refused (guardFDs, handleCreate).
type conn struct {
	*net.UnixConn
	peer    peer
	limits  *connLimits // nil: not counted
	closing sync.Once

	mu      sync.Mutex
	fds     []int
	started bool // bytes were read: descriptors now come too late
	refused int  // descriptors closed on arrival; > maxFDs: "more than maxFDs"
}

// maxFDs is what a request may carry: POST /v1/sessions's stdin, stdout and
// stderr.
const maxFDs = 3

type connKey struct{}

// listener accepts conns on a unix socket, within the per-caller limits.
type listener struct {
	*net.UnixListener
	limits *connLimits
}

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
		if err := l.limits.acquire(p.UID); err != nil {
			refuseConn(c, err)
			if p.pidfd != nil {
				p.pidfd.Close()
			}
			continue
		}
		return &conn{UnixConn: c, peer: p, limits: l.limits}, nil
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

// Read keeps the descriptors that come with the connection's first bytes,
// up to maxFDs; any others it closes at once and counts as refused.
func (c *conn) Read(b []byte) (int, error) {
	// Room for one descriptor more than allowed, so that too many is seen
	// (the kernel drops what does not fit and sets MSG_CTRUNC) while no
	// more than maxFDs+1 are ever installed in the daemon by one read.
	// Go asks for MSG_CMSG_CLOEXEC: a command the daemon starts meanwhile
	// does not inherit them.
	oob := make([]byte, unix.CmsgSpace(4*(maxFDs+1)))
	n, oobn, flags, _, err := c.ReadMsgUnix(b, oob)
	if n < 0 {
		// recvmsg's -1 after a deadline or a close: an io.Reader never
		// returns a negative count (bufio panics on one).
		n = 0
	}
	var fds []int
	if oobn > 0 {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if got, ferr := unix.ParseUnixRights(&m); ferr == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	truncated := flags&unix.MSG_CTRUNC != 0
	c.mu.Lock()
	switch {
	case len(fds) == 0 && !truncated:
	case c.started || truncated || len(c.fds)+len(fds) > maxFDs:
		// Late, or too many: none of them is kept, and the request is
		// refused.
		for _, fd := range fds {
			unix.Close(fd)
		}
		c.refused += len(fds) + len(c.fds)
		if truncated {
			c.refused = max(c.refused, maxFDs+1)
		}
		for _, fd := range c.fds {
			unix.Close(fd)
		}
		c.fds = nil
	default:
		c.fds = append(c.fds, fds...)
	}
	if n > 0 {
		c.started = true
	}
	c.mu.Unlock()
	return n, err
}

// takeFDs hands the received descriptors to the caller, who must close
// them, with the number of descriptors closed on arrival (0: none).
func (c *conn) takeFDs() (fds []int, refused int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fds, refused = c.fds, c.refused
	c.fds, c.refused = nil, 0
	return fds, refused
}

// dropFDs closes the descriptors held and returns how many came with the
// connection (those closed on arrival included).
func (c *conn) dropFDs() int {
	fds, refused := c.takeFDs()
	for _, fd := range fds {
		unix.Close(fd)
	}
	return len(fds) + refused
}

// Close closes descriptors nobody claimed, and the peer's pidfd, and gives
// the connection back to its caller's allowance. net/http may close a
// connection more than once.
func (c *conn) Close() error {
	err := net.ErrClosed
	c.closing.Do(func() {
		c.dropFDs()
		if c.peer.pidfd != nil {
			c.peer.pidfd.Close()
		}
		c.limits.release(c.peer.UID)
		err = c.UnixConn.Close()
	})
	return err
}

func connFrom(ctx context.Context) (*conn, error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return nil, errors.New("no connection in request context")
	}
	return c, nil
}

// refuseConn answers a connection over its caller's limits with 503 and
// closes it, without reading its request: the caller sees why, and the
// daemon holds nothing for it.
func refuseConn(c *net.UnixConn, why error) {
	body, _ := json.Marshal(api.ErrorResponse{Error: why.Error()})
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n", len(body)+1, body)
	c.Close()
}
