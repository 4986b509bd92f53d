// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// PeekFlight is ReadFlight without consuming: it peeks at c's queue
// (MSG_PEEK) until Inspect can judge what is there, MaxFlight bytes, or an
// error, and leaves every byte queued, so that the kernel can send the
// first flight on with the rest (bpf/verify.h's in-kernel splice: a byte
// read into this process would have to be written before the kernel's,
// which nothing orders). A client that half-closes after an incomplete
// flight is seen at the read deadline, as ErrIncomplete.
func PeekFlight(c *net.TCPConn) ([]byte, Flight, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, Flight{}, fmt.Errorf("peek at the first flight: %w", err)
	}
	buf := make([]byte, MaxFlight)
	var (
		n, seen int
		f       Flight
		done    bool
		perr    error
	)
	err = rc.Read(func(fd uintptr) bool {
		m, _, e := unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		if e != nil {
			perr = e
			return true
		}
		if m == 0 {
			perr = io.EOF
			return true
		}
		n = m
		if m == seen {
			return false // nothing new: wait for more
		}
		seen = m
		var ierr error
		f, ierr = Inspect(buf[:m])
		if ierr == nil {
			done = true
			return true
		}
		if m >= MaxFlight {
			f = Flight{Proto: f.Proto, Problem: "the first flight is longer than " + fmt.Sprint(MaxFlight) + " bytes"}
			done = true
			return true
		}
		return false
	})
	if done {
		return buf[:n], f, nil
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if f.Proto == "" {
				f.Proto = ProtoNone
			}
			return buf[:n], f, ErrIncomplete
		}
		return buf[:n], f, err
	}
	return buf[:n], f, perr
}
