// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runAPIHandoff is the pid-reuse attack on the daemon's peer checks: this
// process connects to the API socket (so SO_PEERCRED names its pid), hands
// the connection to a child and exits. Once the test has given the freed
// pid to an unconfined process and created DIR/go, the child sends a
// session request on the connection and writes the daemon's answer
// ("STATUS body") to DIR/result. The reply reports this process's pid.
func runAPIHandoff(args []string, r *result) error {
	socket, dir := args[0], args[1]
	c, err := net.Dial("unix", socket)
	if err != nil {
		return &stageError{stage: "connect", err: err}
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		return &stageError{stage: "connect", err: err}
	}
	c.Close()
	child := exec.Command("/proc/self/exe", "-timeout", timeout.String(), "-handoff-child", "api-handoff", socket, dir)
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		return &stageError{stage: "fork", err: err}
	}
	f.Close()
	r.Reply = strconv.Itoa(os.Getpid())
	return nil
}

// handoffChild is the child of runAPIHandoff: the connection is fd 3.
func handoffChild(dir string) int {
	conn, err := net.FileConn(os.NewFile(3, "api"))
	answer := func(s string) int {
		tmp := filepath.Join(dir, "result.tmp")
		if werr := os.WriteFile(tmp, []byte(s), 0o644); werr == nil {
			_ = os.Rename(tmp, filepath.Join(dir, "result"))
		}
		return exitOK
	}
	if err != nil {
		return answer("error " + err.Error())
	}
	defer conn.Close()
	// Bounded: the test creates DIR/go within seconds or not at all.
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(end) {
			return answer("error no go-ahead")
		}
	}
	// More than the caller's session allows, within the machine's; no
	// descriptors, so a request that passed the identity checks gets 400.
	body := `{"argv": ["/bin/true"], "path": "/bin/true", "allow": ["203.0.113.20"]}`
	fmt.Fprintf(conn, "POST /v1/sessions HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return answer("error " + err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return answer(fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b))))
}
