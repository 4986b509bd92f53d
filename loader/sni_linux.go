// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// The kernel's name check (bpf/sni.h) judges the SNI or Host of a connection to
// port 443 or 80 of a learned address against the session's names in
// sni_names: an LPM trie over the session id and the name reversed, so
// that one lookup finds an exact name (its reversed bytes and a NUL) or
// a wildcard (*.example.com: "moc.elpmaxe.", which never matches
// example.com itself), as allowlist.Policy.MatchName does.

// sniKey is the sni_names key of an exact name (wildcard false) or a
// wildcard's domain, for session cgid; ok false for a name too long for
// the kernel's check, whose SNI it refuses anyway.
func sniKey(cgid uint64, name string, wildcard bool) (k sluiceSniKey, ok bool) {
	if len(name) == 0 || len(name) >= len(k.Data)-8 {
		return k, false
	}
	binary.LittleEndian.PutUint64(k.Data[:8], cgid)
	for i := 0; i < len(name); i++ {
		k.Data[8+i] = name[len(name)-1-i]
	}
	if wildcard {
		k.Data[8+len(name)] = '.'
	}
	// The NUL after an exact name, or the dot after a domain, is matched
	// too.
	k.Prefixlen = uint32(8+len(name)+1) * 8
	return k, true
}

// SetNames makes exact (host names) and wildcard (the domains of
// *.domain entries) the names the session's TLS connections to its
// learned addresses may carry, replacing what it had. Names are the
// allowlist's normalized ASCII form.
func (d *Datapath) SetNames(cgid uint64, exact, wildcard []string) error {
	if d.objs.SniNames == nil {
		return errors.New("the datapath has no TLS name map")
	}
	want := map[sluiceSniKey]bool{}
	for _, set := range []struct {
		names []string
		wild  bool
	}{{exact, false}, {wildcard, true}} {
		for _, n := range set.names {
			if k, ok := sniKey(cgid, n, set.wild); ok {
				want[k] = true
			}
		}
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], cgid)
	var k sluiceSniKey
	var v uint8
	var stale []sluiceSniKey
	it := d.objs.SniNames.Iterate()
	for it.Next(&k, &v) {
		if bytes.Equal(k.Data[:8], prefix[:]) && !want[k] {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list the TLS names of session %d: %w", cgid, err)
	}
	one := uint8(1)
	for k := range want {
		if err := d.objs.SniNames.Update(&k, &one, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set a TLS name of session %d: %w", cgid, err)
		}
	}
	for i := range stale {
		if err := d.objs.SniNames.Delete(&stale[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove a TLS name of session %d: %w", cgid, err)
		}
	}
	return nil
}

// attachSNI attaches the kernel TLS check's sk_msg program to its
// sockhash (again: the program of a new build replaces the old one). The
// attachment lives with the pinned map, so a datapath re-opened later
// finds it in force.
func (d *Datapath) attachSNI() error {
	err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: d.objs.SniSocks.FD(), Program: d.objs.SluiceSni, Attach: ebpf.AttachSkMsgVerdict})
	if err != nil {
		return fmt.Errorf("attach the TLS name check (sk_msg): %w", err)
	}
	return nil
}
