// SPDX-License-Identifier: Apache-2.0

package allowlist

// Docker is the file's "docker": true, a session policy's request for a
// Docker socket served by sluice (the same as `sluice run --docker`; see
// docs/docker.md). It asks, it does not grant: the session rules decide
// whether the caller may have one, and a machine policy never gives it
// to sessions. Merging policies keeps it if either asked.
func (p *Policy) Docker() bool {
	return p != nil && p.docker
}

// WithDocker returns p with its "docker" request set to on.
func (p *Policy) WithDocker(on bool) *Policy {
	b := newBuilder()
	b.addPolicy(p)
	np := b.policy()
	np.docker = on
	return np
}
