// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/cgroups"
)

// AttachPod makes the cgroup at rel below the cgroup2 mount, a
// Kubernetes pod's (made by the kubelet, outside sluice's root), a
// session named as the cgroup (pod<uid>, or the systemd driver's
// kubepods-...-pod<uid>.slice): the datapath's programs are attached at that cgroup
// (loader.AttachAt), the session's entry is keyed by its id, and an alias
// of the pod's cgroup to itself makes every container cgroup the runtime
// makes below it the session's from its first instruction. Nothing is
// moved. Until the session's entry is written, the pod is not yet judged
// at all: the caller (the node agent's NRI plugin) attaches a pod before
// its first container is created and refuses the container when this
// fails.
//
// Close (the pod's end) removes the entry, the alias and the links and
// leaves the cgroup to the kubelet. An agent that stops without Close
// leaves all three in force: the pod stays confined, and the next agent
// attaches it again (its resolver and proxy move to new ports).
func (e *Enforcer) AttachPod(rel string, opts Options) (*Session, error) {
	cg, err := cgroups.Foreign(rel)
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(e.cfg.sessionDir(), cg.Name()+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create session lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock session %s: %w", cg.Name(), err)
	}
	s := &Session{e: e, lock: lock, policy: opts.Policy, attached: true, release: true, pod: true, cg: cg}
	if _, err := e.dp.AttachAt(cg.Path()); err != nil {
		lock.Close()
		return nil, err
	}
	if err := e.dp.AddAlias(cg.ID(), cg.ID()); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.configure(opts); err != nil {
		s.Close()
		return nil, err
	}
	if err := e.dp.Verify(cg.Path()); err != nil {
		s.Close()
		return nil, fmt.Errorf("pod cgroup %s: %w", cg.Name(), err)
	}
	return s, nil
}

// closePod undoes what AttachPod added beside the session's entry (which
// Close removes with the other sessions'): the alias and the links. While
// the pod's cgroup still holds a process they stay: with no entry the
// datapath refuses it all but loopback, where without the links it would
// be free. ReclaimPods removes them once the cgroup is gone.
func (s *Session) closePod() error {
	if pop, err := s.cg.Populated(); err == nil && pop {
		return nil
	}
	var errs []error
	if err := s.e.dp.RemoveAlias(s.cg.ID()); err != nil {
		errs = append(errs, err)
	}
	if err := s.e.dp.DetachAt(s.cg.ID()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReclaimPods detaches the links AttachAt left at cgroups that no longer
// exist (pods that ended while no agent ran), and their aliases.
func (e *Enforcer) ReclaimPods() error {
	ids, err := e.dp.AttachedAt()
	if err != nil {
		return err
	}
	live := map[uint64]bool{}
	if err := cgroups.WalkIDs(func(id uint64) { live[id] = true }); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if live[id] {
			continue
		}
		if err := e.dp.RemoveAlias(id); err != nil {
			errs = append(errs, err)
		}
		if err := e.dp.DetachAt(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
