// SPDX-License-Identifier: Apache-2.0

//go:build linux

package daemone2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/tests/world"
)

// learnedEntries reads the instance's learned-IP map: each entry's time
// to expiry (negative: expired, not yet collected).
func (f *fixture) learnedEntries(t *testing.T) []time.Duration {
	t.Helper()
	m, err := ebpf.LoadPinnedMap(filepath.Join("/sys/fs/bpf", f.instance, "learned"), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the pinned learned map: %v", err)
	}
	defer m.Close()
	now := loader.BootTime()
	var out []time.Duration
	var k, v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		out = append(out, time.Duration(binary.NativeEndian.Uint64(v))-now)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterate the learned map: %v", err)
	}
	return out
}

// TestAdoptedSessionForgetsExpiredAnswers: a session learns ten addresses,
// the daemon is killed and restarted, and the new daemon's resolver for
// the re-adopted session removes them from the map once they expire (it
// once never knew them, and they stayed until the session ended). The
// daemon's --dns-ttl-max and --dns-grace set the expiry (docs/design.md).
func TestAdoptedSessionForgetsExpiredAnswers(t *testing.T) {
	f := newFixtureFlags(t, []string{"--dns-ttl-min", "1s", "--dns-ttl-max", "2s", "--dns-grace", "1s"}, "many.test")
	d := f.dir
	script := fmt.Sprintf(`%[1]s resolve many.test > %[2]s/r.tmp; mv %[2]s/r.tmp %[2]s/r
i=0; while [ ! -e %[2]s/stop ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done`, world.BuildProbe(t), d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.sluice(t, 0, 0, "run", "--user", "65534:65534", "--", "sh", "-c", script)
	}()
	t.Cleanup(func() {
		_ = os.WriteFile(d+"/stop", nil, 0o644)
		<-done
	})
	if r, _ := world.ParseProbeResult(waitFile(t, d+"/r")); !r.OK || len(r.Answers) != 10 {
		t.Fatalf("resolve many.test: %s", r)
	}
	learned := f.learnedEntries(t)
	if len(learned) != 10 {
		t.Fatalf("the map holds %d entries after 10 answers", len(learned))
	}
	for _, left := range learned {
		// TTL 300 s clamped to 2 s, plus 1 s of grace.
		if left > 3*time.Second {
			t.Fatalf("an entry expires in %v: the daemon's --dns-ttl-max 2s and --dns-grace 1s were not applied", left)
		}
	}

	f.stopDaemon(t) // kill -9
	f.startDaemon(t)
	f.waitAudit(t, "session_adopted", nil)
	// Expired within 3 s, collected every 5 s.
	deadline := time.Now().Add(15 * time.Second)
	for len(f.learnedEntries(t)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := f.learnedEntries(t); len(left) > 0 {
		t.Fatalf("%d entries of the re-adopted session are still in the map, expired %v ago", len(left), -left[0])
	}
	if code, body := f.api(t, "GET", "/v1/sessions", nil); code != 200 || !strings.Contains(body, `"name":"run-`) {
		t.Fatalf("the session ended early (the entries went with it, not at their expiry): %d %s", code, body)
	}
}
