// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dnse2e

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestFullLearnedMapGivesServfail fills the shared learned-IP map with
// entries of a session that does not exist, then asks for an allowed name:
// the resolver must answer SERVFAIL and say so rather than evict anything.
func TestFullLearnedMapGivesServfail(t *testing.T) {
	f := newFixture(t)
	// A first run makes sure the instance's maps are pinned.
	f.run(t, nil, "true")
	m, err := ebpf.LoadPinnedMap(filepath.Join("/sys/fs/bpf", instance, "learned"), nil)
	if err != nil {
		t.Fatalf("open the pinned learned map: %v", err)
	}
	defer m.Close()
	const ghost = uint64(1) << 62 // no cgroup has this id
	var keys [][]byte
	n := int(m.MaxEntries())
	for i := 0; i < n; i++ {
		k := make([]byte, 24)
		binary.NativeEndian.PutUint64(k, ghost)
		binary.BigEndian.PutUint32(k[20:], uint32(i))
		keys = append(keys, k)
	}
	vals := make([][]byte, len(keys))
	for i := range vals {
		vals[i] = make([]byte, 8)
		binary.NativeEndian.PutUint64(vals[i], ^uint64(0))
	}
	t.Cleanup(func() {
		for _, k := range keys {
			_ = m.Delete(k)
		}
	})
	filled := 0
	for i, k := range keys {
		if err := m.Update(k, vals[i], ebpf.UpdateNoExist); err != nil {
			if errors.Is(err, ebpf.ErrKeyExist) {
				continue
			}
			break // full: E2BIG
		}
		filled++
	}
	t.Logf("filled %d entries of %d", filled, n)

	r, stderr := f.probe(t, []string{"--allow", "allowed.test"}, "dns", authV4.String(), "53", "allowed.test", "A", "udp")
	if r.Rcode != "SERVFAIL" {
		t.Fatalf("with the learned map full: want SERVFAIL, got %s", r)
	}
	if !strings.Contains(stderr, "SERVFAIL for allowed.test") || !strings.Contains(stderr, "map full") {
		t.Fatalf("no event for the full map:\n%s", stderr)
	}
	// Positive twin: with room again, the same query works.
	for _, k := range keys[:16] {
		_ = m.Delete(k)
	}
	r, _ = f.probe(t, []string{"--allow", "allowed.test"}, "dns", authV4.String(), "53", "allowed.test", "A", "udp")
	if r.Rcode != "NOERROR" {
		t.Fatalf("with room again: %s", r)
	}
}
