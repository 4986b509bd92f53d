// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"fmt"

	"github.com/sluice-dev/sluice/callerns"
	"github.com/sluice-dev/sluice/sandbox"
)

// sandboxPrepare returns the step that builds c's sandbox on the spawning
// thread (sandbox.Enter), after checking what the shim will need: a
// command that asks for process isolation on a kernel without Landlock is
// refused here rather than left to fail in the shim, and never downgraded
// silently.
//
// sockets are the unix socket names the session may reach; the sandbox
// holds each to the socket it names at the start (sandbox.Spec.Sockets)
// and tells onSocket which it could not.
//
// own is the session's own socket directory (sandbox.Spec.OwnDir), or "".
func (c CommandSpec) sandboxPrepare(sockets []string, onSocket func(name string, held bool, why string), own string) (func() error, error) {
	sb := c.Sandbox
	if !sb.ShareProcesses && sandbox.LandlockABI() < 1 {
		return nil, ErrNoProcessIsolation
	}
	hidden := sandbox.Hidden{Patterns: sandbox.DefaultHiddenPaths}
	if sb.Hidden != nil {
		hidden = *sb.Hidden
	}
	spec := sandbox.Spec{Processes: !sb.ShareProcesses, Hidden: hidden, Home: sb.Home, UID: c.User.UID,
		Sockets: sockets, OnSocket: onSocket, OwnDir: own, GID: c.User.GID, ReadOnly: sb.ReadOnly, OnNote: sb.OnNote,
		DockerSocket: sb.DockerSocket, DockerNames: sb.DockerNames}
	from, onHidden := sb.MountNamespaceOf, sb.OnHidden
	join := sb.NamespacesOf
	return func() error {
		if join != nil {
			// Into the caller's namespaces first; the sandbox's mount
			// namespace is then made from the caller's.
			pidns, err := callerns.Join(join)
			if err != nil {
				return fmt.Errorf("start the command in the caller's namespaces: %w", err)
			}
			defer pidns.Close()
			spec.PidNS, from = pidns, nil
		}
		if err := sandbox.Enter(spec, from, onHidden); err != nil {
			return fmt.Errorf("build the session's sandbox: %w", err)
		}
		return nil
	}, nil
}
