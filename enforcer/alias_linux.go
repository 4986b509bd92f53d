// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/cgroups"
)

// Alias is a cgroup under sluice's root that holds no process of its own
// and whose descendants, cgroups someone else makes below it later (a
// container engine's build steps), belong to a session from their first
// instruction: the datapath judges a cgroup with no session entry by its
// deepest aliased ancestor's session. Nothing is attached and nothing can
// race: the engine names and starts the cgroups, sluice never sees them.
type Alias struct {
	e      *Enforcer
	cg     *cgroups.Session  // under a root sluice manages
	sub    *cgroups.SubSlice // under a systemd root
	id     uint64
	target uint64
	// lock is held for the alias's life, as a session's: Reclaim removes
	// an alias whose owner died (kill -9 in the middle of a build) once
	// nothing runs below it.
	lock *os.File
}

// NewAlias creates an alias cgroup for the session target: a directory
// under a root sluice manages, a slice unit below the root's slice on a
// systemd root (where the engine's systemd cgroup driver asks systemd for
// its scopes in a slice). Its name starts with the session's, so a
// leftover is recognisable.
func (e *Enforcer) NewAlias(target *Session) (*Alias, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	base := strings.TrimSuffix(target.Name(), ".scope")
	a := &Alias{e: e, target: target.ID()}
	if e.root.Slice() != "" {
		// The scope's name is <root prefix>-<session>.scope: the slice is
		// <root prefix>-<session>_alias_<hex>.slice beside it.
		base = strings.TrimPrefix(base, strings.TrimSuffix(e.root.Slice(), ".slice")+"-")
		sub, err := e.root.NewSubSlice(base + ".alias-" + hex.EncodeToString(rnd[:]))
		if err != nil {
			return nil, fmt.Errorf("create alias slice: %w", err)
		}
		a.sub, a.id = sub, sub.ID()
	} else {
		cg, err := e.root.NewSession(base + ".alias-" + hex.EncodeToString(rnd[:]))
		if err != nil {
			return nil, fmt.Errorf("create alias cgroup: %w", err)
		}
		a.cg, a.id = cg, cg.ID()
	}
	lock, err := os.OpenFile(filepath.Join(e.cfg.sessionDir(), a.Name()+".lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		_ = a.remove(time.Now().Add(time.Second))
		return nil, fmt.Errorf("lock alias %s: %w", a.Name(), err)
	}
	a.lock = lock
	if err := e.dp.AddAlias(a.id, a.target); err != nil {
		_ = a.remove(time.Now().Add(time.Second))
		a.unlock()
		return nil, err
	}
	return a, nil
}

// unlock removes and lets go of the alias's lock.
func (a *Alias) unlock() {
	if a.lock != nil {
		os.Remove(a.lock.Name())
		a.lock.Close()
		a.lock = nil
	}
}

// Name is the alias cgroup's directory name under the root (on a systemd
// root, its slice unit's name).
func (a *Alias) Name() string {
	if a.sub != nil {
		return a.sub.Unit()
	}
	return a.cg.Name()
}

// Path is the alias cgroup's absolute path.
func (a *Alias) Path() string {
	if a.sub != nil {
		return a.sub.Path()
	}
	return a.cg.Path()
}

// Parent is what a container engine is given as the cgroup parent of
// what it makes below the alias: the slice's name for systemd's driver,
// the cgroup's path below the mount for the cgroupfs driver.
func (a *Alias) Parent() string {
	if a.sub != nil {
		return a.sub.Unit()
	}
	return "/" + a.e.root.Name() + "/" + a.cg.Name()
}

// Close removes the alias from the datapath (what is still running below
// it has loopback only from then on), kills every process below it, and
// removes its cgroup tree, deepest first, within timeout.
func (a *Alias) Close(timeout time.Duration) error {
	var errs []error
	if err := a.e.dp.RemoveAlias(a.id); err != nil {
		errs = append(errs, err)
	}
	if err := a.remove(time.Now().Add(timeout)); err != nil {
		errs = append(errs, err)
	}
	a.unlock()
	return errors.Join(errs...)
}

// remove kills what runs below the alias and removes its cgroups.
func (a *Alias) remove(deadline time.Time) error {
	if a.sub != nil {
		// systemd stops the units in the slice, killing their processes.
		return a.sub.Stop()
	}
	var errs []error
	if err := a.cg.Kill(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := removeTree(a.cg.Path(), deadline); err != nil {
		errs = append(errs, fmt.Errorf("remove alias cgroup: %w", err))
	}
	// On a hybrid host the engine made the same parent in every v1
	// hierarchy: empty once its containers are gone, and nobody else's
	// to remove (best effort: a v1 leftover confines nothing).
	for _, m := range cgroups.V1Hierarchies() {
		_ = removeTree(filepath.Join(m, a.e.root.Name(), a.cg.Name()), time.Now().Add(time.Second))
	}
	return errors.Join(errs...)
}

// removeTree removes the empty cgroup directories of the tree at top,
// deepest first, retrying EBUSY (a cgroup just emptied) until deadline.
func removeTree(top string, deadline time.Time) error {
	var dirs []string
	_ = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.SortFunc(dirs, func(x, y string) int { return strings.Count(y, "/") - strings.Count(x, "/") })
	for _, d := range dirs {
		for {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("%s: %w", d, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}
