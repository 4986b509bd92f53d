// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// DockerSocketNames are the names Docker clients dial when DOCKER_HOST is
// not set (/var/run is usually a symlink to /run: one file then).
var DockerSocketNames = []string{"/var/run/docker.sock", "/run/docker.sock"}

// DockerSocketsHere are those of DockerSocketNames that exist in the
// calling thread's file system, which is where Enter binds a session's
// broker socket (Spec.DockerSocket). Only these may be allowed by name:
// one that does not exist has no file to bind over, and sluice does not
// create one in the host's /run.
func DockerSocketsHere() []string {
	var out []string
	for _, n := range DockerSocketNames {
		if _, err := dockerTarget(n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// dockerTarget is the file name n leads to, if it exists and is not a
// directory (a bind of a socket needs a non-directory under it).
func dockerTarget(n string) (string, error) {
	t, err := filepath.EvalSymlinks(n)
	if err != nil {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Lstat(t, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return "", fmt.Errorf("%s is a directory", t)
	}
	return t, nil
}

// bindDockerSocket binds broker (the session's Docker socket) over each
// of names in the session's mount namespace, so a client that ignores
// DOCKER_HOST reaches the broker, never the engine the name leads to on
// the host. The session cannot unmount it: it has no CAP_SYS_ADMIN, its
// Landlock domain refuses every mount, and without one user namespaces
// are refused (RefuseUserNamespaces). A name that cannot be bound fails
// the session: the datapath allows it because it leads to the broker.
func bindDockerSocket(broker string, names []string) error {
	var done []string
	for _, n := range names {
		t, err := dockerTarget(n)
		if err != nil {
			return fmt.Errorf("sandbox: the Docker socket name %s: %w", n, err)
		}
		if slices.Contains(done, t) {
			continue
		}
		if err := unix.Mount(broker, t, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("sandbox: bind the session's Docker socket over %s: %w", t, err)
		}
		done = append(done, t)
	}
	return nil
}
