// SPDX-License-Identifier: Apache-2.0

package sandbox

import "os"

// Spec is what one session's sandbox is made of. The zero value hides
// nothing and leaves processes visible; sessions get theirs from the
// command builder in enforcer, which turns every layer on by default.
type Spec struct {
	// Processes confines the command to its session's processes: a
	// Landlock domain (RestrictSelf, applied by the shim) and a private
	// /proc that lists only the processes the command may trace.
	Processes bool
	// Hidden is what to hide.
	Hidden Hidden
	// Home is what "~/" means; empty: the home of UID, looked up in the
	// session's own mount namespace (so a daemon uses its caller's
	// /etc/passwd, not its own).
	Home string
	// UID is the user the command runs as.
	UID uint32
	// PidNS, when set, is the PID namespace the command starts in (a
	// daemon's caller's, package callerns): the private /proc lists that
	// namespace's processes, with its pid numbers. Nil: the spawning
	// thread's own.
	PidNS *os.File
	// Sockets are the unix socket paths the session may reach by name:
	// in the session's mount namespace, each that the user could replace
	// is made a mount point of itself, and so is each directory above it
	// the user could rename (so the name keeps leading to the socket it
	// led to at the start). OnSocket, if set, is told whether each name
	// is so held, and if not, why (it does not exist, it is not a
	// socket, it is a symlink the user could replace).
	Sockets  []string
	OnSocket func(name string, held bool, why string)
	// OnNote, if set, is told what the user should know about the
	// sandbox as built (a hidden file whose other names were not all
	// found); it is called on the spawning thread, before the command.
	OnNote func(note string)
	// OwnDir, when set, is the session's own socket and temporary
	// directory: an absolute path below a directory only root can write
	// (OwnDirRoot), where Enter mounts a fresh tmpfs that exists only in
	// the session's mount namespace, owned by UID and GID, mode 0700,
	// nosymfollow. The datapath allows every clean name below it (see
	// the package comment, "A session's own sockets").
	OwnDir string
	// GID is the group of the command, the group of OwnDir.
	GID uint32
	// ReadOnly are the paths made read-only, with everything below them,
	// in the session's mount namespace (see ReadOnly).
	ReadOnly ReadOnly
	// DockerSocket, when set, is the session's Docker socket (served by
	// sluice's broker), bound over each of DockerNames in the session's
	// mount namespace.
	DockerSocket string
	DockerNames  []string
}

// OwnDirRoot is where sessions' own directories are mounted: one
// directory per session, named by its cgroup id, made (root-owned, 0755)
// in the file system the session sees and mounted over only in the
// session's mount namespace.
const OwnDirRoot = "/run/sluice-own"
