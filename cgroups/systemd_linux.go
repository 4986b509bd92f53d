// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// systemdTimeout bounds every exchange with systemd: a hung PID 1 must not
// hang a session's start forever.
const systemdTimeout = 15 * time.Second

// SliceName returns the systemd slice that holds the sessions of the sluice
// instance called instance: "sluice.slice" for the default one. A '-' in a
// slice name means nesting (a-b.slice lives in a.slice), so dashes become
// underscores to keep the slice directly below the root slice.
func SliceName(instance string) string {
	return strings.ReplaceAll(instance, "-", "_") + ".slice"
}

// OpenSystemdRoot is OpenRoot for a host whose PID 1 is systemd, which owns
// the cgroup tree there: the root is the cgroup of the slice unit
// SliceName(instance), started over D-Bus when create is set (and already
// there otherwise, else the error wraps fs.ErrNotExist), and each session is
// a transient scope unit in it (NewSession), visible in systemctl status and
// systemd-cgls. systemd enables the memory and pids controllers for the
// slice's children because the scopes ask for accounting; Controllers says
// which ones its parent offers the slice.
func OpenSystemdRoot(instance string, create bool) (*Root, error) {
	slice := SliceName(instance)
	if err := validName(slice); err != nil {
		return nil, fmt.Errorf("cgroups: slice: %w", err)
	}
	mount, _, err := findMount()
	if err != nil {
		return nil, err
	}
	r := &Root{mount: mount, name: slice, slice: slice}
	if create {
		if err := startSlice(slice); err != nil {
			return nil, err
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(r.Path(), &st); err != nil {
		return nil, fmt.Errorf("cgroups: slice %s: %w", slice, err)
	}
	if st.Uid != 0 {
		return nil, fmt.Errorf("cgroups: slice cgroup %s is owned by uid %d, not root: refusing it", r.Path(), st.Uid)
	}
	if err := r.liftFence(); err != nil {
		return nil, err
	}
	offered, err := readList(r.mount, r.rel("cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	r.unavailable = make(map[string]string)
	for _, c := range wantedControllers {
		if offered[c] {
			r.controllers = append(r.controllers, c)
		} else {
			r.unavailable[c] = fmt.Sprintf("systemd does not offer it to %s (its parent does not enable it)", slice)
		}
	}
	return r, nil
}

// systemdConn connects to PID 1 over its private socket, which needs no
// D-Bus daemon (a minimal system may have none) but root.
func systemdConn(ctx context.Context) (*sddbus.Conn, error) {
	c, err := sddbus.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("cgroups: connect to systemd: %w", err)
	}
	return c, nil
}

// startSlice starts the slice (a unit file of that name, else a transient
// slice asking for memory and pids accounting) unless it is active already.
func startSlice(slice string) error {
	ctx, cancel := context.WithTimeout(context.Background(), systemdTimeout)
	defer cancel()
	c, err := systemdConn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if p, err := c.GetUnitPropertyContext(ctx, slice, "ActiveState"); err == nil && p.Value.Value() == "active" {
		return nil
	}
	props := []sddbus.Property{
		sddbus.PropDescription("sluice sessions"),
		{Name: "MemoryAccounting", Value: godbus.MakeVariant(true)},
		{Name: "TasksAccounting", Value: godbus.MakeVariant(true)},
	}
	return runJob(ctx, "start slice "+slice, func(ch chan<- string) error {
		_, err := c.StartTransientUnitContext(ctx, slice, "fail", props, ch)
		if err != nil && strings.Contains(err.Error(), "already exists") {
			// Loaded from a unit file, or a transient one that went
			// inactive: start it as it is.
			_, err = c.StartUnitContext(ctx, slice, "replace", ch)
		}
		return err
	})
}

// runJob runs a systemd job and waits, bounded by ctx, for its result.
func runJob(ctx context.Context, what string, start func(chan<- string) error) error {
	ch := make(chan string, 1)
	if err := start(ch); err != nil {
		return fmt.Errorf("cgroups: %s: %w", what, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("cgroups: %s: systemd job %s", what, res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cgroups: %s: no answer from systemd: %w", what, ctx.Err())
	}
}

// newScope creates the session as the transient scope unit name in the
// root's slice.
//
// systemd creates a scope only around processes that exist (its PIDs
// property), while a session's command must be born in its cgroup, never
// moved there. So a placeholder comes first: a sleep process that runs no
// code of the user's, started by this process and moved by systemd into the
// new scope. Once the scope exists the command is cloned straight into its
// cgroup (StartWith, CLONE_INTO_CGROUP), and the placeholder is killed
// (releaseStub). The scope has Delegate=yes, so that the session's cgroup
// files (limits, cgroup.kill) are sluice's to write, and it outlives the
// daemon: a restarted one finds it in the slice (Sessions).
func (r *Root) newScope(name string) (*Session, error) {
	if !strings.HasSuffix(name, ".scope") {
		return nil, fmt.Errorf("cgroups: session %q: a systemd session is a scope unit, named *.scope (Root.SessionName)", name)
	}
	if _, err := cgroupIDOf(r.mount, r.rel(name)); err == nil {
		return nil, fmt.Errorf("cgroups: create session: %s: %w", name, fs.ErrExist)
	}
	stub, err := startStub()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), systemdTimeout)
	defer cancel()
	c, err := systemdConn(ctx)
	if err != nil {
		killStub(stub)
		return nil, err
	}
	defer c.Close()
	props := []sddbus.Property{
		sddbus.PropDescription("sluice session " + name),
		sddbus.PropSlice(r.slice),
		sddbus.PropPids(uint32(stub.Pid)),
		{Name: "Delegate", Value: godbus.MakeVariant(true)},
		{Name: "MemoryAccounting", Value: godbus.MakeVariant(true)},
		{Name: "TasksAccounting", Value: godbus.MakeVariant(true)},
		// sluice ends sessions itself (Remove); a scope left inactive or
		// failed is garbage for systemd to collect.
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
	}
	err = runJob(ctx, "start scope "+name, func(ch chan<- string) error {
		_, err := c.StartTransientUnitContext(ctx, name, "fail", props, ch)
		return err
	})
	if err != nil {
		killStub(stub)
		return nil, err
	}
	s, err := r.session(name)
	if err != nil {
		killStub(stub)
		return nil, err
	}
	if !stubMoved(stub.Pid, "/"+r.rel(name)) {
		killStub(stub)
		return nil, fmt.Errorf("cgroups: scope %s: systemd did not move its placeholder into %s", name, s.Path())
	}
	s.stub = stub
	return s, nil
}

// startStub starts the scope's placeholder. It is not tied to this
// process's life (Pdeathsig fires when the creating thread ends, which
// in Go may be long before the process does): if the daemon dies before
// the command starts, the next one finds the scope in the slice with no
// owner and removes it, placeholder and all (Enforcer.Reclaim).
func startStub() (*os.Process, error) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return nil, fmt.Errorf("cgroups: scope placeholder: %w", err)
	}
	cmd := exec.Command(sleep, "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cgroups: scope placeholder: %w", err)
	}
	return cmd.Process, nil
}

// stubMoved waits a moment for the placeholder to show in the scope's
// cgroup: systemd has moved it when the job is done, but give the check
// some slack rather than fail a session on a stale read.
func stubMoved(pid int, member string) bool {
	for i := 0; i < 20; i++ {
		if inCgroup(pid, member) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func killStub(p *os.Process) {
	_ = p.Kill()
	_, _ = p.Wait()
}

// releaseStub ends the placeholder of a scope this process created, once the
// session's command is in it.
func (s *Session) releaseStub() {
	if s.stub != nil {
		killStub(s.stub)
		s.stub = nil
	}
}

// setUnitLimit records a limit as a property of the session's scope too, so
// that systemctl show tells it and systemd keeps it when it rewrites the
// scope's cgroup attributes (daemon-reload).
func (s *Session) setUnitLimit(prop string, n int64) error {
	if s.root.slice == "" {
		return nil
	}
	v := uint64(n)
	if n == -1 {
		v = ^uint64(0) // "infinity"
	}
	ctx, cancel := context.WithTimeout(context.Background(), systemdTimeout)
	defer cancel()
	c, err := systemdConn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetUnitPropertiesContext(ctx, s.name, true, sddbus.Property{Name: prop, Value: godbus.MakeVariant(v)}); err != nil {
		return fmt.Errorf("cgroups: scope %s: set %s: %w", s.name, prop, err)
	}
	return nil
}

// stopSlice stops the root's slice, which stops every scope still in it;
// a slice that is not loaded is not an error.
func (r *Root) stopSlice() error { return stopUnit(r.slice) }
