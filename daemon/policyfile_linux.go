// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"

	"github.com/sluice-dev/sluice/allowlist"
)

// loadPolicyFile reads one of the daemon's own policy files (the machine
// allowlist, a container policy). "docker": true is a session's request
// for a Docker socket (sluice run --allowlist); in a file the daemon reads
// it would give one to sessions nobody asked for, and the daemon gives no
// Docker socket yet: such a file is refused, never read as if the key
// were not there.
func loadPolicyFile(path string) (*allowlist.Policy, error) {
	p, err := allowlist.Load(path)
	if err != nil {
		return nil, err
	}
	if p.Docker() {
		return nil, fmt.Errorf(`%s: "docker": true belongs in a session's own policy file (sudo sluice run --allowlist FILE), not in a policy the daemon reads: a machine or container policy cannot give sessions a Docker socket`, path)
	}
	return p, nil
}
