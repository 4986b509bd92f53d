// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// runTLSAttack: a real TLS handshake (crypto/tls, certificate unchecked)
// with the SNI given, to TARGET's address of family FAM on PORT, whose
// first flight, the ClientHello, is put on the socket the way HOW says;
// every later byte is written plainly. Then one request, the first line of
// the answer in Reply. These are the ways around a judge of the first
// flight that sluice's kernel TLS check must hold against (bpf/sni.h):
//
//	plain             one write of the whole ClientHello
//	bytes             one byte per sendmsg
//	more              the first 100 bytes with MSG_MORE, then the rest
//	oob               one throwaway byte with MSG_OOB, then the ClientHello:
//	                  the server's stream, without SO_OOBINLINE, skips the
//	                  urgent byte and holds exactly the ClientHello
//	zerocopy          SO_ZEROCOPY and one send with MSG_ZEROCOPY
//	sendfile          sendfile(2) from a file holding it
//	splice            splice(2) from a pipe holding it
//	uring             one io_uring IORING_OP_SEND
//	reconnect:NAME    a whole handshake and request with SNI NAME first,
//	                  then connect(AF_UNSPEC), connect again, and the
//	                  ClientHello on the same socket
//	fastopen          the connect is sendto(MSG_FASTOPEN) with the
//	                  ClientHello (in the SYN once a cookie is cached)
//	fastopen-connect  setsockopt TCP_FASTOPEN_CONNECT, connect, write
//	ktls              setsockopt TCP_ULP "tls" before the first flight
//	early             a blocking send of the ClientHello from a second
//	                  thread while the connect is still in progress
//	oob-last          the ClientHello, server_name last, in one send with
//	                  MSG_OOB, then "x" (runOOBLast; no handshake follows)
//
// Note is "syn-data" when the server acknowledged data in the SYN; for
// early, "sent-in-syn-sent" when the send began before the connection was
// established, then "user-timeout=MS", the socket's TCP_USER_TIMEOUT once
// it was.
func runTLSAttack(args []string, r *result) error {
	a, err := pickAddr(args[0], args[1], r)
	if err != nil {
		return err
	}
	port, err := parsePort(args[2])
	if err != nil {
		return err
	}
	sni, how := args[3], args[4]
	fd, err := socket(family(a), unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	sa := sockaddr(a, port)
	c := &fdConn{fd: fd}
	switch {
	case how == "plain" || how == "bytes" || how == "more" || how == "oob" || how == "zerocopy" ||
		how == "sendfile" || how == "splice" || how == "uring" || how == "ktls":
		if err := connect(fd, sa); err != nil {
			return err
		}
		if how == "ktls" {
			if err := unix.SetsockoptString(fd, unix.SOL_TCP, unix.TCP_ULP, "tls"); err != nil {
				return at("setsockopt", err)
			}
		}
		c.first = firstFlight(how)
	case strings.HasPrefix(how, "reconnect:"):
		if err := connect(fd, sa); err != nil {
			return err
		}
		if err := handshake(&fdConn{fd: fd}, strings.TrimPrefix(how, "reconnect:"), r); err != nil {
			return fmt.Errorf("the first connection: %w", err)
		}
		var unspec unix.RawSockaddr // sa_family AF_UNSPEC: disconnect
		if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec)); e != 0 {
			return at("disconnect", e)
		}
		if err := connect(fd, sa); err != nil {
			return err
		}
	case how == "fastopen":
		c.first = func(fd int, b []byte) error { return fastOpen(fd, b, sa, r) }
	case how == "fastopen-connect":
		if err := unix.SetsockoptInt(fd, unix.SOL_TCP, unix.TCP_FASTOPEN_CONNECT, 1); err != nil {
			return at("setsockopt", err)
		}
		// With a cookie cached the connect returns at once and the first
		// write sends the SYN with data; without one it is a plain connect.
		if err := connect(fd, sa); err != nil {
			return err
		}
		c.first = func(fd int, b []byte) error {
			err := writeAll(fd, b, 0, 0)
			synData(fd, r)
			return err
		}
	case how == "early":
		c.first = func(fd int, b []byte) error { return earlySend(fd, b, sa, r) }
	case how == "oob-last":
		if err := connect(fd, sa); err != nil {
			return err
		}
		return runOOBLast(fd, sni)
	default:
		return at("args", fmt.Errorf("unknown way %q", how))
	}
	return handshake(c, sni, r)
}

// handshake runs a TLS handshake on c with the SNI given and one request.
func handshake(c *fdConn, sni string, r *result) error {
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		var se *stageError
		if errors.As(err, &se) {
			return err // the socket's own failure, with its stage
		}
		return at("handshake", errnoOf(err))
	}
	return request(tc, sni, r)
}

// firstFlight returns the writer of a ClientHello for a way that needs a
// connected socket.
func firstFlight(how string) func(fd int, b []byte) error {
	switch how {
	case "bytes":
		return func(fd int, b []byte) error { return writeAll(fd, b, 1, 0) }
	case "more":
		return func(fd int, b []byte) error {
			n := min(100, len(b))
			if err := writeAll(fd, b[:n], 0, unix.MSG_MORE); err != nil {
				return err
			}
			return writeAll(fd, b[n:], 0, 0)
		}
	case "oob":
		return func(fd int, b []byte) error {
			if err := writeAll(fd, []byte{'!'}, 0, unix.MSG_OOB); err != nil {
				return err
			}
			return writeAll(fd, b, 0, 0)
		}
	case "zerocopy":
		return zeroCopy
	case "sendfile":
		return sendFile
	case "splice":
		return splicePipe
	case "uring":
		return uringSend
	}
	return func(fd int, b []byte) error { return writeAll(fd, b, 0, 0) }
}

// fdConn is a net.Conn on a raw non-blocking socket, so that the first
// Write (crypto/tls's ClientHello) can go through first and every wait is
// bounded by the action's deadline.
type fdConn struct {
	fd    int
	first func(fd int, b []byte) error
}

func (c *fdConn) Write(b []byte) (int, error) {
	if f := c.first; f != nil {
		c.first = nil
		if err := f(c.fd, b); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if err := writeAll(c.fd, b, 0, 0); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *fdConn) Read(b []byte) (int, error) {
	for {
		if _, err := wait(c.fd, unix.POLLIN); err != nil {
			return 0, at("read", err)
		}
		n, err := unix.Read(c.fd, b)
		// A socket in sluice's sockhash reads through tcp_bpf_recvmsg,
		// which may answer a wakeup without data with EAGAIN.
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, at("read", err)
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *fdConn) Close() error                     { return nil } // the action closes the fd
func (c *fdConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fdConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fdConn) SetDeadline(time.Time) error      { return nil } // the action's deadline applies
func (c *fdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fdConn) SetWriteDeadline(time.Time) error { return nil }

// writeAll sends b with sendmsg flags, step bytes per call (0: as much as
// the kernel takes), waiting for room until the deadline, at stage "send".
func writeAll(fd int, b []byte, step, flags int) error {
	for len(b) > 0 {
		n := len(b)
		if step > 0 {
			n = min(step, n)
		}
		w, err := unix.SendmsgN(fd, b[:n], nil, nil, flags)
		if errors.Is(err, unix.EAGAIN) {
			if _, err := wait(fd, unix.POLLOUT); err != nil {
				return at("send", err)
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return at("send", err)
		}
		b = b[w:]
	}
	return nil
}

// zeroCopyBuf keeps the pages MSG_ZEROCOPY pinned unchanged until the
// process ends (crypto/tls reuses its buffer for the next record).
var zeroCopyBuf []byte

func zeroCopy(fd int, b []byte) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ZEROCOPY, 1); err != nil {
		return at("setsockopt", err)
	}
	zeroCopyBuf = append([]byte(nil), b...)
	return writeAll(fd, zeroCopyBuf, 0, unix.MSG_ZEROCOPY)
}

// sendFile writes b through a temporary file and sendfile(2).
func sendFile(fd int, b []byte) error {
	f, err := os.CreateTemp("", "probe-hello")
	if err != nil {
		return at("sendfile", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return at("sendfile", err)
	}
	var off int64
	for off < int64(len(b)) {
		_, err := unix.Sendfile(fd, int(f.Fd()), &off, len(b)-int(off))
		if errors.Is(err, unix.EAGAIN) {
			if _, err := wait(fd, unix.POLLOUT); err != nil {
				return at("sendfile", err)
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return at("sendfile", err)
		}
	}
	return nil
}

// splicePipe writes b into a pipe and splices it to the socket.
func splicePipe(fd int, b []byte) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return at("splice", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if _, err := unix.Write(p[1], b); err != nil {
		return at("splice", err)
	}
	for left := len(b); left > 0; {
		n, err := unix.Splice(p[0], nil, fd, nil, left, unix.SPLICE_F_NONBLOCK)
		if errors.Is(err, unix.EAGAIN) {
			if _, err := wait(fd, unix.POLLOUT); err != nil {
				return at("splice", err)
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return at("splice", err)
		}
		left -= int(n)
	}
	return nil
}

// ioringOpSend is IORING_OP_SEND.
const ioringOpSend = 26

// uringSend sends b with IORING_OP_SEND: the kernel's io_uring path, not a
// send system call of the process's.
func uringSend(fd int, b []byte) error {
	ring, err := newRing()
	if err != nil {
		return err
	}
	defer ring.close()
	for len(b) > 0 {
		res, err := ring.submitAndWait(ioUringSQE{
			Opcode:   ioringOpSend,
			Fd:       int32(fd),
			Addr:     uint64(uintptr(unsafe.Pointer(&b[0]))),
			Len:      uint32(len(b)),
			UserData: connectUserData, // the tag reap matches
		})
		runtime.KeepAlive(b)
		if err != nil {
			return err
		}
		if res < 0 {
			return at("io_uring send", unix.Errno(-res))
		}
		b = b[res:]
	}
	return nil
}

// fastOpen connects with sendto(MSG_FASTOPEN) carrying b, as runTFO does,
// and writes whatever the SYN did not carry.
func fastOpen(fd int, b []byte, sa unix.Sockaddr, r *result) error {
	n, err := unix.SendmsgN(fd, b, nil, sa, unix.MSG_FASTOPEN)
	switch {
	case errors.Is(err, unix.EINPROGRESS):
		n = 0 // no cookie yet: a SYN with a cookie request, no data
	case err != nil:
		return at("sendto", err)
	}
	if err := finishConnect(fd); err != nil {
		return at("sendto", err)
	}
	r.Sent = n
	if err := writeAll(fd, b[n:], 0, 0); err != nil {
		return err
	}
	synData(fd, r)
	return nil
}

// synData notes whether the server acknowledged data in the SYN.
func synData(fd int, r *result) {
	if ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && ti.Options&0x20 != 0 { // TCPI_OPT_SYN_DATA
		r.Note = "syn-data"
	}
}

// earlySend starts a non-blocking connect and, while it is still in
// progress, sends b from a second thread with a blocking send: the send
// enters the kernel's TCP sendmsg and waits there for the connection.
func earlySend(fd int, b []byte, sa unix.Sockaddr, r *result) error {
	err := unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return at("connect", err)
	}
	left := time.Until(deadline)
	if left <= 0 {
		return at("connect", errTimeout())
	}
	tv := unix.NsecToTimeval(left.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return at("setsockopt", err)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		return at("fcntl", err)
	}
	type outcome struct {
		note string
		err  error
	}
	sent := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		var o outcome
		if ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && ti.State == 2 { // TCP_SYN_SENT
			o.note = "sent-in-syn-sent"
		}
		for {
			_, err := unix.SendmsgN(fd, b, nil, nil, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			o.err = at("send", err)
			sent <- o
			return
		}
	}()
	cerr := finishConnect(fd)
	var serr error
	select {
	case o := <-sent:
		r.Note, serr = o.note, o.err
	case <-time.After(time.Until(deadline)):
		serr = at("send", errTimeout())
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return at("fcntl", err)
	}
	if cerr != nil {
		return at("connect", cerr)
	}
	// The user timeout the socket has now, its first flight sent and not
	// answered: what bounds a connection whose bytes are held back.
	if ut, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); err == nil {
		r.Note += fmt.Sprintf(" user-timeout=%d", ut)
	}
	return serr
}

// runOOBLast is tls-attack's oob-last: crypto/tls's ClientHello for the
// SNI with the server_name extension moved last, sent whole in one send
// with MSG_OOB, then one byte 'x'. A server without SO_OOBINLINE skips the
// urgent byte, the record's last, so it reads the name with its last
// character replaced by 'x', while a judge of the sent bytes read the
// name itself. Reply is empty: no handshake can follow.
func runOOBLast(fd int, sni string) error {
	hello, err := captureHello(sni)
	if err != nil {
		return at("hello", err)
	}
	if err := writeAll(fd, hello, 0, unix.MSG_OOB); err != nil {
		return err
	}
	if err := writeAll(fd, []byte{'x'}, 0, 0); err != nil {
		return err
	}
	// Whatever the server answers (an alert, or nothing until it gives up)
	// is not the point; wait for it, bounded, so that it read the bytes.
	buf := make([]byte, 512)
	c := &fdConn{fd: fd}
	_, err = c.Read(buf)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// captureHello returns the TLS record crypto/tls sends first for sni, its
// server_name extension moved to the end of the extensions.
func captureHello(sni string) ([]byte, error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_ = c.Handshake()
	}()
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		return nil, err
	}
	rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, rec); err != nil {
		return nil, err
	}
	// handshake header (4), version (2), random (32), session id, cipher
	// suites, compression methods, then the extensions.
	off := 4 + 2 + 32
	if off >= len(rec) {
		return nil, errors.New("short ClientHello")
	}
	off += 1 + int(rec[off])
	if off+2 > len(rec) {
		return nil, errors.New("short ClientHello")
	}
	off += 2 + (int(rec[off])<<8 | int(rec[off+1]))
	if off+1 > len(rec) {
		return nil, errors.New("short ClientHello")
	}
	off += 1 + int(rec[off])
	if off+2 > len(rec) {
		return nil, errors.New("short ClientHello")
	}
	start := off + 2
	var sniExt, others []byte
	for p := start; p < len(rec); {
		if p+4 > len(rec) {
			return nil, errors.New("bad extensions")
		}
		n := 4 + (int(rec[p+2])<<8 | int(rec[p+3]))
		if p+n > len(rec) {
			return nil, errors.New("bad extensions")
		}
		if rec[p] == 0 && rec[p+1] == 0 {
			sniExt = rec[p : p+n]
		} else {
			others = append(others, rec[p:p+n]...)
		}
		p += n
	}
	if sniExt == nil {
		return nil, errors.New("no server_name extension")
	}
	out := append(append([]byte(nil), hdr...), rec[:start]...)
	out = append(append(out, others...), sniExt...)
	return out, nil
}
