// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cilium/ebpf/link"
)

// Attaching at cgroups outside the root.
//
// The datapath judges the processes below the cgroup it was opened on
// (sluice's root). A Kubernetes node's pods live where the kubelet puts
// them (/kubepods/...), and nothing may move them: there the same
// programs, on the same maps, are attached at each confined pod's own
// cgroup as well, one more link per hook. The links are pinned under
// pinDir/at/<cgroup id>/, so a restarted agent leaves its pods confined,
// and they are updated with the root's when an upgrade replaces the
// programs. A pod's session is keyed by its cgroup's id as any session;
// its containers' cgroups below it reach it through an alias
// (AddAlias(pod, pod)).

const atDir = "at"

func (d *Datapath) atPin(cgid uint64, name string) string {
	return filepath.Join(d.pinDir, atDir, strconv.FormatUint(cgid, 10), name)
}

// AttachAt attaches every program in force at the root at the cgroup at
// path too, and returns that cgroup's id. Links already pinned for it are
// updated to the programs in force. On error, nothing of the call stays
// attached.
func (d *Datapath) AttachAt(path string) (uint64, error) {
	unlock, err := lockDir(d.pinDir)
	if err != nil {
		return 0, err
	}
	defer unlock()
	cgid, err := cgroupID(path)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(d.atPin(cgid, "x")), 0o700); err != nil {
		return 0, fmt.Errorf("attach at %s: %w", path, err)
	}
	i := 0
	for _, a := range attachments {
		if d.skip(a) {
			continue
		}
		prog := d.progs[i]
		i++
		pin := d.atPin(cgid, a.name)
		if l, err := link.LoadPinnedLink(pin, nil); err == nil {
			info, ierr := l.Info()
			if ierr == nil && info.Cgroup() != nil && info.Cgroup().CgroupId == cgid {
				err := l.Update(prog)
				l.Close()
				if err != nil {
					d.detachAt(cgid)
					return 0, fmt.Errorf("update pinned link %s: %w", pin, err)
				}
				continue
			}
			_ = l.Unpin()
			l.Close()
		}
		l, err := link.AttachCgroup(link.CgroupOptions{Path: path, Attach: a.attach, Program: prog})
		if err != nil {
			d.detachAt(cgid)
			return 0, fmt.Errorf("attach %s to %s: %w", a.name, path, err)
		}
		err = l.Pin(pin)
		l.Close()
		if err != nil {
			d.detachAt(cgid)
			return 0, fmt.Errorf("pin %s: %w", pin, err)
		}
	}
	return cgid, nil
}

// DetachAt removes the links AttachAt made for cgroup cgid; none is not
// an error.
func (d *Datapath) DetachAt(cgid uint64) error {
	unlock, err := lockDir(d.pinDir)
	if err != nil {
		return err
	}
	defer unlock()
	return d.detachAt(cgid)
}

func (d *Datapath) detachAt(cgid uint64) error {
	dir := filepath.Dir(d.atPin(cgid, "x"))
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("detach from cgroup %d: %w", cgid, err)
	}
	var errs []error
	for _, e := range ents {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unpin %s: %w", e.Name(), err))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AttachedAt lists the cgroups AttachAt attached at, by id.
func (d *Datapath) AttachedAt() ([]uint64, error) {
	ents, err := os.ReadDir(filepath.Join(d.pinDir, atDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list attached cgroups: %w", err)
	}
	var out []uint64
	for _, e := range ents {
		if id, err := strconv.ParseUint(e.Name(), 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// updateAt moves every link AttachAt made to the programs in force (an
// Open that loaded new programs). A link whose cgroup is gone is
// unpinned.
func (d *Datapath) updateAt() error {
	ids, err := d.AttachedAt()
	if err != nil {
		return err
	}
	var errs []error
	for _, cgid := range ids {
		i := 0
		for _, a := range attachments {
			if d.skip(a) {
				continue
			}
			prog := d.progs[i]
			i++
			l, err := link.LoadPinnedLink(d.atPin(cgid, a.name), nil)
			if err != nil {
				continue
			}
			if err := l.Update(prog); err != nil {
				errs = append(errs, fmt.Errorf("update the link of %s at cgroup %d: %w", a.name, cgid, err))
			}
			l.Close()
		}
	}
	return errors.Join(errs...)
}

// AttachedAtPinned reports whether the datapath pinned under pinDir is
// attached at cgroup cgid (AttachAt), without opening it: what the node's
// fail-closed hook asks of a pod's cgroup.
func AttachedAtPinned(pinDir string, cgid uint64) bool {
	_, err := os.Stat(filepath.Join(pinDir, atDir, strconv.FormatUint(cgid, 10), attachments[0].name))
	return err == nil
}
