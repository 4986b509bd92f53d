// SPDX-License-Identifier: Apache-2.0

//go:build linux

package containere2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/dockertest"
	"github.com/sluice-dev/sluice/tests/world"
)

// TestContainersStartWhileAttached starts containers with their own
// network namespace (--network none) one after another under the root:
// the daemon attaches each while runc is still starting it, when Docker
// has not yet brought the namespace's lo up (it does that from a hook
// while runc's init waits). Every container must start, and be confined
// at the first try. (The resolver's liveness probe used to connect over a
// lo that was still down; the attach failed and its cleanup killed the
// container: `docker run` failed with "read init-p: connection reset by
// peer", about one start in eight here.)
func TestContainersStartWhileAttached(t *testing.T) {
	e := dockertest.Start(t)
	e.Image(t, "base", 5*time.Minute)
	w := world.New(t)
	pd := startPolicyDaemon(t, w, []string{"registry.test"}, map[string][]string{"ci": {"registry.test"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 16 // the race hit about one start in eight: 16 starts see it nineteen times in twenty
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("starting%d", i))
	}
	removeAtCleanup(t, e, names...)
	failed := 0
	for _, name := range names {
		if _, err := e.Docker(ctx, "run", "-d", "--name", name, "--network", "none", "--cgroup-parent=/"+pd.instance,
			"--label", "sluice.policy=ci", dockertest.BaseImage, "sleep", "300"); err != nil {
			failed++
			t.Errorf("container %s did not start: %v", name, err)
		}
	}
	if failed == 0 {
		waitAudit(t, pd.audit, "session_started", n)
	}
	for _, ev := range world.ReadAuditLog(t, pd.audit) {
		if ev["type"] == "session_refused" {
			msg, _ := ev["message"].(string)
			if strings.Contains(msg, "not confined by its policy yet") {
				t.Errorf("an attach failed: %s", msg)
			}
		}
	}
}
