// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestUpgradeWithChangedMapLayout: a daemon restarted by an upgrade whose
// BPF object changed a pinned map's layout starts (no `sluice cleanup`,
// which would unconfine every session), replaces the map and names it in
// its log, and the session it re-adopts still reaches its IP entry: the
// session's entries in the replaced map are written again. The world
// records the connection.
func TestUpgradeWithChangedMapLayout(t *testing.T) {
	f := newFixture(t, world.AllowedV4.String())
	probe := world.BuildProbe(t)
	goFile := filepath.Join(f.dir, "go")
	script := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; %s tcp %s %d", goFile, probe, world.AllowedV4, f.port)
	done := make(chan string, 1)
	go func() {
		out, _, _ := f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
		done <- out
	}()
	f.waitAudit(t, "session_started", nil)
	f.stopDaemon(t) // kill -9, as an upgrade's restart may
	// The older version's pins: another object, another cidrs layout.
	pin := "/sys/fs/bpf/" + f.instance
	for _, name := range []string{"meta", "cidrs"} {
		if err := os.Remove(filepath.Join(pin, name)); err != nil {
			t.Fatal(err)
		}
	}
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: "cidrs", Type: ebpf.LPMTrie, KeySize: 4 + 8 + 16, ValueSize: 8,
		MaxEntries: 16, Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(filepath.Join(pin, "cidrs")); err != nil {
		t.Fatal(err)
	}
	old.Close()
	before := f.contactsTo(world.AllowedV4.String(), f.port)
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	if !strings.Contains(f.log.String(), "replaced the pinned maps cidrs") {
		t.Errorf("the daemon's log does not name the replaced map:\n%s", f.log.String())
	}
	touch(t, goFile)
	out := waitOut(t, done)
	rs := results(t, out)
	if len(rs) != 1 || !rs[0].OK || f.contactsTo(world.AllowedV4.String(), f.port) != before+1 {
		t.Fatalf("the re-adopted session's IP entry after the upgrade: %s (world contacts %d, before %d)", out, f.contactsTo(world.AllowedV4.String(), f.port), before)
	}
}
