// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"context"
	"errors"
	"fmt"
	"strings"

	godbus "github.com/godbus/dbus/v5"
)

// SubSlice is a slice unit below a systemd root's slice, holding no
// process of its own: a parent for units someone else asks systemd for
// (a container engine's scopes, with Docker's systemd cgroup driver).
type SubSlice struct {
	root *Root
	unit string
	id   uint64
}

// NewSubSlice starts the slice <root prefix>-<base>.slice below the root's
// slice and returns it once its cgroup exists. base's dashes become
// underscores: a dash in a slice's name nests it one level further. Only
// on a systemd root.
func (r *Root) NewSubSlice(base string) (*SubSlice, error) {
	if r.slice == "" {
		return nil, errors.New("cgroups: a sub-slice needs a root systemd manages")
	}
	unit := strings.TrimSuffix(r.slice, ".slice") + "-" + strings.ReplaceAll(base, "-", "_") + ".slice"
	if err := validName(unit); err != nil {
		return nil, fmt.Errorf("cgroups: slice: %w", err)
	}
	if err := startSlice(unit); err != nil {
		return nil, err
	}
	id, err := cgroupIDOf(r.mount, r.rel(unit))
	if err != nil {
		_ = stopUnit(unit)
		return nil, fmt.Errorf("cgroups: slice %s started but its cgroup is not below %s: %w", unit, r.Path(), err)
	}
	return &SubSlice{root: r, unit: unit, id: id}, nil
}

// Unit is the slice's unit name, which is also its directory's name under
// the root.
func (s *SubSlice) Unit() string { return s.unit }

// ID is the slice's cgroup id.
func (s *SubSlice) ID() uint64 { return s.id }

// Path is the slice's cgroup path.
func (s *SubSlice) Path() string { return s.root.Path() + "/" + s.unit }

// Stop stops the slice: systemd stops every unit in it, killing their
// processes, and removes its cgroup.
func (s *SubSlice) Stop() error { return stopUnit(s.unit) }

// stopUnit stops a unit and waits for the job; a unit that is not loaded
// is not an error.
func stopUnit(unit string) error {
	ctx, cancel := context.WithTimeout(context.Background(), systemdTimeout)
	defer cancel()
	c, err := systemdConn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	err = runJob(ctx, "stop "+unit, func(ch chan<- string) error {
		_, err := c.StopUnitContext(ctx, unit, "replace", ch)
		return err
	})
	var de godbus.Error
	if errors.As(err, &de) && de.Name == "org.freedesktop.systemd1.NoSuchUnit" {
		return nil
	}
	return err
}
