// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/loader"
)

// spliceStall bounds how long an end of stream waits for the kernel to
// write the bytes it redirected before it, while none move: a peer that
// stopped reading for that long has its connection reset.
const spliceStall = 60 * time.Second

// kernelSplice carries a connection the verifier allowed in the kernel
// (loader.Splice): every byte either socket receives leaves through the
// other without crossing user space. The kernel does not pass an end of
// stream on (redirected data carries no FIN), so a goroutine per direction
// waits for its socket's end, then for the peer to have been handed
// every byte redirected to it (its bytes acknowledged plus its send
// queue), and only then shuts the peer's write side. A byte the kernel
// gives this process instead (a pair whose entry was evicted) is copied.
// false: the sockets
// could not be put in the map, and nothing was read from them.
func kernelSplice(dp *loader.Datapath, c, up *net.TCPConn) bool {
	// What each socket was handed before: the first flight upstream, and
	// the SYN, which the acknowledged count includes.
	baseC, err := handed(c)
	if err != nil {
		return false
	}
	baseUp, err := handed(up)
	if err != nil {
		return false
	}
	var ca, cb uint64
	var serr error
	err = withFD(c, func(a int) error {
		return withFD(up, func(b int) error {
			ca, cb, serr = dp.Splice(a, b)
			return nil
		})
	})
	if err != nil || serr != nil {
		return false
	}
	var wg sync.WaitGroup
	var once sync.Once
	fail := func() {
		once.Do(func() {
			_ = c.SetLinger(0)
			_ = up.SetLinger(0)
			c.Close()
			up.Close()
		})
	}
	wg.Add(2)
	go func() { defer wg.Done(); spliceDirection(dp, c, up, ca, baseUp, fail) }()
	go func() { defer wg.Done(); spliceDirection(dp, up, c, cb, baseC, fail) }()
	wg.Wait()
	c.Close()
	up.Close()
	dp.Unsplice(ca, cb)
	return true
}

// spliceDirection waits for src's end of stream and passes it on to dst
// once dst was handed base bytes plus everything redirected from src
// (cookie srcCookie) and copied here.
func spliceDirection(dp *loader.Datapath, src, dst *net.TCPConn, srcCookie, base uint64, fail func()) {
	buf := make([]byte, 32<<10)
	copied := uint64(0)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				fail()
				return
			}
			copied += uint64(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail()
			return
		}
	}
	redirected, err := dp.SplicedBytes(srcCookie)
	if err != nil {
		// The entry is gone (evicted): what was redirected is unknown.
		fail()
		return
	}
	if err := waitHanded(dst, base+copied+redirected); err != nil {
		fail()
		return
	}
	_ = dst.CloseWrite()
}

// tcpClose is TCP_CLOSE of tcp_info's state.
const tcpClose = 7

// errSpliceClosed is a spliced socket that can send no more.
var errSpliceClosed = errors.New("the connection was reset")

// handed is how many bytes c's TCP stack was handed to send in all:
// those acknowledged (the SYN included) plus those in its send queue. The
// acknowledged count is read first: an acknowledgment between the two
// reads then undercounts, never overcounts.
func handed(c *net.TCPConn) (uint64, error) {
	var got uint64
	err := withFD(c, func(fd int) error {
		info, err := unix.GetsockoptTCPInfo(fd, unix.SOL_TCP, unix.TCP_INFO)
		if err != nil {
			return err
		}
		outq, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
		if err != nil {
			return err
		}
		got = info.Bytes_acked + uint64(outq)
		// A socket that was reset (its program closed it and answered
		// the redirected bytes with a reset) will take no more.
		if info.State == tcpClose {
			return errSpliceClosed
		}
		if soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && soerr != 0 {
			return fmt.Errorf("%w: %w", errSpliceClosed, unix.Errno(soerr))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("in-kernel splice: %w", err)
	}
	return got, nil
}

// waitHanded waits until dst was handed want bytes in all (handed).
func waitHanded(dst *net.TCPConn, want uint64) error {
	delay := 20 * time.Microsecond
	last, lastMove := uint64(0), time.Now()
	for {
		got, err := handed(dst)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if got != last {
			last, lastMove = got, time.Now()
		} else if time.Since(lastMove) > spliceStall {
			return fmt.Errorf("in-kernel splice: %d of %d bytes handed on, none for %v", got, want, spliceStall)
		}
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Millisecond)
	}
}

// withFD runs f with c's descriptor.
func withFD(c *net.TCPConn, f func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
