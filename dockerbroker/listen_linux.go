// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Listen makes the session's Docker socket at path, reachable by the
// session's user uid (mode 0600, its owner) and nobody else but root; a
// socket left there by an earlier session is replaced. Its directory is
// made 0711 (traversable, not listable).
func Listen(path string, uid, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return nil, fmt.Errorf("docker socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("docker socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("docker socket: %w", err)
	}
	// The name stays when the listener closes: the session's supervisor
	// may hold the socket for the next daemon, and its session's end
	// removes the name.
	if ul, ok := l.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		l.Close()
		return nil, fmt.Errorf("docker socket: %w", err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		os.Remove(path)
		l.Close()
		return nil, fmt.Errorf("docker socket: %w", err)
	}
	return l, nil
}
