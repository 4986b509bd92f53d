// SPDX-License-Identifier: Apache-2.0

package sniprobe

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMain runs the client child when the world asked for one.
func TestMain(m *testing.M) {
	if mode := os.Getenv("SNIPROBE_CHILD"); mode != "" {
		r := runChild(mode, strings.Split(os.Getenv("SNIPROBE_ARGS"), ","))
		_ = json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var cdnSockaddr = &unix.SockaddrInet4{Port: 443, Addr: cdnAddr.As4()}

func localPort(fd int) int {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0
	}
	if s, ok := sa.(*unix.SockaddrInet4); ok {
		return s.Port
	}
	return 0
}

func tcpSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	tv := unix.Timeval{Sec: 2}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	return fd, nil
}

// sendAll writes b with write(2) in chunks of step bytes (0: at once).
func sendAll(fd int, b []byte, step int, flags int) error {
	if step <= 0 {
		step = len(b)
	}
	for len(b) > 0 {
		n := min(step, len(b))
		w, err := unix.SendmsgN(fd, b[:n], nil, nil, flags)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[w:]
	}
	return nil
}

// connect is a blocking connect to the CDN that a signal does not break.
func connect(fd int) error {
	err := unix.Connect(fd, cdnSockaddr)
	if err != unix.EINTR {
		return err
	}
	// Interrupted, the connect goes on: wait for it.
	for {
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, 2000); err != unix.EINTR {
			break
		}
	}
	if v, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); v != 0 {
		return unix.Errno(v)
	}
	return nil
}

// awaitReply reads the world's one-byte answer.
func awaitReply(fd int) bool {
	var one [1]byte
	for {
		n, err := unix.Read(fd, one[:])
		if err == unix.EINTR {
			continue
		}
		return n == 1
	}
}

// runChild is one client: mode says how it sends its first flight.
func runChild(mode string, args []string) (r childResult) {
	sni := args[0]
	hello := helloBytes(sni)
	fail := func(err error) childResult {
		r.Err = err.Error()
		return r
	}
	switch mode {
	case "curl":
		// The escape itself: curl sent to the CDN's address with
		// another name's SNI. Its local port is not known here; the
		// world is asked by SNI instead.
		out, err := exec.Command("curl", "-sk", "--max-time", "3", "--connect-to", sni+":443:"+cdnAddr.String()+":443", "https://"+sni+"/").CombinedOutput()
		if err != nil {
			r.Err = fmt.Sprintf("%v: %s", err, out)
		}
		return r
	case "latency":
		n, _ := strconv.Atoi(args[1])
		for i := 0; i < n; i++ {
			t0 := time.Now()
			fd, err := tcpSocket()
			if err != nil {
				return fail(err)
			}
			if err := connect(fd); err != nil {
				unix.Close(fd)
				return fail(err)
			}
			if err := sendAll(fd, hello, 0, 0); err != nil {
				unix.Close(fd)
				return fail(err)
			}
			ok := awaitReply(fd)
			r.Ns = append(r.Ns, float64(time.Since(t0).Nanoseconds()))
			unix.Close(fd)
			if !ok {
				return fail(fmt.Errorf("no reply"))
			}
		}
		return r
	case "upload":
		fd, err := tcpSocket()
		if err != nil {
			return fail(err)
		}
		defer unix.Close(fd)
		if err := connect(fd); err != nil {
			return fail(err)
		}
		t0 := time.Now()
		if err := sendAll(fd, hello, 0, 0); err != nil {
			return fail(err)
		}
		chunk := make([]byte, 256<<10)
		for r.Bytes < 512<<20 {
			if err := sendAll(fd, chunk, 0, 0); err != nil {
				return fail(err)
			}
			r.Bytes += int64(len(chunk))
		}
		if err := unix.Shutdown(fd, unix.SHUT_WR); err != nil {
			return fail(err)
		}
		tv := unix.Timeval{Sec: 30}
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		var one [1]byte
		for {
			n, err := unix.Read(fd, one[:])
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN && time.Since(t0) < 30*time.Second {
				r.Eagain++ // tcp_bpf_recvmsg, as in "bulk"
				continue
			}
			if n != 1 {
				return fail(fmt.Errorf("no answer after the upload: %v", err))
			}
			break
		}
		r.Seconds = time.Since(t0).Seconds()
		return r
	case "bulk":
		fd, err := tcpSocket()
		if err != nil {
			return fail(err)
		}
		defer unix.Close(fd)
		if err := connect(fd); err != nil {
			return fail(err)
		}
		t0 := time.Now()
		if err := sendAll(fd, hello, 0, 0); err != nil {
			return fail(err)
		}
		buf := make([]byte, 256<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN && time.Since(t0) < 30*time.Second {
				// A socket in a sockhash reads through tcp_bpf_recvmsg,
				// which answers a wakeup without data with EAGAIN even on
				// a blocking socket; counted, and read again.
				r.Eagain++
				continue
			}
			if err != nil {
				r.Err = err.Error()
				break
			}
			if n <= 0 {
				break
			}
			r.Bytes += int64(n)
		}
		r.Seconds = time.Since(t0).Seconds()
		return r
	}
	fd, err := tcpSocket()
	if err != nil {
		return fail(err)
	}
	defer unix.Close(fd)
	var serr error
	switch mode {
	case "plain", "uring", "bytewise", "records", "oob", "zerocopy", "ktls", "sendfile", "splice":
		if err := unix.Connect(fd, cdnSockaddr); err != nil {
			return fail(err)
		}
		r.Port = localPort(fd)
		switch mode {
		case "plain":
			serr = sendAll(fd, hello, 0, 0)
		case "uring":
			var n int
			if n, serr = uringSend(fd, hello); serr == nil && n != len(hello) {
				serr = fmt.Errorf("io_uring sent %d of %d bytes", n, len(hello))
			}
		case "bytewise":
			serr = sendAll(fd, hello, 1, 0)
		case "records":
			serr = sendAll(fd, splitRecords(hello), 0, 0)
		case "oob":
			serr = sendAll(fd, hello, 0, unix.MSG_OOB)
		case "zerocopy":
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ZEROCOPY, 1); err != nil {
				return fail(fmt.Errorf("SO_ZEROCOPY: %w", err))
			}
			serr = sendAll(fd, hello, 0, unix.MSG_ZEROCOPY)
		case "ktls":
			if err := unix.SetsockoptString(fd, unix.SOL_TCP, unix.TCP_ULP, "tls"); err != nil {
				return fail(fmt.Errorf("TCP_ULP tls: %w", err))
			}
			serr = sendAll(fd, hello, 0, 0)
		case "sendfile":
			f, err := os.CreateTemp("", "sniprobe")
			if err != nil {
				return fail(err)
			}
			defer os.Remove(f.Name())
			defer f.Close()
			if _, err := f.Write(hello); err != nil {
				return fail(err)
			}
			var off int64
			_, serr = unix.Sendfile(fd, int(f.Fd()), &off, len(hello))
		case "splice":
			var p [2]int
			if err := unix.Pipe(p[:]); err != nil {
				return fail(err)
			}
			defer unix.Close(p[0])
			defer unix.Close(p[1])
			if _, err := unix.Write(p[1], hello); err != nil {
				return fail(err)
			}
			_, serr = unix.Splice(p[0], nil, fd, nil, len(hello), 0)
		}
	case "more":
		// The first flight in two sends, the first with MSG_MORE.
		if err := connect(fd); err != nil {
			return fail(err)
		}
		r.Port = localPort(fd)
		if serr = sendAll(fd, hello[:100], 0, unix.MSG_MORE); serr == nil {
			serr = sendAll(fd, hello[100:], 0, 0)
		}
	case "reconnect":
		// An allowed first flight, then the same socket disconnected
		// (connect AF_UNSPEC) and connected again to the same address:
		// its second first flight names the denied name.
		if err := connect(fd); err != nil {
			return fail(err)
		}
		if err := sendAll(fd, helloBytes("allowed.example"), 0, 0); err != nil {
			return fail(fmt.Errorf("allowed first flight: %w", err))
		}
		if !awaitReply(fd) {
			return fail(fmt.Errorf("no reply to the allowed first flight"))
		}
		var unspec [16]byte // struct sockaddr, sa_family AF_UNSPEC
		if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec[0])), uintptr(len(unspec))); e != 0 {
			return fail(fmt.Errorf("disconnect: %w", e))
		}
		if err := connect(fd); err != nil {
			return fail(fmt.Errorf("connect again: %w", err))
		}
		r.Port = localPort(fd)
		serr = sendAll(fd, hello, 0, 0)
	case "early":
		// A send that enters tcp_sendmsg before the connection is
		// established: it waits inside the kernel's TCP sendmsg while
		// sockops puts the socket in the sockhash.
		if err := unix.SetNonblock(fd, true); err != nil {
			return fail(err)
		}
		if err := unix.Connect(fd, cdnSockaddr); err != unix.EINPROGRESS && err != nil {
			return fail(err)
		}
		r.Port = localPort(fd)
		_ = unix.SetNonblock(fd, false)
		serr = sendAll(fd, hello, 0, 0)
	case "tfo":
		// sendto(MSG_FASTOPEN): connect and first flight in one call.
		serr = unix.Sendto(fd, hello, unix.MSG_FASTOPEN, cdnSockaddr)
		r.Port = localPort(fd)
	case "tfoconnect":
		if err := unix.SetsockoptInt(fd, unix.SOL_TCP, unix.TCP_FASTOPEN_CONNECT, 1); err != nil {
			return fail(fmt.Errorf("TCP_FASTOPEN_CONNECT: %w", err))
		}
		if err := unix.Connect(fd, cdnSockaddr); err != nil {
			return fail(err)
		}
		r.Port = localPort(fd)
		serr = sendAll(fd, hello, 0, 0)
	default:
		return fail(fmt.Errorf("unknown mode %q", mode))
	}
	if serr != nil {
		r.Err = serr.Error()
	}
	r.Reply = awaitReply(fd)
	return r
}

// splitRecords re-frames a one-record ClientHello as two TLS records.
func splitRecords(h []byte) []byte {
	body := h[5:]
	half := len(body) / 2
	out := append([]byte{0x16, h[1], h[2], byte(half >> 8), byte(half)}, body[:half]...)
	rest := len(body) - half
	return append(append(out, 0x16, h[1], h[2], byte(rest>>8), byte(rest)), body[half:]...)
}
