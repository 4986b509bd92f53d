// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemonize is the classic escape from a supervisor that tracks only its
// child: double fork and setsid. The probe re-executes itself with the
// hidden -daemon-stage flag:
//
//	stage 0 (the probe the test ran): starts stage 1, learns the grandchild's
//	  pid from it, prints {"op":"daemonize","ok":true,"pid":N} and exits 0.
//	stage 1: starts stage 2 in a new session (setsid), prints its pid, exits.
//	stage 2 (the grandchild, reparented to init or a subreaper): waits until
//	  stage 1 is gone, runs ACTION and writes its JSON line to OUTFILE.
//
// The grandchild's stdio is /dev/null so that a caller reading the probe's
// output is not held open by it.

// selfExe re-executes the running binary even if it was started by a
// relative path or from another mount namespace view.
const selfExe = "/proc/self/exe"

// runDaemonize is stage 0.
func runDaemonize(args []string, r *result) error {
	cmd := exec.Command(selfExe, append([]string{
		"-timeout", timeout.String(), "-daemon-stage=1", "daemonize"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return at("fork", err)
	}
	if err := cmd.Start(); err != nil {
		return at("fork", err)
	}
	line, readErr := bufio.NewReader(out).ReadString('\n')
	if err := cmd.Wait(); err != nil {
		return at("fork", fmt.Errorf("first child: %w", err))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return at("fork", fmt.Errorf("first child printed %q (%v): %w", line, readErr, err))
	}
	r.PID = pid
	return nil
}

// daemonStage1 starts the grandchild in its own session and exits at once.
func daemonStage1(args []string) int {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: daemonize: %v\n", err)
		return exitFail
	}
	cmd := exec.Command(selfExe, append([]string{
		"-timeout", timeout.String(), "-daemon-stage=2",
		"-daemon-parent", strconv.Itoa(os.Getpid())}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "probe: daemonize: starting grandchild: %v\n", err)
		return exitFail
	}
	fmt.Println(cmd.Process.Pid)
	return exitOK
}

// daemonStage2 is the grandchild: args are "daemonize OUTFILE ACTION ...".
func daemonStage2(args []string) int {
	outfile, action := args[1], args[2:]
	// Wait, bounded, for stage 1 to exit, so that ACTION really runs from an
	// orphaned process in a session of its own.
	for end := time.Now().Add(time.Second); os.Getppid() == *daemonParent && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(timeout)
	sink := fileSink(outfile)
	startWatchdog(sink, action[0])
	return emit(sink, perform(action))
}

// fileSink writes the result line to path atomically (a temporary file in
// the same directory, then rename), world-readable and writable so that a
// test running as another user can read and remove it.
func fileSink(path string) func([]byte) error {
	return func(line []byte) error {
		f, err := os.CreateTemp(filepath.Dir(path), ".probe-*")
		if err != nil {
			return fmt.Errorf("creating result file: %w", err)
		}
		defer os.Remove(f.Name())              // a no-op after a successful rename
		if err := f.Chmod(0o666); err != nil { // fchmod ignores the umask
			f.Close()
			return fmt.Errorf("chmod result file: %w", err)
		}
		if _, err := f.Write(line); err != nil {
			f.Close()
			return fmt.Errorf("writing result file: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("closing result file: %w", err)
		}
		if err := os.Rename(f.Name(), path); err != nil {
			return fmt.Errorf("renaming result file: %w", err)
		}
		return nil
	}
}
