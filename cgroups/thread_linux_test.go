// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// initThread records what onThrowawayThread did when called from the main
// thread, which only package initialisation is guaranteed to run on.
var initThread struct {
	tid int
	err error
}

func init() {
	initThread.err = onThrowawayThread(func() error {
		initThread.tid = unix.Gettid()
		return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	})
}

func TestOnThrowawayThreadAvoidsMainThread(t *testing.T) {
	if initThread.err != nil {
		t.Fatal(initThread.err)
	}
	pid := os.Getpid()
	if initThread.tid == pid {
		t.Fatal("fn ran on the main thread, which the runtime would park forever with its state")
	}
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "NoNewPrivs:\t0") {
		t.Error("the main thread has no_new_privs set")
	}
	eventually(t, 5*time.Second, "the throwaway thread to exit", func() bool {
		_, err := os.Stat("/proc/self/task/" + strconv.Itoa(initThread.tid))
		return err != nil
	})
}
