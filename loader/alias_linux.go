// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// AddAlias makes the cgroup cgid's descendants (cgroups with no session of
// their own below it, made later by someone else, such as a container
// engine's build) belong to the session of cgroup target, from their
// first instruction: the datapath looks for the deepest aliased ancestor
// of a cgroup that has no session entry. cgid itself should hold no
// process and no session, or be target itself: a pod's cgroup is its
// session, and the alias gives it the containers' cgroups the runtime
// makes below it. The alias gives nothing the target's session
// does not have; removing the target's session leaves the alias pointing
// at nothing, which refuses all but loopback.
func (d *Datapath) AddAlias(cgid, target uint64) error {
	if cgid == 0 || target == 0 {
		return fmt.Errorf("alias of cgroup %d to %d: no cgroup", cgid, target)
	}
	if err := d.objs.SessionAliases.Update(cgid, target, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("alias of cgroup %d to session %d: %w", cgid, target, err)
	}
	if err := d.objs.AliasesOn.Update(uint32(0), uint32(1), ebpf.UpdateAny); err != nil {
		_ = d.objs.SessionAliases.Delete(cgid)
		return fmt.Errorf("turn session aliases on: %w", err)
	}
	return nil
}

// RemoveAlias deletes cgid's alias; none is not an error.
func (d *Datapath) RemoveAlias(cgid uint64) error {
	if err := d.objs.SessionAliases.Delete(cgid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove the alias of cgroup %d: %w", cgid, err)
	}
	return nil
}

// Aliases lists the aliases (cgroup id to the session's cgroup id).
func (d *Datapath) Aliases() (map[uint64]uint64, error) {
	out := map[uint64]uint64{}
	var k, v uint64
	it := d.objs.SessionAliases.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list session aliases: %w", err)
	}
	return out, nil
}

// removeAliasesTo deletes every alias to the session cgid.
func (d *Datapath) removeAliasesTo(cgid uint64, errs *[]error) {
	all, err := d.Aliases()
	if err != nil {
		*errs = append(*errs, err)
		return
	}
	for from, to := range all {
		if to == cgid {
			if err := d.RemoveAlias(from); err != nil {
				*errs = append(*errs, err)
			}
		}
	}
}
