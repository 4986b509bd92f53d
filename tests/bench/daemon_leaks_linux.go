// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/sluice-dev/sluice/cgroups"
)

// checkLeaks fills res.leaks: once the daemon lists no session, nothing
// sessions own may be left (cgroups, datapath entries, listener ports,
// state files), and the daemon's descriptors must be back at their idle
// level, idleKinds.
func (h *daemonHarness) checkLeaks(ctx context.Context, res *daemonResult, idleKinds map[string]int) error {
	l := &res.leaks
	if err := h.waitNoSessions(ctx); err != nil {
		ss, _ := h.ctl.Sessions(ctx)
		l.add("sessions the daemon still lists", len(ss), err.Error())
	} else {
		l.add("sessions the daemon still lists", 0, "")
	}

	mount, err := cgroups.Mount()
	if err != nil {
		return fmt.Errorf("find the cgroup2 mount: %w", err)
	}
	root := filepath.Join(mount, h.cfg.CgroupName)
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("read the instance's cgroup: %w", err)
	}
	var cgs []string
	for _, e := range entries {
		if e.IsDir() {
			cgs = append(cgs, e.Name())
		}
	}
	l.add("session cgroups under "+root, len(cgs), examples(cgs))

	for _, m := range []struct {
		name, what string
		session    func(key []byte) string // names a key's session, and more
	}{
		{"sessions", "policies (map sessions)", sessionKey},
		{"session_counters", "counters (map session_counters)", sessionKey},
		{"session_events", "event ring buffers (map session_events)", sessionKey},
		{"cidrs", "CIDR entries (map cidrs)", cidrKey},
		{"learned", "learned IPs (map learned)", sessionKey},
	} {
		keys, n, err := pinnedKeys(filepath.Join(h.cfg.PinDir, m.name))
		if err != nil {
			return err
		}
		var ex []string
		for _, k := range keys {
			ex = append(ex, m.session(k))
		}
		l.add(m.what, n, examples(ex))
	}
	owned, err := ownedListeners(filepath.Join(h.cfg.PinDir, "listeners"))
	if err != nil {
		return err
	}
	l.add("listener ports still owned (map listeners, 65536 entries)", len(owned), examples(owned))

	for _, s := range []struct{ what, dir, suffix string }{
		{"session lock files", filepath.Join(h.cfg.StateDir, "sessions"), ".lock"},
		{"session records", filepath.Join(h.cfg.StateDir, "daemon"), ".json"},
	} {
		files, err := filesWithSuffix(s.dir, s.suffix)
		if err != nil {
			return err
		}
		l.add(fmt.Sprintf("%s (%s)", s.what, s.dir), len(files), examples(files))
	}

	// Descriptors: an API connection's socket is closed just after its
	// response, so give a last few a moment.
	var kinds map[string]int
	deadline := time.Now().Add(3 * time.Second)
	for {
		if kinds, err = h.d.fds(); err != nil {
			return err
		}
		if d := total(kinds) - res.fdIdle; (d <= fdSlack && d >= -fdSlack) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	left := total(kinds) - res.fdIdle
	if left <= fdSlack && left >= -fdSlack {
		left = 0
	}
	detail := fmt.Sprintf("idle %d, now %d", res.fdIdle, total(kinds))
	if diff := kindDiff(idleKinds, kinds); diff != "" {
		detail += ": " + diff
	}
	l.add(fmt.Sprintf("daemon descriptors beyond its idle level ±%d", fdSlack), left, detail)

	f, err := os.Open(h.d.audit)
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	defer f.Close()
	a, err := readAudit(f)
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	l.add("sessions started but never ended (audit log)", a.started-a.ended, fmt.Sprintf("%d started, %d ended", a.started, a.ended))
	l.add("session teardowns that failed (audit log `cleanup:`)", len(a.cleanupErrs), examples(a.cleanupErrs))
	return nil
}

// pinnedKeys counts the keys of a pinned map and returns the first few.
func pinnedKeys(path string) ([][]byte, int, error) {
	m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("open pinned map: %w", err)
	}
	defer m.Close()
	var keys [][]byte
	n := 0
	var prev []byte // nil: from the start
	// A hash map's walk restarts when the key it stands on is deleted
	// meanwhile; the bound keeps that from looping for ever.
	for limit := int(m.MaxEntries()) + 1; n < limit; n++ {
		var k []byte
		if prev == nil {
			k, err = m.NextKeyBytes(nil)
		} else {
			k, err = m.NextKeyBytes(prev)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("walk %s: %w", path, err)
		}
		if k == nil {
			break
		}
		if len(keys) < 3 {
			keys = append(keys, k)
		}
		prev = k
	}
	return keys, n, nil
}

// ownedListeners lists the ports of the pinned listeners array that a
// session still owns (a non-zero value), in one batch lookup.
func ownedListeners(path string) ([]string, error) {
	m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open pinned map: %w", err)
	}
	defer m.Close()
	n := int(m.MaxEntries())
	keys := make([]uint32, n)
	owners := make([]uint64, n)
	var cursor ebpf.MapBatchCursor
	got, err := m.BatchLookup(&cursor, keys, owners, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if got != n {
		return nil, fmt.Errorf("read %s: %d of %d entries", path, got, n)
	}
	var out []string
	for i := range got {
		if owners[i] != 0 {
			out = append(out, fmt.Sprintf("port %d (session %d)", keys[i], owners[i]))
		}
	}
	return out, nil
}

// filesWithSuffix lists the names in dir that end in suffix; a missing dir
// has none.
func filesWithSuffix(dir, suffix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
