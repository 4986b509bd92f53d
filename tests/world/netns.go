// SPDX-License-Identifier: Apache-2.0

//go:build linux

package world

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/netns"
)

// netnsDir is where iproute2 keeps named network namespaces; nsenter and
// `ip netns` both understand files there.
const netnsDir = "/run/netns"

// randomSuffix returns 8 hex digits, enough to keep parallel test binaries
// apart.
func randomSuffix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random namespace suffix: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// createNamedNetns creates a fresh network namespace and pins it with a bind
// mount at /run/netns/name, like `ip netns add`. It returns the path.
func createNamedNetns(name string) (string, error) {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", netnsDir, err)
	}
	path := filepath.Join(netnsDir, name)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", fmt.Errorf("creating mount point for namespace %s: %w", name, err)
	}
	f.Close()

	errc := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it ends in the new namespace, and a
		// goroutine that exits while locked takes its thread with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		// thread-self, not self: /proc/self/ns/net is the main thread's.
		if err := unix.Mount("/proc/thread-self/ns/net", path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind-mounting the namespace on %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}

// deleteNamedNetns undoes createNamedNetns. The namespace itself goes away
// when its last user (socket, process, open fd) does.
func deleteNamedNetns(path string) error {
	var errs []error
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("unmounting %s: %w", path, err))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing %s: %w", path, err))
	}
	return errors.Join(errs...)
}

// inNetns runs fn inside the network namespace ns on a thread that is
// discarded afterwards (netns.Do). A panic in fn becomes its error, so a
// broken test fails instead of taking the whole test binary down.
func inNetns(ns *os.File, fn func() error) error {
	return netns.Do(ns, func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic in namespace: %v", p)
			}
		}()
		return fn()
	})
}
