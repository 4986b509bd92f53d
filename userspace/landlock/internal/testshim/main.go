// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command testshim is the landlock package's test helper. It stands in for
// `sluice __confine`, and it performs the one network action the probe
// (tests/probe) does not have:
//
//	testshim confine [--connect-port P]... -- CMD ARGS...
//	    landlock.Exec: confine this process, then execute CMD
//	testshim mptcp ADDR PORT
//	    connect an IPPROTO_MPTCP socket and read the greeting; prints one
//	    JSON line in the probe's format (tests/world.ProbeResult)
//
// A failed confine prints the error on stderr and exits 111. It refuses
// addresses outside loopback and the test ranges, like the probe's runner.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/world"
	"github.com/sluice-dev/sluice/userspace/landlock"
)

// ioTimeout bounds connect and read, so a test never hangs on the shim.
const ioTimeout = 2 * time.Second

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "confine":
		rules, argv, err := landlock.ParseArgs(os.Args[2:])
		if err == nil {
			err = landlock.Exec(rules, argv, os.Environ())
		}
		fmt.Fprintf(os.Stderr, "testshim: %v\n", err)
		os.Exit(111)
	case "mptcp":
		if len(os.Args) != 4 {
			usage()
		}
		r := mptcp(os.Args[2], os.Args[3])
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
		if !r.OK {
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testshim confine [--connect-port P]... -- CMD ARGS...\n       testshim mptcp ADDR PORT")
	os.Exit(2)
}

// result is the subset of the probe's JSON line that mptcp fills in.
type result struct {
	Op    string `json:"op"`
	OK    bool   `json:"ok"`
	Errno string `json:"errno,omitempty"`
	Error string `json:"error,omitempty"`
	Stage string `json:"stage,omitempty"`
	Reply string `json:"reply,omitempty"`
}

// mptcp connects an MPTCP socket to addr:port and reads one line.
func mptcp(addr, port string) result {
	r := result{Op: "mptcp"}
	fail := func(stage string, err error) result {
		r.Stage, r.Error = stage, err.Error()
		var errno unix.Errno
		if errors.As(err, &errno) {
			r.Errno = unix.ErrnoName(errno)
		}
		return r
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil || !world.Safe(ip) {
		return fail("usage", fmt.Errorf("address %q is not loopback or a test range", addr))
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fail("usage", err)
	}
	var sa unix.Sockaddr
	family := unix.AF_INET6
	if ip.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(p), Addr: ip.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(p), Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP)
	if err != nil {
		return fail("socket", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(ioTimeout.Nanoseconds())
	for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return fail("setsockopt", err)
		}
	}
	if err := unix.Connect(fd, sa); err != nil {
		return fail("connect", err)
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return fail("read", err)
	}
	r.OK, r.Reply = true, string(buf[:n])
	return r
}
