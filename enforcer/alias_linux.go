// SPDX-License-Identifier: Apache-2.0

package enforcer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
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
	cg     *cgroups.Session
	target uint64
}

// NewAlias creates an alias cgroup for the session target. Its name starts
// with the session's, so a leftover is recognisable.
func (e *Enforcer) NewAlias(target *Session) (*Alias, error) {
	if e.root.Slice() != "" {
		// A systemd-managed root's children are units: a plain directory
		// made there would be one systemd does not know.
		return nil, fmt.Errorf("alias cgroups need a root sluice manages itself, and %s is systemd's slice %s", e.root.Path(), e.root.Slice())
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := strings.TrimSuffix(target.Name(), ".scope") + ".alias-" + hex.EncodeToString(rnd[:])
	cg, err := e.root.NewSession(name)
	if err != nil {
		return nil, fmt.Errorf("create alias cgroup: %w", err)
	}
	a := &Alias{e: e, cg: cg, target: target.ID()}
	if err := e.dp.AddAlias(cg.ID(), a.target); err != nil {
		_ = cg.Remove(time.Second)
		return nil, err
	}
	return a, nil
}

// Name is the alias cgroup's directory name under the root.
func (a *Alias) Name() string { return a.cg.Name() }

// Path is the alias cgroup's absolute path.
func (a *Alias) Path() string { return a.cg.Path() }

// Close removes the alias from the datapath (what is still running below
// it has loopback only from then on), kills every process below it, and
// removes its cgroup tree, deepest first, within timeout.
func (a *Alias) Close(timeout time.Duration) error {
	var errs []error
	if err := a.e.dp.RemoveAlias(a.cg.ID()); err != nil {
		errs = append(errs, err)
	}
	if err := a.cg.Kill(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	deadline := time.Now().Add(timeout)
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
